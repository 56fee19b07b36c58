"""A run's tables merged at once: each table's merge (cdc.spark.job) submitted from a thread of its own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cdc.spark.report import Reporter, TableResult
from cdc.spark.scan import TableStats

# Tables merged at once in a caller's (warm) session, Spark jobs submitted from as many threads. A cycle of
# `cdc run --follow` touches a few rows in many tables: each table's time is then per-job latency (planning on
# the driver, task launch, the Parquet commit), not work, and while one table's job plans or commits, another's
# tasks run. Measured: 8 changes over 16 tables, warm, 37.6 s -> 24.7 s (median; load 10-23 on 2 cores).
PARALLEL_TABLES = 4


def merge_tables(merge_one: Callable[..., dict[str, Any]], infos: list[TableStats], phases: dict[str, float],
                 report: Reporter, at_once: int, done: int = 0) -> list[dict[str, Any]]:
    """Every table's merge, up to `at_once` at a time; entries (and each table's finish report) in infos order.

    done: tables of the run already merged (cdc.spark.small_tables), counted in the progress.
    """
    lock = threading.Lock()
    finished: dict[int, dict[str, Any]] = {}
    told = [0]  # tables whose finish was reported: in order, so progress reads as before

    def one(index: int, info: TableStats) -> dict[str, Any]:
        def step(name: str, table: str = f"{info.db}.{info.table}") -> None:
            with lock:
                report("merging", table=table, step=name, result=None)

        own: dict[str, float] = {}  # this table's phases, added to the run's under the lock
        entry = merge_one(info, phases=own, step=step)
        with lock:
            for name, seconds in own.items():
                phases[name] = round(phases.get(name, 0.0) + seconds, 3)
            finished[index] = entry
            while told[0] in finished:
                result = TableResult(**finished[told[0]]["result"])
                told[0] += 1
                report("merging", table=result.table, step=None, tables_done=done + told[0],
                       changes_done=report.now.changes_done + result.changes, result=result)
        return entry

    if len(infos) <= 1 or at_once <= 1:
        return [one(i, info) for i, info in enumerate(infos)]
    with ThreadPoolExecutor(max_workers=min(at_once, len(infos)), thread_name_prefix="merge") as pool:
        futures = [pool.submit(one, i, info) for i, info in enumerate(infos)]
        return [f.result() for f in futures]
