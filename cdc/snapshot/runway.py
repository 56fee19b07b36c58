"""Will the binlogs outlive the snapshot? Estimate the copy time against the retention runway.

Tail must start at the hand-over position after the snapshot ends; if the server purges the
hand-over binlog file first, the snapshot is worthless. The estimate is: rows to copy
(information_schema.TABLES.TABLE_ROWS, an InnoDB approximation) divided by the rate measured
over one chunk read, encoded and written like the real copy. The snapshot warns (or with --strict
refuses) when the estimate exceeds RUNWAY_SHARE of the retention: tail also needs time to
start and catch up before the files it needs age out.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from cdc.durations import human_duration
from cdc.snapshot.lines import CompiledTable, LineParts, compile_table
from cdc.snapshot.wire import read_rows
from cdc.source.connect import query, variables
from cdc.source.server import ServerInfo
from cdc.source.tables import TablePlan, select_sql

RUNWAY_SHARE = 0.5
PROBE_ROWS = 20_000  # a few tens of ms at C-reader rates: a stable rate, small beside any table worth estimating
# The probe's rate over what a whole copy holds: the rate of the probe divided by this. What the probe does not
# pay: chunk seals and checkpoints, per-table queries, and other tables' wider rows. Calibrated by hand
# (2026-11-23, load 2.4-3.5): 1M `narrow` and 100,000 `all_types` rows of benchmarks/bench_snapshot.py,
# C and Python readers, estimated 1.16-1.82x their real copy time with this margin, 0.77-1.21x without.
PROBE_MARGIN = 1.5
# The probe's lines are thrown away: any position and source will do.
_PROBE_PARTS = LineParts(b"0000000000:000000000000:s", b',"src":{"row":', b'},"table":', b',"v":1}\n')
# RDS with `binlog retention hours` NULL purges binlogs as soon as no replica needs them
# (within minutes): treat that as a five-minute runway.
RDS_NULL_RETENTION_SECONDS = 300.0


@dataclass(frozen=True)
class Runway:
    rows: int
    data_bytes: int
    rows_per_second: float | None
    seconds: float | None  # estimated copy time; None when it could not be measured
    retention_seconds: float | None  # None = binlogs never expire
    retention_source: str

    @property
    def is_short(self) -> bool:
        if self.seconds is None or self.retention_seconds is None:
            return False
        return self.seconds > self.retention_seconds * RUNWAY_SHARE

    def message(self) -> str:
        if self.retention_seconds is None:
            return f"snapshot of ~{self.rows} rows; binlogs never expire ({self.retention_source})"
        estimate = "unknown" if self.seconds is None else human_duration(self.seconds)
        return (f"snapshot of ~{self.rows} rows estimated at {estimate}; binlogs expire after "
                f"{human_duration(self.retention_seconds)} ({self.retention_source})")

    def to_dict(self) -> dict[str, object]:
        return {"rows": self.rows, "data_bytes": self.data_bytes, "rows_per_second": self.rows_per_second,
                "seconds": self.seconds, "retention_seconds": self.retention_seconds,
                "retention_source": self.retention_source, "short": self.is_short}


def retention_from(variables_found: dict[str, str], rds_hours: str | None, is_managed: bool) -> tuple[float | None, str]:
    """Binlog retention in seconds (None: never purged) and where it comes from."""
    if is_managed:
        if rds_hours is None or rds_hours.strip().upper() in ("", "NULL"):
            return RDS_NULL_RETENTION_SECONDS, "RDS binlog retention hours is NULL"
        return float(rds_hours) * 3600, "RDS binlog retention hours"
    seconds = float(variables_found.get("binlog_expire_logs_seconds") or 0)
    if seconds > 0:
        return seconds, "binlog_expire_logs_seconds"
    days = float(variables_found.get("expire_logs_days") or 0)
    if days > 0:
        return days * 86400, "expire_logs_days"
    return None, "binlog_expire_logs_seconds and expire_logs_days are 0"


def read_retention(conn: pymysql.Connection, info: ServerInfo) -> tuple[float | None, str]:
    found = variables(conn, ["binlog_expire_logs_seconds", "expire_logs_days"])
    rds_hours = None
    if info.is_managed:
        try:
            rows = query(conn, "CALL mysql.rds_show_configuration")
        except pymysql.err.MySQLError:
            rows = []
        for row in rows:
            if str(row.get("name", "")).lower() == "binlog retention hours":
                rds_hours = None if row.get("value") is None else str(row["value"])
    return retention_from(found, rds_hours, info.is_managed)


def measure_rate(conn: pymysql.Connection, plans: Sequence[TablePlan], chunk_size: int, scratch: Path) -> float | None:
    """Rows per second copying the first chunk (at most PROBE_ROWS) of the biggest table like the copy does.

    The probe's lines are written and fsynced to a scratch file in `scratch` (the state directory, on the
    change log's file system): with the C reader the parse is ~0.2 us a row, so the rate is set by the
    server and the writes, and a parse-only probe read 2-4x faster than the real copy.
    """
    biggest = max(plans, key=lambda p: p.info.data_length, default=None)
    if biggest is None:
        return None
    started = [0.0]

    def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
        compiled = compile_table(biggest, _PROBE_PARTS, fields, converters)
        started[0] = time.perf_counter()  # compiling is once per table, not per row: not part of the rate
        return compiled

    sql = select_sql(biggest, after_key=False, limit=min(chunk_size, PROBE_ROWS))
    with tempfile.TemporaryFile(dir=scratch, prefix=".runway-probe-") as out:
        probe = _ProbeFile(out)
        count, _ = read_rows(conn, sql, None, compiled_for, 0, probe.write)
        if not probe.sync():
            return None  # a full or read-only state directory: the copy itself then stops with a clear error
    elapsed = time.perf_counter() - started[0]
    if count == 0 or elapsed <= 0:
        return None
    return count / elapsed / PROBE_MARGIN


class _ProbeFile:
    """The probe's scratch file; a failed write is remembered, not raised.

    Raising from the sink would abandon the SELECT mid-result, and the connection with it (wire.py
    closes a connection left out of step with the server), which the snapshot still needs.
    """

    def __init__(self, out: Any) -> None:
        self.out = out
        self.failed = False

    def write(self, _first_row: int, _count: int, lines: list[bytes]) -> None:
        if not self.failed:
            try:
                self.out.writelines(lines)
            except OSError:
                self.failed = True

    def sync(self) -> bool:
        """Flush and fsync; False when any write failed."""
        if not self.failed:
            try:
                self.out.flush()
                os.fsync(self.out.fileno())
            except OSError:
                self.failed = True
        return not self.failed


def estimate_runway(
    conn: pymysql.Connection, info: ServerInfo, plans: Sequence[TablePlan], chunk_size: int, scratch: Path
) -> Runway:
    rows = sum(p.info.est_rows for p in plans)
    data_bytes = sum(p.info.data_length for p in plans)
    retention, source = read_retention(conn, info)
    # Binlogs that never expire need no race against them: the probe (a chunk read, written and fsynced,
    # ~5-10% of a 300,000-row copy) is skipped.
    rate = None if retention is None else measure_rate(conn, plans, chunk_size, scratch)
    seconds = rows / rate if rate else None
    return Runway(rows, data_bytes, rate, seconds, retention, source)
