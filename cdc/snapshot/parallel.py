"""Read the later parts of a big table in helper processes that see the very same snapshot (`--workers`).

The copy is CPU-bound in Python (one core); a helper process per part reads it on another core.
Correctness rests on one rule: a helper's rows are used only if its view IS the main connection's
view. MariaDB reports the binlog position a consistent-snapshot transaction corresponds to
(Binlog_snapshot_file/_position, the same status the lock-free hand-over uses): two snapshots with
the same position contain exactly the same committed transactions. A helper whose position differs
(the server committed something in between) is dropped and its part read by the main connection
(MySQL has no such status: it copies with one connection). So the snapshot stays one consistent view.

Split points come from the main snapshot (`ORDER BY key LIMIT 1 OFFSET n`), so every part's first row
number is exact and the lines are those one connection writes. Helpers write each chunk to a temp
file (fsynced) and report it; the main process seals them in row order and advances snapshot.json
after each, exactly as for its own chunks, so a kill at any point resumes as before. A helper that
fails or lags behind is never waited on past its death: the main connection reads on from the last
sealed key (a failure a helper met, the main one meets again and reports).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pymysql

from cdc.config import MySQLSettings
from cdc.masking import ColumnRules
from cdc.snapshot.handover import begin_snapshot
from cdc.snapshot.lines import CompiledTable, LineParts, compile_table
from cdc.snapshot.wire import read_rows
from cdc.source.connect import connection, query
from cdc.source.tables import RAW_CONVERSIONS, TablePlan, bindable_key, keyset_params, prepare_session, select_sql

MIN_PART_ROWS = 50_000  # below this, starting a process and a connection costs more than it saves
TEMP_PREFIX = ".seg-snapshot-part"  # discard_stale's glob .seg-snapshot-*.tmp removes what a crash leaves


@dataclass(frozen=True)
class Part:
    """Rows after `after_key` (change-log form), numbered from `first_row`; `rows` of them, or to the end."""

    index: int
    after_key: list[Any]
    first_row: int
    rows: int | None


@dataclass(frozen=True)
class PartChunk:
    path: Path  # temp file holding the chunk's lines, fsynced
    first_row: int
    count: int
    last_key: list[Any]


def view_position(conn: pymysql.Connection) -> tuple[str, int] | None:
    """The binlog position the open consistent snapshot corresponds to (MariaDB), else None."""
    try:
        rows = query(conn, "SHOW STATUS LIKE 'binlog_snapshot_%'")
    except pymysql.err.MySQLError:
        return None
    found = {str(r["Variable_name"]).lower(): r["Value"] for r in rows}
    if not found.get("binlog_snapshot_file"):
        return None
    return str(found["binlog_snapshot_file"]), int(found["binlog_snapshot_position"])


def split_table(conn: pymysql.Connection, plan: TablePlan, workers: int, first_row: int,
                compiled_for: Callable[..., CompiledTable]) -> tuple[int, list[Part]]:
    """(rows the main connection reads first, the parts after them); no parts when not worth it."""
    size = plan.info.est_rows // workers if plan.has_pk else 0
    if workers < 2 or size < MIN_PART_ROWS:
        return 0, []
    parts: list[Part] = []
    for i in range(1, workers):
        line: list[bytes] = []
        sql = select_sql(plan, after_key=False, limit=1) + f" OFFSET {i * size - 1}"
        read_rows(conn, sql, None, compiled_for, 0, lambda _n, _count, lines: line.extend(lines))  # noqa: B023 - runs now
        if not line:
            break  # fewer rows than the estimate: the previous part runs to the end
        key = orjson.loads(line[0])["key"]
        parts.append(Part(i, [key[k] for k in plan.key], first_row + i * size, None))
    if not parts:
        return 0, []
    # Each part but the last holds exactly `size` rows of this snapshot.
    parts = [Part(p.index, p.after_key, p.first_row, size if j < len(parts) - 1 else None) for j, p in enumerate(parts)]
    return size, parts


class Helpers:
    """The helper processes of one table, their chunks handed out in row order."""

    def __init__(self, mysql: MySQLSettings, plan: TablePlan, line_parts: LineParts, parts: Sequence[Part],
                 chunk_size: int, view: tuple[str, int], directory: Path) -> None:
        # fork: the helpers start in milliseconds, and nothing secret goes through a pipe or argv.
        context = multiprocessing.get_context("fork")
        self.directory = directory
        self.complete = False  # every part was handed out to its end
        # Chunk files chunks() gave out: the caller renames them into segments (on its sealing thread, maybe
        # after stop() ran), so stop() must leave them alone.
        self.handed_out: set[Path] = set()
        self.running: list[tuple[Part, Any, multiprocessing.connection.Connection]] = []
        for part in parts:
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_helper_main, daemon=True, name=f"snapshot-part-{part.index}",
                                      args=(mysql, plan, line_parts, part, chunk_size, view, directory, send))
            process.start()
            send.close()
            self.running.append((part, process, receive))

    def chunks(self) -> Iterator[PartChunk]:
        """Every part's chunks in row order; stops early (after stop()) at the first helper that failed."""
        expected = self.running[0][0].first_row if self.running else 0
        for part, process, receive in self.running:
            if part.first_row != expected:
                return  # the part before ended early: not the snapshot we split
            while True:
                message = _receive(process, receive)
                if message is None or message[0] != "chunk":
                    if message is None or message[0] != "done" or (part.rows is not None and message[1] != expected):
                        return
                    break
                chunk = PartChunk(Path(message[1]), message[2], message[3], message[4])
                if chunk.first_row != expected:
                    return
                expected += chunk.count
                self.handed_out.add(chunk.path)
                yield chunk
        self.complete = True

    def stop(self) -> None:
        """End every helper and remove its chunk files that were not handed out (nobody will seal them)."""
        for _, process, receive in self.running:
            if process.is_alive():
                process.terminate()
            process.join(timeout=10)
            receive.close()
            for path in self.directory.glob(f"{TEMP_PREFIX}{process.pid}-*.tmp"):
                if path not in self.handed_out:
                    path.unlink(missing_ok=True)
        self.running = []


def _receive(process: Any, receive: multiprocessing.connection.Connection) -> tuple[Any, ...] | None:
    """The helper's next message; None once it has died without one."""
    while not receive.poll(1.0):
        if not process.is_alive() and not receive.poll(0):
            return None
    try:
        message: tuple[Any, ...] = receive.recv()
    except (EOFError, OSError):
        return None
    return message


def _helper_main(mysql: MySQLSettings, plan: TablePlan, line_parts: LineParts, part: Part, chunk_size: int,
                 view: tuple[str, int], directory: Path, send: multiprocessing.connection.Connection) -> None:
    parent = os.getppid()
    try:
        with connection(mysql, conv=RAW_CONVERSIONS) as conn:
            prepare_session(conn)
            begin_snapshot(conn)
            if view_position(conn) != view:
                send.send(("other-view",))  # something committed since the main snapshot: not the same rows
                return
            _read_part(conn, plan, line_parts, part, chunk_size, directory, send, parent,
                       ColumnRules.from_settings(mysql))
    except BaseException as exc:  # noqa: BLE001 - reported; the main connection reads the part instead
        send.send(("error", f"{type(exc).__name__}: {exc}"))


def _read_part(conn: pymysql.Connection, plan: TablePlan, line_parts: LineParts, part: Part, chunk_size: int,
               directory: Path, send: multiprocessing.connection.Connection, parent: int,
               rules: ColumnRules) -> None:
    compiled: list[CompiledTable] = []

    def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
        if not compiled:
            compiled.append(compile_table(plan, line_parts, fields, converters, rules))
        return compiled[0]

    n, last, remaining = part.first_row, bindable_key(plan, part.after_key), part.rows
    while (remaining is None or remaining > 0) and os.getppid() == parent:
        limit = chunk_size if remaining is None else min(chunk_size, remaining)
        path = directory / f"{TEMP_PREFIX}{os.getpid()}-{n}.tmp"
        with open(path, "wb") as out:
            count, last_line = read_rows(conn, select_sql(plan, after_key=True, limit=limit), keyset_params(last),
                                         compiled_for, n, lambda _first, _count, lines: out.writelines(lines))
            out.flush()
            os.fsync(out.fileno())
        if last_line is None or os.getppid() != parent:
            path.unlink()  # nothing read, or the main process died (kill -9): nobody will seal this file
            break
        key = orjson.loads(last_line)["key"]
        last_key = [key[k] for k in plan.key]
        send.send(("chunk", str(path), n, count, last_key))
        n, last = n + count, bindable_key(plan, last_key)
        remaining = None if remaining is None else remaining - count
        if count < limit:
            break
    send.send(("done", n))
