"""The stages `cdc run` chains, each one call of the library function its standalone command calls.

Every function here takes the stage's lock through that library function (run_snapshot, run_tail,
sinks.ship, spark.merge, snowflake.apply.run), so a `cdc run` and a standalone `cdc tail` on the
same state directory exclude each other exactly as two `cdc tail`s do. None of them writes a
checkpoint itself: the stages keep their own, which is why `cdc run` after a crash just continues.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from cdc.capture import Filters, StartRequest, TailOptions, run_tail
from cdc.capture import Progress as TailProgress
from cdc.changelog import list_segments
from cdc.checkpoints import ApplyCheckpoint, MergeCheckpoint, SnapshotStatus, TailCheckpoint
from cdc.config import Settings
from cdc.state import StateDir

NOTHING = "nothing new"
DONE = "done"
STOPPED = "stopped"
SKIPPED = "skipped"
SNOWFLAKE_IDLE_SECONDS = 600.0  # a kept Snowflake connection unused for longer is replaced by a new login


@dataclass(frozen=True)
class StageProgress:
    """A live view update from inside a stage (throttling is the renderer's business)."""

    stage: str
    reached: str | None  # binlog position, segment, table or batch
    count: int  # rows / records / changes so far in this stage run
    rate: float | None = None  # per second
    lag_seconds: float | None = None


@dataclass
class Outcome:
    """What one stage run did, in its own terms."""

    status: str  # done | nothing new | stopped | skipped
    reached: str | None = None
    count: int = 0
    unit: str = "rows"
    lag_seconds: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    settings: Settings
    state: StateDir
    stop: threading.Event
    report: Callable[[StageProgress], None]
    start: StartRequest = StartRequest()
    allow_no_pk: bool = False  # snapshot --allow-no-pk
    spark: Any = None  # one SparkSession for every merge of this run (follow: start-up paid once)
    snowflake: Any = None  # one Snowflake connection for bootstrap and apply, every cycle (a login each costs)
    snowflake_used: float = 0.0  # time.monotonic() of its last use
    applier: Any = None  # snowflake-apply's Applier on that connection: its start-up reads paid once (issue #25)
    applier_schema: tuple[Any, ...] | None = None  # the schema history (files) when it was made: it caches them
    manifests: dict[str, Any] = field(default_factory=dict)  # sealed batches' manifests read (they never change)
    bootstrapped: tuple[Any, ...] | None = None  # the schema history (files) the last bootstrap of this run saw
    tailed: bool = False  # tail ran once in this run (caught up with the backlog there was at the start)
    follow: bool = False  # run --follow: the SparkSession lives as long as the run (its JVM bounded for that)

    def spark_session(self, input_bytes: int | None = None) -> Any:
        """The run's SparkSession, started at its first merge (input_bytes: that merge's change-log bytes)."""
        if self.spark is None:
            from cdc.spark import build_session

            # Recording: the run's JVM writes Spark's class archive as it exits (close), if there is none yet,
            # so the next run's JVM (and a one-shot spark-merge's) maps it instead of loading the jars' classes.
            # Without --follow the run merges what is there and exits: its JVM is a one-shot merge's, and gets
            # its JIT options (C1 only for little input).
            self.spark = build_session(self.settings.spark, follow=self.follow, record_classes=True,
                                       one_shot=not self.follow, input_bytes=None if self.follow else input_bytes)
        return self.spark

    def snowflake_connection(self) -> Any:
        # A session idle for long may have expired on the server (Snowflake: after 4 hours by default): log in again.
        if self.snowflake is not None and time.monotonic() - self.snowflake_used > SNOWFLAKE_IDLE_SECONDS:
            self.drop_snowflake()
        if self.snowflake is None:
            from cdc.snowflake import connect_snowflake

            self.snowflake = connect_snowflake(self.settings.snowflake)
        self.snowflake_used = time.monotonic()
        return self.snowflake

    def forget_applier(self) -> None:
        """The next apply makes a new Applier; this one's extra sessions log out (its staging tables are left to the
        next Applier's start, which drops them)."""
        if self.applier is not None:
            applier, self.applier = self.applier, None
            applier.loaders.close()

    def drop_snowflake(self) -> None:
        """After a stage's failure: the next stage (or run) logs in afresh rather than reuse a doubtful session."""
        self.forget_applier()
        if self.snowflake is not None:
            conn, self.snowflake = self.snowflake, None
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken session may fail; nothing rests on it
                pass

    def close(self) -> None:
        if self.applier is not None:
            self.applier.close()  # its staging tables; a failure here only leaves them to the next start
        self.drop_snowflake()
        if self.spark is not None:
            from cdc.spark import stop_session

            spark, self.spark = self.spark, None
            stop_session(spark)


def snapshot(ctx: Context) -> Outcome:
    """Only when tail has no checkpoint and the snapshot is not done; a running snapshot is resumed."""
    from cdc.snapshot import SnapshotRequest, run_snapshot

    if TailCheckpoint.read(ctx.state) is not None:
        return Outcome(SKIPPED, detail={"reason": "tail has a checkpoint"})
    if _has_start(ctx.start):
        return Outcome(SKIPPED, detail={"reason": "tail starts at an explicit position"})
    snapshot = SnapshotStatus.read(ctx.state)
    if snapshot is not None and snapshot.is_done:
        return Outcome(SKIPPED, detail={"reason": "snapshot already done"})
    summary = run_snapshot(ctx.settings, SnapshotRequest(allow_no_pk=ctx.allow_no_pk), on_progress=lambda p: ctx.report(
        StageProgress(SnapshotStatus.STAGE, p.table, p.rows)))
    h = summary.checkpoint.handover
    return Outcome(DONE, f"{h.file}:{h.pos}", summary.rows, "rows", detail=summary.to_dict())


def tail(ctx: Context) -> Outcome:
    """tail --until-now: up to the server position current when it starts (--follow goes on in a thread after the
    first one: cdc.pipeline.tail_beside)."""
    mysql = ctx.settings.mysql
    has_checkpoint = TailCheckpoint.read(ctx.state) is not None
    # After the run's first tail, a cycle's backlog is seconds of writes: decoded in this process in milliseconds,
    # where a decode worker would cost a process start per cycle (and the Spark JVM uses the other core).
    options = TailOptions(start=StartRequest() if has_checkpoint else ctx.start, follow=False,
                          filters=Filters.from_settings(mysql), decode_workers=0 if ctx.tailed else None)
    last: list[TailProgress] = []

    def progress(p: TailProgress) -> None:
        last[:] = [p]
        ctx.report(StageProgress(TailCheckpoint.STAGE, p.position, p.rows, p.events_per_second, p.lag_seconds))

    summary = run_tail(ctx.settings, options, should_stop=ctx.stop.is_set, on_progress=progress)
    ctx.tailed = True
    caught_up = summary.stopped == "caught up"
    status = DONE if caught_up and summary.rows else NOTHING if caught_up else STOPPED
    lag = last[0].lag_seconds if last else (0.0 if caught_up else None)
    return Outcome(status, summary.end, summary.rows, "rows", lag, summary.to_dict())


def _has_start(start: StartRequest) -> bool:
    return bool(start.position or start.gtid or start.from_now)


def ship(to: str) -> Callable[[Context], Outcome]:
    """ship --to s3 / kinesis --until-now, with the [aws] settings."""

    def run(ctx: Context) -> Outcome:
        from cdc import sinks

        sink = sinks.open_sink(ctx.settings.aws, sinks.ShipTarget(to=to))
        summary = sinks.ship(ctx.state, sink, stop=ctx.stop, on_progress=lambda p: ctx.report(
            StageProgress(sink.stage, p.segment, p.records, p.records / p.seconds)))
        # Segments left are "stopped" only after a signal: a standalone `cdc tail --follow` may seal more meanwhile.
        status = STOPPED if summary.remaining and ctx.stop.is_set() else DONE if summary.segments else NOTHING
        return Outcome(status, summary.last_segment, summary.records, "records", detail=summary.to_dict())

    run.__name__ = f"ship_{to}"
    return run


def spark_merge(ctx: Context) -> Outcome:
    """spark-merge of the local change log; Spark starts only when a sealed segment waits."""
    from cdc.spark import merge

    checkpoint = MergeCheckpoint.read(ctx.state) or MergeCheckpoint()
    pending = list_segments(ctx.state.changelog, after=checkpoint.last_segment, reader=MergeCheckpoint.STAGE)
    if not pending:
        return Outcome(NOTHING, checkpoint.last_batch, unit="changes")
    input_bytes = sum(p.stat().st_size for p in pending)
    def progress(p: Any) -> None:  # a cdc.spark.MergeProgress
        ctx.report(StageProgress(MergeCheckpoint.STAGE, p.table or p.phase, p.changes_done))

    total = 0
    while True:  # a run cut before a primary-key change (cdc.spark.rekey): the next one merges on from there
        summary = merge(ctx.state, settings=ctx.settings.spark, aws=ctx.settings.aws, spark=ctx.spark_session(input_bytes),
                        on_progress=progress)
        total += sum(t.changes for t in summary.tables)
        if summary.key_change is None or ctx.stop.is_set():
            break
    return Outcome(DONE if summary.batch_id else NOTHING, summary.batch_id, total, "changes",
                   detail=summary.to_dict())


def pending_batches(state: StateDir) -> list[str]:
    """Sealed batches after snowflake-apply's checkpoint (written after the bookkeeping row, so none is lost): their
    ids only, no manifest read (a long --follow run holds a batch for every few seconds it ran)."""
    return state.sealed_batches(after=_applied_batch(state) or "")


def _applied_batch(state: StateDir) -> str | None:
    checkpoint = ApplyCheckpoint.read(state)
    return None if checkpoint is None else checkpoint.last_batch


def snowflake_bootstrap(ctx: Context) -> Outcome:
    """Create missing tables / add new columns from the schema history before applying (DDL in MySQL)."""
    from cdc.masking import masked_history
    from cdc.snowflake import BootstrapOptions, bootstrap_history

    if not pending_batches(ctx.state):
        return Outcome(NOTHING, unit="objects")
    # Unchanged schema history since this run's last bootstrap: nothing to create (a follow cycle's usual case).
    seen = _schema_files(ctx.state)
    if seen == ctx.bootstrapped:
        return Outcome(NOTHING, unit="objects", detail={"reason": "schema history unchanged"})
    options = BootstrapOptions(warehouse=ctx.settings.snowflake.warehouse)
    try:
        plan = bootstrap_history(ctx.snowflake_connection(), masked_history(ctx.state), options)
    except BaseException:
        ctx.drop_snowflake()
        raise
    ctx.bootstrapped = seen
    ctx.forget_applier()  # tables or columns may be new: the next apply reads the schema again
    changed = len(plan.created) + len(plan.added)
    detail = {"created": plan.created, "added_columns": plan.added, "type_drift": plan.type_drift}
    return Outcome(DONE if changed else NOTHING, None, changed, "objects", detail=detail)


def _schema_files(state: StateDir) -> tuple[Any, ...]:
    """Name, size and mtime of every schema-history file and of the masking rules: what bootstrap reads."""
    from cdc.masking import RULES_FILE

    paths = sorted(p for p in state.schema.rglob("*") if p.is_file()) if state.schema.is_dir() else []
    paths += [p for p in [state.root / RULES_FILE] if p.is_file()]
    return tuple((str(p), s.st_size, s.st_mtime_ns) for p in paths for s in [p.stat()])


def snowflake_apply(ctx: Context) -> Outcome:
    """snowflake-apply --until-now of every sealed batch not yet recorded as applied."""
    from cdc.snowflake import Applier, apply_batches, connect_snowflake

    if not pending_batches(ctx.state):
        return Outcome(NOTHING, _applied_batch(ctx.state), unit="changes")
    applied = [0]

    def on_batch(batch_id: str, counts: dict[str, Any]) -> None:
        applied[0] += sum(c.inserted + c.updated + c.deleted for c in counts.values())
        ctx.report(StageProgress(ApplyCheckpoint.STAGE, batch_id, applied[0]))

    try:
        conn, seen = ctx.snowflake_connection(), _schema_files(ctx.state)
        if ctx.applier is None or ctx.applier.conn is not conn or ctx.applier_schema != seen:
            ctx.forget_applier()
            ctx.applier = Applier(conn, ctx.state, open_connection=partial(connect_snowflake, ctx.settings.snowflake),
                                  load_sessions=ctx.settings.snowflake.load_sessions)
            ctx.applier_schema = seen
            ctx.applier.known = ctx.manifests  # a new Applier (new tables or columns) reads no manifest again
        summary = apply_batches(conn, ctx.state, stop=ctx.stop, on_batch=on_batch, applier=ctx.applier)
    except BaseException:
        ctx.drop_snowflake()
        raise
    status = STOPPED if pending_batches(ctx.state) and ctx.stop.is_set() else DONE if summary.applied else NOTHING
    return Outcome(status, summary.last_batch, applied[0], "changes", detail=summary.to_dict())
