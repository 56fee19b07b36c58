"""`cdc snapshot`: a consistent initial copy of the selected tables, handed over to tail at an exact position.

How it works (docs/guide.md "cdc snapshot" tells the user the same):
1. Select the tables, refuse those without a primary key (unless allow_no_pk), and estimate the
   copy time against the binlog retention (cdc.snapshot.runway).
2. Start a REPEATABLE READ consistent-snapshot transaction and read the hand-over position that
   matches it (cdc.snapshot.handover: lock-free on MariaDB, else a short lock).
3. Record each table's schema at the hand-over, then write snapshot.json (status "running").
4. Copy each table in primary-key order with one streaming SELECT, cut into chunks of `r` lines
   (cdc.snapshot.chunks), each a sealed segment followed by a checkpoint of its last key
   (data first, checkpoint last); a resumed run starts after that key (a keyset predicate).
5. Mark snapshot.json "done": tail's first run starts at its hand-over position.

Resuming after a crash: the old transaction's view is gone. A resumed run keeps the original
hand-over position and row numbering and reads the remaining chunks in a NEW consistent snapshot.
Rows changed between the hand-over and the resume are then read in their newer state, and the
same changes are also in the binlog after the hand-over. Snapshot lines sort before every binlog
line (kind `s` < `b` at the hand-over, and binlog events lie after it), and downstream applies
changes per key in position order (upsert / delete by key), so the end state is still exact.
A chunk sealed just before the crash (segment written, checkpoint not yet advanced) is adopted,
not re-read: sealed segments are never rewritten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import pymysql

from cdc.changelog import position_string, read_segment, segment_name
from cdc.config import MySQLSettings, Settings
from cdc.errors import DataError, PositionError, PreconditionError, UsageError
from cdc.masking import ColumnRules, bind_rules
from cdc.schema import SchemaHistory
from cdc.snapshot.checkpoint import DONE, RUNNING, STAGE, SnapshotCheckpoint, TableState, read_checkpoint
from cdc.snapshot.chunks import ChunkCutter
from cdc.snapshot.handover import LOCK_MODES, take_handover
from cdc.snapshot.lines import CompiledTable, LineParts, RowEncodeError, compile_table
from cdc.snapshot.parallel import Helpers, split_table, view_position
from cdc.snapshot.resume import check_selection, resume
from cdc.snapshot.runway import Runway, estimate_runway
from cdc.snapshot.seal import ChunkSealer
from cdc.snapshot.wire import check_driver, read_rows
from cdc.source.capturable import require_capturable
from cdc.source.connect import connection, query
from cdc.source.server import ServerInfo, describe_server
from cdc.source.tables import (
    RAW_CONVERSIONS,
    TablePlan,
    bindable_key,
    keyset_params,
    plan_table,
    prepare_session,
    select_sql,
    select_tables,
)
from cdc.state import StateDir

DEFAULT_CHUNK_SIZE = 50_000  # rows per segment and checkpoint; 10,000 cost ~18% more CPU (bench_snapshot.py)


@dataclass(frozen=True)
class SnapshotRequest:
    chunk_size: int = DEFAULT_CHUNK_SIZE
    lock: str = "auto"
    allow_no_pk: bool = False
    strict: bool = False
    workers: int = 1  # processes reading one table's parts at once (MariaDB; see parallel.py)


@dataclass(frozen=True)
class TableProgress:
    table: str
    rows: int
    estimate: int
    chunks: int
    done: bool


@dataclass(frozen=True)
class SnapshotSummary:
    status: str  # "done", or "already-done" when snapshot.json was done before this run
    resumed: bool
    checkpoint: SnapshotCheckpoint
    seconds: float
    runway: Runway | None = None
    warnings: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.checkpoint.tables.values())

    @property
    def chunks(self) -> int:
        return sum(t.chunks for t in self.checkpoint.tables.values())

    def to_dict(self) -> dict[str, Any]:
        cp = self.checkpoint
        return {
            "status": self.status, "resumed": self.resumed, "handover": cp.handover.to_dict(),
            "lock": cp.lock, "lock_seconds": round(cp.lock_seconds, 6), "rows": self.rows, "chunks": self.chunks,
            "tables": {n: {"rows": t.rows, "chunks": t.chunks} for n, t in cp.tables.items()},
            "seconds": round(self.seconds, 3), "runway": self.runway.to_dict() if self.runway else None,
            "warnings": list(self.warnings),
        }


# A snapshot's positions are the server's it read: there is nothing to rebase (tail's --rebase is for a
# pipeline whose snapshot is done, after a failover).
FOREIGN_SERVER_HINT = (
    "point --host/--port at the server this state directory was started on, or start the snapshot over in a new "
    "--state-dir; after a failover, a pipeline whose snapshot is done goes on with `cdc tail --until-now --rebase`")

ProgressFn = Callable[[TableProgress], None]
WarnFn = Callable[[str], None]
log = logging.getLogger(__name__)


def run_snapshot(
    settings: Settings, request: SnapshotRequest, *, on_progress: ProgressFn | None = None,
    on_warning: WarnFn | None = None,
) -> SnapshotSummary:
    """Take (or resume) the snapshot into the change log; return what was copied."""
    if request.chunk_size < 1:
        raise UsageError(f"--chunk-size {request.chunk_size} must be at least 1")
    if request.workers < 1:
        raise UsageError(f"--workers {request.workers} must be at least 1")
    if request.lock not in LOCK_MODES:  # before anything else: a typo must not pass as "already done"
        raise UsageError(f"--lock {request.lock!r} is not one of {', '.join(LOCK_MODES)}")
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        log.warning(message, extra={"stage": STAGE})
        if on_warning:
            on_warning(message)

    state = StateDir(settings.state_dir).ensure()
    started = time.monotonic()
    with state.lock(STAGE), connection(settings.mysql, conv=RAW_CONVERSIONS) as conn:
        check_driver(conn)
        prepare_session(conn)
        info = describe_server(conn)
        state.bind_server(info.identity(), hint=FOREIGN_SERVER_HINT)
        checkpoint = read_checkpoint(state)
        if checkpoint is not None and checkpoint.status == DONE:
            check_selection(settings, conn, checkpoint)  # "already done" only for the tables asked for
            return SnapshotSummary("already-done", False, checkpoint, 0.0)
        runway = None
        if checkpoint is None:
            checkpoint, plans, runway = _start(settings, conn, info, state, request, warn)
        else:
            checkpoint, plans = resume(settings, conn, info, state, checkpoint)
        h = checkpoint.handover
        log.info(f"snapshot {'resumed' if checkpoint.resumes else 'started'}: {len(plans)} table(s), hand-over "
                 f"{h.file}:{h.pos} (lock {checkpoint.lock}, held {checkpoint.lock_seconds:.3f}s)",
                 extra={"stage": STAGE, "position": f"{h.file}:{h.pos}", "tables": len(plans)})
        copier = _Copier(state, checkpoint, request, settings.mysql, on_progress)
        try:
            for plan in plans:
                copier.copy_table(conn, plan, adopt=checkpoint.resumes > 0)
                entry = copier.checkpoint.tables[plan.name]
                log.info(f"snapshot copied {plan.name}: {entry.rows:,} rows in {entry.chunks} chunk(s)",
                         extra={"stage": STAGE, "table": plan.name, "rows": entry.rows, "chunks": entry.chunks})
        finally:
            copier.sealer.close()  # the last chunk is sealed and checkpointed before "done" is written
        final = replace(copier.checkpoint, status=DONE)
        final.write(state)
        conn.rollback()  # end the read-only snapshot transaction
    return SnapshotSummary(DONE, final.resumes > 0, final, time.monotonic() - started, runway, tuple(warnings))


def _start(
    settings: Settings, conn: pymysql.Connection, info: ServerInfo, state: StateDir, request: SnapshotRequest,
    warn: WarnFn,
) -> tuple[SnapshotCheckpoint, list[TablePlan], Runway]:
    # A server tail will refuse is refused before the copy, not after it (hours, on a large database).
    require_capturable(conn, info, settings.mysql.databases, settings.mysql.tables,
                       f"the server at {settings.mysql.describe()}")
    tables = select_tables(conn, settings.mysql)
    # Refuse tables without a key and estimate the runway before any lock is taken. Columns and keys are enough
    # here: the keys between tables are read once, inside the snapshot (each read opens every user table).
    early = [plan_table(conn, t, "", allow_no_pk=request.allow_no_pk, foreign_keys=False) for t in tables]
    rules = ColumnRules.from_settings(settings.mysql)
    for plan in early:
        rules.check_key(plan.schema)
    bind_rules(state, rules)  # the rules tail must use too (refused if a capture already used others)
    runway = estimate_runway(conn, info, early, request.chunk_size, state.root)
    if runway.is_short:
        if request.strict:
            raise PreconditionError(
                f"the snapshot would outlive the binlogs it needs: {runway.message()}",
                hint="raise binlog retention first (`cdc set-retention`), or run without --strict to try anyway",
            )
        warn(f"binlog runway is short: {runway.message()}; raise retention with `cdc set-retention`")
    result = take_handover(settings.mysql, conn, info, tables, request.lock)
    for message in result.warnings:
        warn(message)
    h = result.handover
    at = position_string(h.file, h.pos, 0, snapshot=True)
    plans = [plan_table(conn, t, at, allow_no_pk=request.allow_no_pk) for t in tables]  # inside the snapshot
    history = SchemaHistory(state.schema)
    for plan in plans:
        history.record(plan.schema)
    started_at = query(conn, "SELECT DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%dT%H:%i:%sZ') AS t")[0]["t"]
    checkpoint = SnapshotCheckpoint(
        RUNNING, h, {p.name: TableState(p.info.db, p.info.table) for p in plans}, 0, str(started_at),
        info.server_id, result.lock, result.lock_seconds,
    )
    checkpoint.write(state)
    return checkpoint, plans, runway


class _Copier:
    """Writes chunks as sealed segments of `r` lines and advances snapshot.json after each."""

    def __init__(self, state: StateDir, checkpoint: SnapshotCheckpoint, request: SnapshotRequest,
                 mysql: MySQLSettings, on_progress: ProgressFn | None) -> None:
        self.state, self.checkpoint, self.mysql, self.on_progress = state, checkpoint, mysql, on_progress
        self.chunk_size, self.workers = request.chunk_size, request.workers
        self.rules = ColumnRules.from_settings(mysql)
        self.sealer = ChunkSealer(state)
        h = checkpoint.handover
        self.prefix = position_string(h.file, h.pos, 0, snapshot=True)[:-12]
        dumps = orjson.dumps
        self.parts = LineParts(
            prefix=self.prefix.encode(),
            src_head=(b',"src":{"file":' + dumps(h.file) + b',"gtid":' + dumps(h.gtid)
                      + b',"pos":' + str(h.pos).encode() + b',"row":'),
            src_tail=b',"server_id":' + str(checkpoint.server_id).encode() + b',"xid":null},"table":',
            line_tail=b',"ts":' + dumps(checkpoint.started_at) + b',"v":1}\n',
        )
        self._compiled: dict[str, CompiledTable] = {}

    def position(self, row: int) -> str:
        return f"{self.prefix}{row:012d}"

    def copy_table(self, conn: pymysql.Connection, plan: TablePlan, *, adopt: bool) -> None:
        entry = self.checkpoint.tables[plan.name]
        if adopt and not entry.done:
            entry = self._adopt_sealed(plan, entry)
        self._report(plan, entry)
        ahead, helpers = self._start_helpers(conn, plan, entry)  # rows read here before the helpers' parts
        try:
            while not entry.done:
                if helpers is not None and ahead == 0:
                    entry = self._take_helper_chunks(plan, entry, helpers)
                    helpers.stop()
                    helpers = None  # done, or a helper failed: this connection reads on from the last key
                    continue
                # One SELECT reads the rest of the table (or the rows before the helpers' parts), cut into
                # chunks here: a query per chunk left the server idle while the client drained each one
                # (~20% of the wall time at 50,000-row chunks, benchmarks/bench_snapshot.py).
                limit = None if helpers is None else ahead
                before = entry.rows
                entry = self._copy_run(conn, plan, entry, limit)
                ahead -= entry.rows - before
        finally:
            if helpers is not None:
                helpers.stop()

    def _copy_run(self, conn: pymysql.Connection, plan: TablePlan, entry: TableState,
                  limit: int | None) -> TableState:
        """Read the rows after entry.last_key (at most `limit`) with one SELECT; seal them chunk by chunk."""
        last = None if entry.last_key is None else bindable_key(plan, entry.last_key)
        sql = select_sql(plan, after_key=last is not None, limit=limit)
        state = [entry]

        def seal(count: int, line: bytes | None, done: bool) -> None:
            entry = state[0]
            if count and line is not None:
                key = orjson.loads(line)["key"]
                # Kept as the change log encodes it and bound from that, exactly as a resumed run does (a
                # DECIMAL as text would compare as a double).
                entry = replace(entry, rows=entry.rows + count, chunks=entry.chunks + 1,
                                last_key=[key[k] for k in plan.key])
            state[0] = replace(entry, done=done)
            self._advance(state[0], count)
            self._report(plan, state[0])

        # Without a key a resumed run could not find its place: the whole table is one chunk.
        cutter = ChunkCutter(self.chunk_size if plan.has_pk else None,
                             lambda row, lines, count: self.sealer.write(self.position(row), lines, count), seal)
        try:
            count, _ = read_rows(conn, sql, None if last is None else keyset_params(last), self._compiler(plan),
                                 self.checkpoint.row_counter, cutter.write, self.sealer.write_while)
        except RowEncodeError as exc:
            raise DataError(f"table {plan.name}: a value of the row at {self.position(exc.row)} cannot be "
                            f"encoded exactly ({exc.cause})",
                            hint="report this as a cdc bug with the column's type") from exc.cause
        cutter.finish(done=limit is None or count < limit)
        return state[0]

    def _start_helpers(self, conn: pymysql.Connection, plan: TablePlan,
                       entry: TableState) -> tuple[int, Helpers | None]:
        """Fork helpers for the later parts of a big table not started yet (MariaDB only: see parallel.py)."""
        view = view_position(conn) if self.workers > 1 and entry.rows == 0 and not entry.done else None
        if view is None:
            return 0, None
        ahead, parts = split_table(conn, plan, self.workers, self.checkpoint.row_counter, self._compiler(plan))
        if not parts:
            return 0, None
        self.sealer.wait()  # fork with nothing queued and the sealing thread idle
        return ahead, Helpers(self.mysql, plan, self.parts, parts, self.chunk_size, view, self.state.changelog)

    def _take_helper_chunks(self, plan: TablePlan, entry: TableState, helpers: Helpers) -> TableState:
        """Seal the helpers' chunks in row order, a checkpoint after each, as if this connection had read them."""
        for chunk in helpers.chunks():
            if chunk.first_row != self.checkpoint.row_counter:
                return entry
            entry = replace(entry, rows=entry.rows + chunk.count, chunks=entry.chunks + 1, last_key=chunk.last_key)
            self._advance(entry, chunk.count, chunk_file=chunk.path)
            self._report(plan, entry)
        if helpers.complete:
            entry = replace(entry, done=True)
            self._advance(entry, 0)
        return entry

    def _compiler(self, plan: TablePlan) -> Callable[[Sequence[Any], Sequence[Any]], CompiledTable]:
        """Compile the table's reader once, from the first chunk's result columns (the same for every chunk)."""

        def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
            types = tuple(int(f.type_code) for f in fields)
            cached = self._compiled.get(plan.name)
            if cached is None or cached.field_types != types:
                cached = self._compiled[plan.name] = compile_table(plan, self.parts, fields, converters, self.rules)
            return cached

        return compiled_for

    def _adopt_sealed(self, plan: TablePlan, entry: TableState) -> TableState:
        """Take over segments sealed before a crash whose checkpoint never advanced (never rewrite them)."""
        self.sealer.wait()  # the previous table's last chunk is sealed: it is not one to adopt
        while True:
            path = self.state.changelog / segment_name(self.position(self.checkpoint.row_counter))
            if not path.exists():
                return entry
            count, last = 0, None
            for last in read_segment(path):  # noqa: B007 - the loop keeps the segment's last line
                count += 1
            if last is None or (last["db"], last["table"]) != (plan.info.db, plan.info.table):
                raise PositionError(f"segment {path} does not continue table {plan.name} as snapshot.json says",
                                    hint="the state directory was changed by hand: start over in a new one")
            entry = replace(entry, done=not plan.has_pk, rows=entry.rows + count, chunks=entry.chunks + 1,
                            last_key=[last["key"][k] for k in plan.key])
            self._advance(entry, count, seal=False)

    def _advance(self, entry: TableState, count: int, *, seal: bool = True, chunk_file: Path | None = None) -> None:
        """Count the chunk in; seal its segment and write the checkpoint in the background (in that order)."""
        cp = self.checkpoint
        self.checkpoint = replace(cp, tables={**cp.tables, entry.name: entry}, row_counter=cp.row_counter + count)
        if chunk_file is not None:  # a helper's chunk: its file becomes the segment
            final = self.state.changelog / segment_name(self.position(cp.row_counter))
            self.sealer.install(chunk_file, final, self.checkpoint.to_dict())
        else:
            self.sealer.commit(self.checkpoint.to_dict(), seal=seal and count > 0)

    def _report(self, plan: TablePlan, entry: TableState) -> None:
        if self.on_progress:
            estimate = entry.rows if entry.done else max(plan.info.est_rows, entry.rows)
            self.on_progress(TableProgress(plan.name, entry.rows, estimate, entry.chunks, entry.done))

