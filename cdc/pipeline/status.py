"""`cdc status`: every stage's checkpoint, what waits between stages, lag behind the server, retention runway.

Lag in seconds is the age of the oldest change the pipeline has not read yet: 0 when tail's
checkpoint is at the server's current end, else now - the commit time of the first transaction
after the checkpoint (read from the binlog, see cdc.pipeline.probe). Offline (or when the binlog
cannot be read) it falls back to now - `ts` of the last sealed change line, an upper bound that
also grows while the server is idle. Lag in bytes/files comes from SHOW BINARY LOGS.

Each stage downstream of tail has a lag of its own: the age of the oldest change it has not consumed (the `ts`
of the first line of its first pending segment), never less than tail's; with nothing pending, tail's.
Rows per second: cdc.pipeline.rates. The last error of a stage: cdc.pipeline.failures. The Prometheus text of
a report: cdc.pipeline.metrics; a report and its metrics file, once or every few seconds: cdc.pipeline.watch.
"""

from __future__ import annotations

import datetime as dt
import shlex
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cdc.changelog import pruned_through
from cdc.checkpoints import (
    PIPELINE,
    ApplyCheckpoint,
    CheckpointView,
    MergeCheckpoint,
    ResnapshotCheckpoint,
    ShipKinesisCheckpoint,
    ShipS3Checkpoint,
    SnapshotStatus,
    TailCheckpoint,
)
from cdc.config import Settings
from cdc.errors import CdcError, ExitCode, PositionError
from cdc.pipeline.failures import StageFailure, current_failures
from cdc.pipeline.local import LocalState, SourcePosition, change_time, first_line, last_line, read_local
from cdc.pipeline.probe import RunwayView, ServerView, bytes_behind, event_time, measure_runway, read_server_view
from cdc.pipeline.rates import WINDOW, RowRates
from cdc.schema import SchemaHistory
from cdc.snowflake import read_folded
from cdc.state import StateDir

DEFAULT_MIN_RUNWAY_HOURS = 6.0


@dataclass(frozen=True)
class StageView:
    stage: str
    ran: bool
    at: str | None  # how far it got, in its own terms (binlog position, segment, batch)
    pending_segments: int | None = None  # sealed segments it has not consumed
    pending_bytes: int | None = None
    pending_batches: int | None = None
    detail: str = ""
    lag_seconds: float | None = None  # age of the oldest change it has not consumed (tail: read)
    rows_per_second: float | None = None  # over the last minute (cdc.pipeline.rates)
    checkpoint_at: float | None = None  # its checkpoint's mtime: when it last committed a unit of work
    last_error: StageFailure | None = None  # recorded, and no work committed since (cdc.pipeline.failures)

    def to_dict(self) -> dict[str, Any]:
        document = {name: getattr(self, name) for name in (
            "stage", "ran", "at", "pending_segments", "pending_bytes", "pending_batches", "detail", "lag_seconds",
            "rows_per_second")}
        document["checkpoint_at"] = _iso(self.checkpoint_at)
        document["last_error"] = None if self.last_error is None else self.last_error.to_dict()
        return document


@dataclass(frozen=True)
class Lag:
    seconds: float | None
    seconds_source: str
    bytes: int | None = None
    files: int | None = None
    last_change_at: str | None = None  # `ts` of the last sealed change line


@dataclass
class StatusReport:
    state_dir: str
    generated_at: float
    stages: list[StageView]
    lag: Lag
    position: SourcePosition | None
    server: ServerView | None = None
    runway: RunwayView | None = None
    min_runway_seconds: float = DEFAULT_MIN_RUNWAY_HOURS * 3600
    notes: list[str] = field(default_factory=list)
    offline: bool = False
    server_error: CdcError | None = None  # the server could not be asked: the local figures stand alone
    # Tables whose older rows the binlog cannot reproduce (an ALTER-time default): table, reason, repair.
    needs_resnapshot: list[dict[str, str]] = field(default_factory=list)
    resnapshot: dict[str, Any] | None = None  # `cdc resnapshot`'s last run (resnapshot.json), None if none ran
    # What the state directory keeps of the change log and the batches, and how far cdc prune went (retained()).
    kept: dict[str, Any] = field(default_factory=dict)

    @property
    def runway_low(self) -> bool:
        return self.runway is not None and self.runway.seconds is not None and self.runway.seconds < self.min_runway_seconds

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.RUNWAY if self.runway_low else ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "state_dir": self.state_dir, "generated_at": _iso(self.generated_at),
            "position": None if self.position is None else asdict(self.position),
            "stages": [s.to_dict() for s in self.stages], "lag": asdict(self.lag),
            "server": None if self.server is None else _server_dict(self.server),
            "runway": None if self.runway is None else {
                **asdict(self.runway), "file_closed_at": _iso(self.runway.file_closed_at), "low": self.runway_low},
            "min_runway_seconds": self.min_runway_seconds, "notes": list(self.notes),
            "server_error": None if self.server_error is None else str(self.server_error),
            "rows_per_second_window": WINDOW, "resnapshot": self.resnapshot,
            "needs_resnapshot": list(self.needs_resnapshot), "kept": dict(self.kept),
        }


def _server_dict(view: ServerView) -> dict[str, Any]:
    return {"server": view.describe, "flavour": view.flavour, "file": view.file, "pos": view.pos, "gtid": view.gtid,
            "binlog_files": len(view.binlogs), "retention_seconds": view.retention_seconds,
            "retention_source": view.retention_source}


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def collect_status(settings: Settings, *, offline: bool = False, min_runway_hours: float = DEFAULT_MIN_RUNWAY_HOURS,
                   now: float | None = None, rates: RowRates | None = None) -> StatusReport:
    """Read the state directory (and, unless offline, the server) into one report.

    A state directory that cannot be read raises (a corrupt checkpoint: PositionError); a server that cannot be
    asked does not: its error is `report.server_error`, and the figures that need it stay unknown.
    `rates`: keep one RowRates across the calls of a watch (the consumers' rows/s come from its samples).
    """
    now = time.time() if now is None else now
    state = StateDir(settings.state_dir)
    local = read_local(state)
    position = local.source_position()
    report = StatusReport(settings.state_dir, now, stage_views(local), offline_lag(local, now), position,
                          min_runway_seconds=min_runway_hours * 3600, offline=offline)
    if not Path(settings.state_dir).is_dir():
        report.notes.append(f"state directory {settings.state_dir} does not exist: no stage has run here")
    report.needs_resnapshot = flagged_tables(state)
    report.kept = retained(state, local)
    report.resnapshot, note = resnapshot_view(state)
    if note:
        report.notes.append(note)
    if not offline:
        try:
            _ask_server(settings, report, position, now)
        except CdcError as exc:
            report.server_error = exc
    report.stages = _with_figures(report, local, (rates or RowRates()).measure(local, now),
                                  current_failures(state, report.notes), now)
    return report


def retained(state: StateDir, local: LocalState) -> dict[str, Any]:
    """The sealed segments and batches kept (names already listed: nothing more is read but two small markers),
    and the newest of each cdc prune removed (None: none)."""
    return {"segments": len(local.segments), "pruned_through": pruned_through(state.changelog),
            "batches": len(local.batches), "batches_folded_through": read_folded(state).through}


def flagged_tables(state: StateDir) -> list[dict[str, str]]:
    """The tables the schema history flags for a re-snapshot, each with the command that repairs it."""
    history = SchemaHistory(state.schema)
    found = []
    for db, table in history.tables():
        reason = history.resnapshot_reason(db, table)
        if reason:
            found.append({"table": f"{db}.{table}", "reason": reason,
                          "repair": f"cdc resnapshot {shlex.quote(f'{db}.{table}')}"})
    return found


def resnapshot_view(state: StateDir) -> tuple[dict[str, Any] | None, str | None]:
    """`cdc resnapshot`'s progress (JSON) and a line for people; a finished run is shown in the JSON only."""
    checkpoint = ResnapshotCheckpoint.read(state)
    if checkpoint is None:
        return None, None
    tables = [{"table": t.name, "rows": t.rows, "est_rows": max(t.est_rows, t.rows), "chunks": t.chunks,
               "read_all": t.read_all, "done": t.done} for t in checkpoint.tables]
    view = {"run": checkpoint.run, "status": checkpoint.status, "started_at": checkpoint.started_at, "tables": tables}
    if checkpoint.status != "running":  # done or cancelled
        return view, None
    parts = [f"{t['table']} {'done' if t['done'] else 'waiting for tail' if t['read_all'] else 'reading'} "
             f"{t['rows']:,}/~{t['est_rows']:,} rows in {t['chunks']} chunk(s)" for t in tables]
    return view, (f"resnapshot {checkpoint.run} (started {checkpoint.started_at}) in progress: " + "; ".join(parts)
                  + ". If it is not running, rerun the same `cdc resnapshot` to finish it (or `cdc resnapshot --cancel`): "
                  "until then tail keeps its checkpoint before an unfinished chunk")


def _ask_server(settings: Settings, report: StatusReport, position: SourcePosition | None, now: float) -> None:
    report.server = read_server_view(settings.mysql)
    refuse_foreign_server(StateDir(settings.state_dir), report.server)
    if position is None:
        report.notes.append("no tail or snapshot checkpoint: nothing needs the server's binlogs yet")
        return
    report.lag = server_lag(settings, report.server, position, report.lag, now, report.notes)
    report.runway = measure_runway(settings.mysql, report.server, position.file, now)
    if report.runway.unknown:
        report.notes.append(f"runway unknown: {report.runway.unknown}")


def _with_figures(report: StatusReport, local: LocalState, rates: dict[str, float | None],
                  failures: dict[str, StageFailure], now: float) -> list[StageView]:
    """Each stage's view with its lag, rows/s, last commit and last error (and a row for a failed stage that keeps
    no checkpoint, such as snowflake-bootstrap)."""
    tail_lag = report.lag.seconds
    views = []
    for view in report.stages:
        if view.stage == TailCheckpoint.STAGE:
            lag = tail_lag
        elif view.ran and view.pending_segments is not None:
            lag = consumer_lag(local, view.stage, tail_lag, now)
        else:
            lag = None
        views.append(replace(view, lag_seconds=lag, rows_per_second=rates.get(view.stage),
                             checkpoint_at=_checkpoint_at(local, view.stage), last_error=failures.get(view.stage)))
    known = {view.stage for view in views}
    views += [StageView(stage, False, None, detail="keeps no checkpoint", last_error=failure)
              for stage, failure in sorted(failures.items()) if stage not in known]
    return views


def consumer_lag(local: LocalState, stage: str, tail_lag: float | None, now: float) -> float | None:
    """Age of the oldest change `stage` has not consumed, never less than tail's lag; tail's with nothing pending."""
    pending = local.pending_segments(stage)
    first = change_time(first_line(pending[0])) if pending else None
    if first is None:
        return tail_lag
    return max(now - first, tail_lag or 0.0, 0.0)


def _checkpoint_at(local: LocalState, stage: str) -> float | None:
    for kind in PIPELINE:
        if kind.STAGE == stage and local.has(stage):
            try:
                return kind.path(StateDir(local.root)).stat().st_mtime
            except OSError:
                return None
    return None


def refuse_foreign_server(state: StateDir, server: ServerView) -> None:
    """Positions mean nothing on another server: comparing them would report a made-up lag ("caught up")."""
    known = state.read_server()
    if known is None or known.server_uuid == server.server_uuid:
        return
    raise PositionError(
        f"state directory {state.root} belongs to server {known.describe()}, but this connection reached "
        f"{server.describe} (uuid={server.server_uuid}): its positions cannot be compared with this server's",
        hint="point --host/--port at the server this state directory captures from (or --state-dir at the right "
        "directory); after a failover, run `cdc tail --until-now --rebase` first; --offline shows the local state only")


def stage_views(local: LocalState) -> list[StageView]:
    views = []
    for kind in PIPELINE:
        checkpoint = local.checkpoints.get(kind.STAGE)
        if checkpoint is None:
            views.append(StageView(kind.STAGE, False, None, detail="not run (no checkpoint)"))
        else:
            views.append(_view(local, checkpoint))
    return views


def _view(local: LocalState, checkpoint: CheckpointView) -> StageView:
    stage = checkpoint.STAGE
    if isinstance(checkpoint, SnapshotStatus):
        h = checkpoint.handover
        return StageView(stage, True, None if h is None else f"{h.file}:{h.pos}",
                         detail=f"{checkpoint.status}; hand-over position")
    if isinstance(checkpoint, TailCheckpoint):
        gtid = f" gtid {checkpoint.gtid}" if checkpoint.gtid else ""
        return StageView(stage, True, f"{checkpoint.file}:{checkpoint.pos}",
                         detail=f"sealed {checkpoint.last_segment}{gtid}")
    pending = local.pending_segments(stage)
    size = sum(p.stat().st_size for p in pending)
    if isinstance(checkpoint, ApplyCheckpoint):
        batches = local.pending_batches()
        return StageView(stage, True, checkpoint.last_batch, len(pending), size, len(batches),
                         detail=f"{len(batches)} merged batch(es) not applied")
    detail = ""
    if isinstance(checkpoint, (ShipKinesisCheckpoint, ShipS3Checkpoint)) and checkpoint.destination:
        detail = f"destination {checkpoint.destination}"
    elif isinstance(checkpoint, MergeCheckpoint):
        detail = f"last batch {checkpoint.last_batch}"
    return StageView(stage, True, local.last_segment(stage), len(pending), size, detail=detail)


def offline_lag(local: LocalState, now: float) -> Lag:
    """Without the server: the age of the last sealed change (0 lines sealed: unknown)."""
    if not local.segments:
        return Lag(None, "no sealed change-log segment")
    last = change_time(last_line(local.segments[-1]))
    if last is None:
        return Lag(None, "the last change line has no ts")
    return Lag(max(now - last, 0.0), "age of the last sealed change (upper bound)", last_change_at=_iso(last))


def server_lag(settings: Settings, view: ServerView, position: SourcePosition, fallback: Lag, now: float,
               notes: list[str]) -> Lag:
    """Lag of the pipeline's binlog reading against the server's current end."""
    size, files = bytes_behind(view, position.file, position.pos)
    if (position.file, position.pos) == (view.file, view.pos) or size == 0:
        return Lag(0.0, "caught up with the server", 0, 0, fallback.last_change_at)
    try:
        first_unread = event_time(settings.mysql, position.file, position.pos)
    except CdcError as exc:
        notes.append(f"lag in seconds estimated offline: {exc.message}")
        return Lag(fallback.seconds, fallback.seconds_source, size, files, fallback.last_change_at)
    if first_unread is None:
        return Lag(0.0, "caught up with the server", size, files, fallback.last_change_at)
    return Lag(max(now - first_unread, 0.0), "age of the oldest unread transaction on the server", size, files,
               fallback.last_change_at)
