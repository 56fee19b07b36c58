"""`cdc resnapshot`: read tables again while tail keeps running, through watermarks in the binlog.

This process does the reading half of the DBLog / incremental-snapshot technique; tail does the rest
(cdc.capture.windows has the argument why the result is exact and crash-safe). Per table:

1. Read the binlog end (`cut`) before the first low mark: every row older than it that is not read again
   is gone from the source, and tail's end line says so downstream.
2. Per chunk: write a low mark, SELECT the next `chunk_size` rows by primary key (the schema read again in
   the window, so an ALTER between chunks is followed), write them to a chunk file in the state directory
   (fsync, rename), write a high mark, record the progress in resnapshot.json. Tail emits the chunk.
3. Once every chunk is read: wait until tail's checkpoint passes the last high mark. A chunk tail could not
   emit (a DDL of the table inside its window) has a `.redo` file: read again from that chunk's start.
4. Write the end mark, wait for tail to pass it, remove the chunk files.

kill -9 at any point: the rerun resumes at the chunk after the last one recorded; a chunk whose high mark
was written but not recorded is read again (an `r` line twice is harmless: the later one wins, and both
hold the row as the source had it). Marks are plain autocommit writes: the watermark table must be
writable. When it is not (a read-only replica, no write grant), each chunk is read under a table lock instead
(`--mode locked`, chosen by itself: cdc.lockedreads has that protocol and why it is exact).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pymysql

from cdc.changelog import file_seq
from cdc.checkpoints import ResnapshotCheckpoint, ResnapshotTable, TailCheckpoint
from cdc.config import Settings
from cdc.errors import PreconditionError, TimeoutExpired, UsageError
from cdc.lockedreads import AUTO, LOCKED, WATERMARKS
from cdc.masking import ColumnRules, read_rules
from cdc.snapshot.locked import ChunkWindows, LockedWindows, UnwritableMarksError, choose_mode
from cdc.snapshot.purge_gap import PurgeGap, captured_tables, restart_tail_after_purge
from cdc.source.binlog import Position, current_position
from cdc.source.connect import connection
from cdc.source.server import describe_server
from cdc.source.tables import (
    RAW_CONVERSIONS,
    TableInfo,
    TablePlan,
    bindable_key,
    is_captured,
    keyset_params,
    plan_table,
    prepare_session,
    qualified,
    select_sql,
    select_tables,
    stream_rows,
)
from cdc.state import StateDir
from cdc.watermarks import CANCEL, END, HIGH, LOW, Mark, chunk_name, redo_chunks, run_dir, split_table_name, write_chunk

log = logging.getLogger(__name__)

STAGE = ResnapshotCheckpoint.STAGE
RESNAPSHOT_CHUNK_SIZE = 10_000  # rows per window: short windows, few keys noted
SAME_SERVER_HINT = ("run cdc resnapshot against the server tail reads (its binlog carries the watermarks to tail); "
                    "after a failover, once `cdc tail --rebase` has moved the state directory to the new server")
MAX_ROUNDS = 5  # reads of a table's chunks again after DDL in their windows, before giving up
# MySQL errors of a mark that cannot be written, and what they mean here.
_NO_TABLE, _DENIED, _READ_ONLY, _SUPER_READ_ONLY = 1146, 1142, 1290, 1836


@dataclass(frozen=True)
class ResnapshotRequest:
    tables: tuple[str, ...]  # db.table names or globs, as --tables takes them
    chunk_size: int = RESNAPSHOT_CHUNK_SIZE
    add: bool = False  # `cdc snapshot --add-table`: tables tail does not capture yet, added at the first low mark
    cancel: bool = False  # give the unfinished run up: close its windows in tail, emit nothing more
    wait_timeout: float = 600.0  # seconds to wait for tail to reach a mark
    all: bool = False  # every captured table; restarts tail at the binlog end first if its binlog was purged (#27)
    mode: str = AUTO  # watermarks | locked | auto: watermarks if the watermark table is writable


@dataclass(frozen=True)
class ResnapshotProgress:
    table: str
    phase: str  # reading | waiting | done
    rows: int
    est_rows: int
    chunks: int


@dataclass
class ResnapshotSummary:
    run: str
    resumed: bool
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0
    purge_gap: PurgeGap | None = None  # --all after a purge: where tail's checkpoint moved from and to
    mode: str = WATERMARKS  # watermarks | locked: how the chunks were read

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "run": self.run, "resumed": self.resumed, "tables": self.tables,
                "seconds": round(self.seconds, 3),
                "purge_gap": None if self.purge_gap is None else self.purge_gap.to_dict()}


ProgressFn = Callable[[ResnapshotProgress], None]


def run_resnapshot(settings: Settings, request: ResnapshotRequest, *, on_progress: ProgressFn | None = None,
                   sleep: Callable[[float], None] = time.sleep,
                   on_gap: Callable[[PurgeGap], None] | None = None) -> ResnapshotSummary:
    """Read the tables again, chunk by chunk, into the change log through tail (or resume the run in progress)."""
    if request.chunk_size < 1:
        raise UsageError(f"--chunk-size {request.chunk_size} must be at least 1")
    if request.all and (request.tables or request.add):
        raise UsageError("--all reads every captured table: name no table with it")
    state = StateDir(settings.state_dir)
    if request.cancel:
        return cancel_resnapshot(settings, state)
    if TailCheckpoint.read(state) is None:
        raise PreconditionError(f"no tail checkpoint in {state.root}: a re-snapshot goes through a running tail",
                                hint="run `cdc snapshot` and `cdc tail --follow` first (same --state-dir)")
    started = time.monotonic()
    with state.lock(STAGE), connection(settings.mysql, conv=RAW_CONVERSIONS) as conn:
        prepare_session(conn)
        # The marks' positions and the cut are this server's binlog: only the server tail reads can hold them.
        server = describe_server(conn)
        state.bind_server(server.identity(), hint=SAME_SERVER_HINT)
        infos = captured_tables(conn, settings, state) if request.all else _select(conn, settings, request.tables,
                                                                                    request.add)
        mode = choose_mode(conn, request.mode, lambda: probe_marks(conn, settings.mysql.watermark_table))
        if mode == LOCKED and request.add:
            raise UsageError("--add-table needs watermarks (a writable watermark table); a locked read cannot add "
                             "a table to tail's capture", hint="add the table to mysql.tables and restart tail, then "
                             "`cdc resnapshot` it")
        checkpoint, resumed = _begin(state, infos)
        # After _begin: a kill -9 between the two finds the run to resume and tail's binlog still purged.
        gap = restart_tail_after_purge(state, conn, server) if request.all else None
        if gap is not None and on_gap is not None:
            on_gap(gap)
        reader = _Reader(state, settings, request, conn, checkpoint, on_progress, sleep, mode)
        for info in infos:
            reader.table(info)
        final = replace(reader.checkpoint, status="done")
        final.write(state)
        _remove_dir(state, final.run)
    summary = ResnapshotSummary(final.run, resumed, seconds=time.monotonic() - started, purge_gap=gap, mode=mode)
    summary.tables = {t.name: {"rows": t.rows, "chunks": t.chunks} for t in final.tables}
    return summary


def cancel_resnapshot(settings: Settings, state: StateDir) -> ResnapshotSummary:
    """Give the unfinished run up: a cancel mark per table closes a window it left open in tail (and frees tail.json).

    The rows its chunks already emitted stay (they hold the source's rows as read); its end lines are never
    written, so no row is removed downstream.
    """
    with state.lock(STAGE), connection(settings.mysql) as conn:
        known = ResnapshotCheckpoint.read(state)
        if known is None or known.status != "running":
            raise UsageError("no unfinished re-snapshot to cancel", hint="`cdc status` shows the last one")
        state.bind_server(describe_server(conn).identity(), hint=SAME_SERVER_HINT)
        # A locked run leaves no watermark window; tail closes its locked one when the run's directory goes.
        marks = choose_mode(conn, AUTO, lambda: probe_marks(conn, settings.mysql.watermark_table)) == WATERMARKS
        for table in known.tables if marks else ():
            write_mark(conn, settings.mysql.watermark_table, known.run,
                       Mark(known.run, CANCEL, table.db, table.table, at=time.time()).to_json())
        replace(known, status="cancelled").write(state)
        _remove_dir(state, known.run)
    return ResnapshotSummary(known.run, True, {t.name: {"rows": t.rows, "chunks": t.chunks} for t in known.tables})


def _select(conn: pymysql.Connection, settings: Settings, names: tuple[str, ...], add: bool) -> list[TableInfo]:
    if not names:
        raise UsageError("name at least one table: cdc resnapshot db.table [...]", hint="or --all: every captured table")
    infos = select_tables(conn, replace(settings.mysql, tables=names, databases=(), exclude_tables=()))
    mysql = settings.mysql
    for info in infos if not add else ():
        if not is_captured(mysql.databases, mysql.tables, mysql.exclude_tables, info.db, info.table):
            raise UsageError(f"{info.name} is not captured by tail (mysql.databases / tables / exclude_tables)",
                             hint="a re-snapshot reaches the change log through tail: capture the table first")
    return infos


def _begin(state: StateDir, infos: list[TableInfo]) -> tuple[ResnapshotCheckpoint, bool]:
    """The run in progress for these tables (resumed), or a new one."""
    known = ResnapshotCheckpoint.read(state)
    names = [i.name for i in infos]
    if known is not None and known.status == "running":
        if [t.name for t in known.tables] != names:
            raise UsageError(f"re-snapshot {known.run} of {', '.join(t.name for t in known.tables)} is not finished",
                             hint="rerun `cdc resnapshot " + " ".join(t.name for t in known.tables) + "` to finish it "
                             "first, or `cdc resnapshot --cancel` to give it up (tail keeps its checkpoint "
                             "before an unfinished chunk until then)")
        return known, True
    run = time.strftime("r%Y%m%d%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)
    tables = tuple(ResnapshotTable(i.db, i.table, est_rows=i.est_rows) for i in infos)
    checkpoint = ResnapshotCheckpoint(run, "running", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), 1, tables)
    checkpoint.write(state.ensure())
    return checkpoint, False


class _Reader:
    """One run: reads chunks between marks, records progress, waits for tail."""

    def __init__(self, state: StateDir, settings: Settings, request: ResnapshotRequest, conn: pymysql.Connection,
                 checkpoint: ResnapshotCheckpoint, on_progress: ProgressFn | None,
                 sleep: Callable[[float], None], mode: str = WATERMARKS) -> None:
        self.state, self.request, self.conn, self.checkpoint = state, request, conn, checkpoint
        self.on_progress, self.sleep = on_progress, sleep
        self.mysql = settings.mysql
        self.rules: ColumnRules = read_rules(state)
        self.directory = run_dir(state, checkpoint.run)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.windows: ChunkWindows = (
            LockedWindows(conn, state, self.directory, checkpoint.run, request.wait_timeout, sleep) if mode == LOCKED
            else _MarkWindows(self))

    def _entry(self, info: TableInfo) -> ResnapshotTable:
        return next(t for t in self.checkpoint.tables if t.name == info.name)

    def _save(self, entry: ResnapshotTable, **changes: Any) -> None:
        tables = tuple(entry if t.name == entry.name else t for t in self.checkpoint.tables)
        self.checkpoint = replace(self.checkpoint, tables=tables, **changes)
        self.checkpoint.write(self.state)

    def _report(self, entry: ResnapshotTable, phase: str) -> None:
        if self.on_progress is not None:
            self.on_progress(ResnapshotProgress(entry.name, phase, entry.rows, max(entry.est_rows, entry.rows),
                                                entry.chunks))

    def table(self, info: TableInfo) -> None:
        entry = self._entry(info)
        if entry.done:
            return
        if entry.cut is None:
            at = current_position(self.conn)  # before the first low mark: see the module docstring
            entry = replace(entry, cut=(at.file, at.pos))
            self._save(entry)
        for _ in range(MAX_ROUNDS):
            while not entry.read_all:
                entry = self._chunk(info, entry)
            self._report(entry, "waiting")
            self._wait_for_tail(current_position(self.conn))
            redo = sorted(c for c in redo_chunks(self.directory) if str(c) in entry.starts)
            if not redo:
                break
            log.warning(f"re-snapshot {self.checkpoint.run}: tail could not emit chunk(s) {redo} of {info.name} "
                        "(DDL inside their windows): reading again from there", extra={"stage": STAGE})
            for path in self.directory.glob("chunk-*.redo"):
                path.unlink()
            entry = replace(entry, last_key=entry.starts[str(redo[0])], read_all=False)
            self._save(entry)
        else:
            raise PreconditionError(f"{info.name} changed its schema inside {MAX_ROUNDS} rounds of re-snapshot chunks",
                                    hint="rerun `cdc resnapshot` once the DDL on the table is over")
        assert entry.cut is not None
        number = self.checkpoint.next_chunk
        self._save(entry, next_chunk=number + 1)
        self.windows.end(info, number, entry.cut, sum(t.rows for t in self.checkpoint.tables))
        self._wait_for_tail(current_position(self.conn))
        entry = replace(entry, done=True)
        self._save(entry)
        for path in self.directory.glob("chunk-*"):
            path.unlink()
        self._report(entry, "done")

    def _chunk(self, info: TableInfo, entry: ResnapshotTable) -> ResnapshotTable:
        number = self.checkpoint.next_chunk
        self._save(entry, next_chunk=number + 1)  # a number is never used twice, even after a kill -9
        name = chunk_name(number, secrets.token_hex(4))
        with self.windows.reading(info, number):
            plan = plan_table(self.conn, info, "", allow_no_pk=False)  # inside the window: the schema tail will hold
            self.rules.check_key(plan.schema)
            rows, last = self._read(plan, entry.last_key)
        write_chunk(self.directory / name, plan.schema, rows)
        self.windows.emit(info, number, name, sum(t.rows for t in self.checkpoint.tables))
        entry = replace(entry, last_key=last if last is not None else entry.last_key,
                        read_all=len(rows) < self.request.chunk_size, rows=entry.rows + len(rows),
                        chunks=entry.chunks + 1, starts={**entry.starts, str(number): entry.last_key})
        self._save(entry)
        self._report(entry, "reading")
        return entry

    def _read(self, plan: TablePlan, after: list[Any] | None) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]],
                                                                       list[Any] | None]:
        """(key, masked row) of the next chunk in change-log form, and the last key read (key order)."""
        converted, mask = plan.converted_columns(), self.rules.row_masker(plan.schema)
        key_names = sorted(plan.key)
        params = None if after is None else keyset_params(bindable_key(plan, after))
        rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
        row: dict[str, Any] | None = None
        sql = select_sql(plan, after_key=after is not None, limit=self.request.chunk_size)
        for values in stream_rows(self.conn, sql, params):
            row = dict(zip(plan.schema.column_names, values, strict=True))
            for column, encode in converted:
                row[column] = encode(row[column])
            rows.append(({k: row[k] for k in key_names}, mask(row)))
        return rows, None if row is None else [row[k] for k in plan.key]

    def _mark(self, mark: Mark) -> None:
        write_mark(self.conn, self.mysql.watermark_table, mark.run, mark.to_json())

    def _wait_for_tail(self, target: Position) -> None:
        """Until tail's checkpoint is at or past `target` (the binlog end after a mark)."""
        deadline = time.monotonic() + self.request.wait_timeout
        want = (file_seq(target.file), target.pos)
        while True:
            tail = TailCheckpoint.read(self.state)
            if tail is not None and (file_seq(tail.file), tail.pos) >= want:
                return
            if time.monotonic() > deadline:
                at = f"{tail.file}:{tail.pos}" if tail is not None else "nothing"
                raise TimeoutExpired(
                    f"tail has not reached {target.file}:{target.pos} in {self.request.wait_timeout:.0f}s "
                    f"(its checkpoint: {at}); the re-snapshot's rows reach the change log through tail",
                    hint="start `cdc tail --follow` on this --state-dir (or `cdc run`), then rerun `cdc resnapshot` "
                    "with the same tables: it resumes where it stopped")
            self.sleep(0.1)


class _MarkWindows:
    """Watermarks through the binlog (cdc.watermarks): a low mark before the chunk's SELECT, a high one after."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader

    @contextmanager
    def reading(self, info: TableInfo, chunk: int) -> Iterator[None]:
        self.reader._mark(Mark(self.reader.checkpoint.run, LOW, info.db, info.table, chunk, at=time.time(),
                               add=self.reader.request.add))
        yield

    def emit(self, info: TableInfo, chunk: int, file: str, row_base: int) -> None:
        self.reader._mark(Mark(self.reader.checkpoint.run, HIGH, info.db, info.table, chunk, file=file, at=time.time()))

    def end(self, info: TableInfo, chunk: int, cut: tuple[str, int], row_base: int) -> None:
        self.reader._mark(Mark(self.reader.checkpoint.run, END, info.db, info.table, cut=cut, at=time.time()))


def write_mark(conn: pymysql.Connection, table: str, slot: str, text: str) -> None:
    """One autocommit write of the watermark table's row `slot` (it reaches tail through the binlog)."""
    name = qualified(*split_table_name(table)).replace("%", "%%")
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"INSERT INTO {name} (slot, mark) VALUES (%s, %s) ON DUPLICATE KEY UPDATE mark = VALUES(mark)",
                           (slot, text))
    except pymysql.err.MySQLError as exc:
        raise _mark_error(exc, table) from None


def probe_marks(conn: pymysql.Connection, table: str) -> None:
    """Write a row that is no mark (tail ignores it): PreconditionError if the watermark table is not usable."""
    write_mark(conn, table, "probe", orjson.dumps({"probe": time.time()}).decode())


def _mark_error(exc: pymysql.err.MySQLError, table: str) -> PreconditionError:
    code = exc.args[0] if exc.args else None
    create = "CREATE TABLE " + qualified(*split_table_name(table)) + " (slot VARCHAR(64) NOT NULL PRIMARY KEY, " \
        "mark TEXT NOT NULL) ENGINE=InnoDB"
    if code == _NO_TABLE:
        return PreconditionError(f"the watermark table {table} does not exist", hint=f"create it: {create}")
    if code == _DENIED:
        return UnwritableMarksError(f"no INSERT/UPDATE grant on the watermark table {table}: {exc.args[1]}",
                                 hint=f"GRANT INSERT, UPDATE ON {qualified(*split_table_name(table))} TO the cdc user, "
                                 "or use --mode locked")
    if code in (_READ_ONLY, _SUPER_READ_ONLY):
        return UnwritableMarksError(
            f"the server is read-only ({exc.args[1]}): re-snapshot watermarks must be written through its binlog",
            hint="use --mode locked (or the default --mode auto): chunks read under a table lock, no write needed")
    return PreconditionError(f"writing a watermark to {table} failed: {exc}")


def _remove_dir(state: StateDir, run: str) -> None:
    directory = run_dir(state, run)
    if directory.is_dir():
        for path in directory.iterdir():
            path.unlink()
        directory.rmdir()
