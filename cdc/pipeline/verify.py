"""`cdc verify`: compare MySQL with the lake and/or Snowflake at one pinned binlog position (the cut-over gate).

Exact semantics (docs/guide.md, "cdc verify", says the same to the user):

1. Watermark first. For each target, read how far its stage has consumed the change log: the lake
   is spark-merge's (merge.json), Snowflake is snowflake-apply's (the newest batch in the
   _CDC_APPLIED_BATCHES bookkeeping table, else snowflake-apply.json). A batch/merge covers whole
   segments, and segments hold whole transactions.
2. Then pin. Open a consistent snapshot of the source and read the binlog position P it
   corresponds to, reusing snapshot's hand-over code (cdc.snapshot.handover: lock-free
   START TRANSACTION WITH CONSISTENT SNAPSHOT + Binlog_snapshot_* on MariaDB; a short FLUSH TABLES
   WITH READ LOCK, or LOCK TABLES on the selected tables, on MySQL). Every table is read inside
   that one transaction.
3. Compare only a target that has consumed exactly up to P: "reached" as `cdc wait --position P`
   defines it (tail's checkpoint at or past P and no unconsumed segment starting before P). The
   watermark was read before P existed, so the target cannot hold anything after P. A target that
   has not reached P is BEHIND (both positions are shown) and its tables are not compared: rows
   written after its watermark would show as false differences. Without `--wait` that is exit 7;
   with `--wait D`, verify ends the snapshot, waits and re-pins until the target reaches a fresh P
   or D runs out (then BEHIND, exit 7). To make it reachable, stop writes to the source and run
   the stages up to now (`cdc run --until-now`, or tail / spark-merge / snowflake-apply in turn).
4. After comparing, the watermark is read again. If the stage moved meanwhile (a merge or apply
   ran during verify) the result is discarded and everything is re-pinned, up to MAX_ATTEMPTS.
   A stage still *running* mid-batch is not visible in its watermark: verify a quiet target.

Per table and target the status is OK (same rows, same values), DIFF (the differing keys are listed:
missing from the target, extra in it, or changed), BEHIND, or MISSING (the target has no such table
while the source has rows; an empty source table with no lake table is OK: there is nothing to hold).
Values are compared in Python through cdc.pipeline.checksum; rows are read in primary-key ranges on
both sides (cdc.pipeline.verify_targets). A table without a key is compared as a multiset of full rows:
each side read whole and counted (a second read finds the differing rows' values), its DIFF lists rows
with the number of copies missing or extra.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from cdc.checkpoints import ApplyCheckpoint, Handover, MergeCheckpoint
from cdc.config import Settings
from cdc.errors import ExitCode, PreconditionError, UsageError
from cdc.masking import ColumnRules, read_rules
from cdc.pipeline.checksum import DEFAULT_SAMPLE, RowHasher, TableDiff, compare_multisets, compare_streams, multiset_checksum
from cdc.pipeline.local import LocalState, SourcePosition, last_line, read_local
from cdc.pipeline.verify_targets import LakeReader, SnowflakeReader, source_pages, source_rows
from cdc.pipeline.wait import Gate, observe
from cdc.schema import SchemaHistory
from cdc.snapshot import take_handover
from cdc.source.connect import connection, query
from cdc.source.server import describe_server
from cdc.source.tables import RAW_CONVERSIONS, TableInfo, TablePlan, plan_table, select_tables
from cdc.state import StateDir

TARGETS = ("lake", "snowflake")
TARGET_STAGES = {"lake": MergeCheckpoint.STAGE, "snowflake": ApplyCheckpoint.STAGE}
OK, DIFF, BEHIND, MISSING = "OK", "DIFF", "BEHIND", "MISSING"
MAX_ATTEMPTS = 3
DEFAULT_PAGE = 10_000
BEHIND_HINT = ("stop writes to the source, run the pipeline up to now (`cdc run --until-now`, or tail, spark-merge "
               "and snowflake-apply in turn), then verify again; or pass --wait 10m to re-pin until it catches up")

Reader = Any  # LakeReader | SnowflakeReader


@dataclass(frozen=True)
class VerifyRequest:
    targets: tuple[str, ...] = ()  # empty: every target whose stage has a checkpoint
    lake: Path | None = None  # spark-merge's --target (default <state>/lake)
    wait: float | None = None  # seconds to keep re-pinning while a target is behind
    interval: float = 1.0
    page: int = DEFAULT_PAGE
    sample: int = DEFAULT_SAMPLE


@dataclass(frozen=True)
class Watermark:
    """How far one target's stage has consumed the change log, judged against the pinned position."""

    target: str
    stage: str
    reached: bool
    at: str | None  # file:pos of the last change the target holds
    detail: str
    marker: tuple[Any, ...]  # changes whenever the stage advances

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "reached": self.reached, "at": self.at, "detail": self.detail}


@dataclass
class TableResult:
    table: str
    target: str
    status: str
    source_rows: int | None = None
    target_rows: int | None = None
    differing: list[dict[str, Any]] = field(default_factory=list)  # [{"key": {...}, "kind": ...}], capped
    more: int = 0  # differing keys beyond the sample
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class VerifyReport:
    pinned: Handover
    watermarks: dict[str, Watermark]
    tables: list[TableResult]
    attempts: int
    seconds: float

    @property
    def ok(self) -> bool:
        return all(t.status == OK for t in self.tables)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.DIFFERENCE

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "pinned": self.pinned.to_dict(), "attempts": self.attempts,
                "seconds": round(self.seconds, 3), "targets": {k: v.to_dict() for k, v in self.watermarks.items()},
                "tables": [t.to_dict() for t in self.tables]}


Progress = Callable[[TableResult], None]


def choose_targets(state: StateDir, wanted: tuple[str, ...]) -> list[str]:
    """--target lake|snowflake|all; by default every target whose stage has a checkpoint."""
    for name in wanted:
        if name not in (*TARGETS, "all"):
            raise UsageError(f"--target {name!r} is not one of lake, snowflake, all")
    if "all" in wanted:
        return list(TARGETS)
    if wanted:
        return [t for t in TARGETS if t in wanted]
    local = read_local(state)
    found = [t for t in TARGETS if local.has(TARGET_STAGES[t])]
    if not found:
        raise UsageError(f"no target to verify in {state.root}: neither spark-merge nor snowflake-apply has run",
                         hint="run the pipeline first, or name the target with --target lake|snowflake")
    return found


def verify(settings: Settings, request: VerifyRequest, *, on_progress: Progress | None = None,
           sleep: Callable[[float], None] = time.sleep) -> VerifyReport:
    """Pin the source, check every target's watermark, compare every selected table; see the module docstring."""
    if request.page < 1 or request.sample < 0:
        raise UsageError("--page must be at least 1 and --sample at least 0")
    started = time.monotonic()
    state = StateDir(settings.state_dir)
    targets = choose_targets(state, request.targets)
    readers = _open_readers(settings, state, targets, request)
    try:
        with connection(settings.mysql, conv=RAW_CONVERSIONS) as conn:
            with conn.cursor() as cursor:  # TIMESTAMP values in UTC, as the change log has them
                cursor.execute("SET SESSION time_zone = '+00:00'")
            return _attempts(settings, state, conn, readers, request, on_progress, sleep, started)
    finally:
        for reader in readers:
            reader.close()


def _open_readers(settings: Settings, state: StateDir, targets: list[str], request: VerifyRequest) -> list[Reader]:
    readers: list[Reader] = []
    if "lake" in targets:
        readers.append(LakeReader(request.lake or state.lake, request.page))
    if "snowflake" in targets:
        from cdc.snowflake import connect_snowflake

        readers.append(SnowflakeReader(connect_snowflake(settings.snowflake), request.page))
    return readers


def _attempts(settings: Settings, state: StateDir, conn: pymysql.Connection, readers: list[Reader],
              request: VerifyRequest, on_progress: Progress | None, sleep: Callable[[float], None],
              started: float) -> VerifyReport:
    info = describe_server(conn)
    tables = _select_tables(conn, settings, state)
    deadline = None if request.wait is None else started + request.wait
    for attempt in itertools.count(1):
        before = {r.name: _local_for(state, r) for r in readers}
        pinned = take_handover(settings.mysql, conn, info, tables, "auto").handover
        marks = {r.name: watermark(settings, before[r.name], r, pinned) for r in readers}
        waiting = deadline is not None and time.monotonic() < deadline
        if deadline is not None and waiting and not all(m.reached for m in marks.values()):
            conn.rollback()  # end this snapshot; the next attempt pins afresh
            sleep(max(min(request.interval, deadline - time.monotonic()), 0.0))
            continue
        results = _compare_all(conn, info, tables, readers, marks, request, on_progress,
                               read_rules(state, settings.mysql))  # keyed: verify hashes the source too
        conn.rollback()
        moved = [r.name for r in readers if marks[r.name].reached and _moved(state, r, marks[r.name])]
        if not moved:
            return VerifyReport(pinned, marks, results, attempt, time.monotonic() - started)
        if attempt >= MAX_ATTEMPTS:
            raise PreconditionError(
                f"the {', '.join(moved)} target kept advancing while verify compared it ({attempt} attempts)",
                hint="stop spark-merge / snowflake-apply runs (or let them finish) while verify runs")
    raise AssertionError("unreachable")


def _select_tables(conn: pymysql.Connection, settings: Settings, state: StateDir) -> list[TableInfo]:
    """--tables/--databases when given, else every table the state directory has a schema history for."""
    if settings.mysql.tables or settings.mysql.databases:
        return select_tables(conn, settings.mysql)
    recorded = SchemaHistory(state.schema).tables()
    if not recorded:
        raise UsageError(f"no tables to verify: {state.root} has no schema history and none was selected",
                         hint="pass --tables db.table (globs allowed) or --databases db")
    rows = query(conn, "SELECT TABLE_SCHEMA AS s, TABLE_NAME AS t FROM information_schema.TABLES "
                       "WHERE TABLE_TYPE = 'BASE TABLE'")
    present = {(_text(r["s"]), _text(r["t"])) for r in rows}
    return [TableInfo(db, table, 0, 0) for db, table in sorted(recorded) if (db, table) in present]


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _local_for(state: StateDir, reader: Reader) -> LocalState:
    """The state directory as the target's stage sees it; Snowflake's bookkeeping table outranks its checkpoint."""
    local = read_local(state)
    if reader.name != "snowflake":
        return local
    applied = reader.applied_batch()
    recorded = local.last_batch(ApplyCheckpoint.STAGE)
    if applied is None or (recorded is not None and recorded >= applied):
        return local
    checkpoints = {**local.checkpoints, ApplyCheckpoint.STAGE: ApplyCheckpoint(last_batch=applied)}
    return dataclasses.replace(local, checkpoints=checkpoints)


def watermark(settings: Settings, local: LocalState, reader: Reader, pinned: Handover) -> Watermark:
    """Has the target's stage consumed every change before the pinned position? (the `cdc wait` rule)"""
    stage = reader.stage
    marker = (local.last_segment(stage), local.last_batch(stage))
    if not local.has(stage):
        return Watermark(reader.name, stage, False, None, f"{stage} has not run (no checkpoint)", marker)
    observed = observe(settings, Gate(position=SourcePosition(pinned.file, pinned.pos)), local, stage)
    return Watermark(reader.name, stage, observed.reached, _last_change(local, marker[0]), observed.detail, marker)


def _last_change(local: LocalState, segment: str | None) -> str | None:
    path = None if segment is None else StateDir(local.root).changelog / segment
    change = last_line(path) if path is not None and path.exists() else None
    src = (change or {}).get("src") or {}
    return f"{src['file']}:{src['pos']}" if "file" in src and "pos" in src else None


def _moved(state: StateDir, reader: Reader, mark: Watermark) -> bool:
    local = _local_for(state, reader)
    return (local.last_segment(reader.stage), local.last_batch(reader.stage)) != mark.marker


def _compare_all(conn: pymysql.Connection, info: Any, tables: list[TableInfo], readers: list[Reader],
                 marks: dict[str, Watermark], request: VerifyRequest, on_progress: Progress | None,
                 rules: ColumnRules) -> list[TableResult]:
    results = []
    for table in tables:
        plan = plan_table(conn, table, "", allow_no_pk=True)  # inside the pinned snapshot
        for reader in readers:
            result = _compare_one(conn, plan, reader, marks[reader.name], request, rules)
            results.append(result)
            if on_progress is not None:
                on_progress(result)
    return results


def _compare_one(conn: pymysql.Connection, plan: TablePlan, reader: Reader, mark: Watermark,
                 request: VerifyRequest, rules: ColumnRules) -> TableResult:
    if not mark.reached:
        return TableResult(plan.name, reader.name, BEHIND, detail=f"{reader.name} at {mark.at or 'nothing'} "
                           f"({mark.detail}); source pinned later - {BEHIND_HINT}")
    # The targets hold what capture wrote: compare them with the source masked the same way.
    schema = rules.mask(plan.schema)
    hasher = RowHasher(schema.columns, plan.key)
    if not plan.has_pk:
        return _compare_multiset(conn, plan, reader, request, rules, hasher)
    pages: Iterator[list[Any]] = ([hasher.digest(r) for r in page]
                                  for page in source_pages(conn, plan, request.page, rules))
    rows = reader.rows(schema)
    if rows is None:
        count = sum(len(page) for page in pages)
        status = MISSING if count else OK
        return TableResult(plan.name, reader.name, status, count, None,
                           detail=f"no such table in the {reader.name} ({reader.describe()})")
    diff = compare_streams(TableDiff(), pages, (hasher.digest(r) for r in rows))
    sample = [{"key": hasher.key_dict(k), "kind": kind} for k, kind in itertools.islice(diff.differences(), request.sample)]
    detail = "" if diff.equal else (f"{len(diff.missing)} missing, {len(diff.extra)} extra, {len(diff.changed)} changed "
                                    f"({diff.differing_ranges} of {diff.ranges} key ranges differ)")
    return TableResult(plan.name, reader.name, OK if diff.equal else DIFF, diff.source_rows, diff.target_rows,
                       sample, max(diff.count - len(sample), 0), detail)


def _compare_multiset(conn: pymysql.Connection, plan: TablePlan, reader: Reader, request: VerifyRequest,
                      rules: ColumnRules, hasher: RowHasher) -> TableResult:
    """A keyless table: both sides counted by row digest; a DIFF names each differing row and its copies."""
    schema = rules.mask(plan.schema)
    rows = reader.rows(schema)
    source = (hasher.digest(r) for r in source_rows(conn, plan, rules))
    if rows is None:
        count = sum(1 for _ in source)
        return TableResult(plan.name, reader.name, MISSING if count else OK, count, None,
                           detail=f"no such table in the {reader.name} ({reader.describe()})")
    diff = compare_multisets(source, (hasher.digest(r) for r in rows))
    checksum = multiset_checksum(diff.source).hex()
    if diff.equal:
        return TableResult(plan.name, reader.name, OK, diff.source_rows, diff.target_rows,
                           detail=f"no key: compared as a multiset of rows (checksum {checksum})")
    wanted = list(itertools.islice(diff.differences(), request.sample))
    # The counts keep digests only: read the sides again for the values of the rows to show.
    digests = {digest for digest, _, _ in wanted}
    values = _rows_for(digests, (hasher.digest(r) for r in source_rows(conn, plan, rules)))
    target = reader.rows(schema)
    values |= _rows_for(digests - set(values), (hasher.digest(r) for r in target) if target is not None else iter(()))
    sample = [{"key": hasher.key_dict(values[d]) if d in values else {}, "kind": kind, "copies": copies}
              for d, kind, copies in wanted]
    missing, extra = sum(diff.missing.values()), sum(diff.extra.values())
    return TableResult(plan.name, reader.name, DIFF, diff.source_rows, diff.target_rows, sample,
                       max(len(diff.missing) + len(diff.extra) - len(sample), 0),
                       f"no key: compared as a multiset of rows; {missing} row(s) missing, {extra} extra")


def _rows_for(digests: set[bytes], rows: Iterator[Any]) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for row in rows:
        if len(found) == len(digests):
            break
        if row.digest in digests and row.digest not in found:
            found[row.digest] = row.key
    return found
