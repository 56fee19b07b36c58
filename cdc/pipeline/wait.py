"""`cdc wait`: block until a stage has caught up (lag below a bound, a binlog position, a GTID set), or time out.

"Reached" for a position P means the stage has consumed every change committed before P:
tail's checkpoint is at or past P, and (for a stage after tail) no sealed segment it has not
consumed yet starts before P. Segments hold whole transactions and tail seals them before it
advances its checkpoint (data first, checkpoint last), so nothing before P can still be on its way.
A tail behind P counts as at P when the server shows only rotation headers and checkpoints between the
two (cdc.source.binlog_headers): a FLUSH BINARY LOGS or a restart after the last transaction.
A GTID set is reached likewise: tail's checkpoint GTID state contains it, and no unconsumed
segment holds a change inside it (snapshot lines count as inside: they precede the hand-over).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

from cdc.changelog import file_seq, read_segment, segment_key
from cdc.checkpoints import ApplyCheckpoint, MergeCheckpoint, ShipKinesisCheckpoint, ShipS3Checkpoint, TailCheckpoint
from cdc.config import Settings
from cdc.errors import CdcError, TimeoutExpired, TransientError, UsageError
from cdc.gtid import GtidSet
from cdc.pipeline.local import LocalState, SourcePosition, change_time, first_line, read_local
from cdc.pipeline.probe import read_server_view
from cdc.pipeline.status import offline_lag, server_lag
from cdc.source.binlog_headers import only_headers_between
from cdc.source.connect import connection
from cdc.state import StateDir

WAIT_STAGES = tuple(k.STAGE for k in (TailCheckpoint, ShipS3Checkpoint, ShipKinesisCheckpoint, MergeCheckpoint,
                                       ApplyCheckpoint))
# Default stage: the furthest along the pipeline that has a checkpoint (S3 before Kinesis: spark-merge reads S3).
_FURTHEST_FIRST = tuple(k.STAGE for k in (ApplyCheckpoint, MergeCheckpoint, ShipS3Checkpoint, ShipKinesisCheckpoint,
                                           TailCheckpoint))


def parse_position(text: str) -> SourcePosition:
    file, _, pos = text.rpartition(":")
    try:
        file_seq(file)
        return SourcePosition(file, int(pos))
    except (CdcError, ValueError):
        raise UsageError(f"--position {text!r} is not FILE:POS", hint="e.g. mariadb-bin.000003:1234 "
                         "(SHOW MASTER STATUS / SHOW BINARY LOG STATUS on the source)") from None


@dataclass(frozen=True)
class Gate:
    """What to wait for: exactly one of lag_below (seconds), position, gtid."""

    lag_below: float | None = None
    position: SourcePosition | None = None
    gtid: str | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.lag_below, self.position, self.gtid)) != 1:
            raise UsageError("wait for exactly one thing", hint="pass one of --lag-below, --position, --gtid")
        if self.gtid is not None:
            GtidSet.parse(self.gtid)  # fail on a malformed set now, not after the timeout

    def describe(self) -> str:
        if self.lag_below is not None:
            return f"lag below {self.lag_below:g}s"
        return f"position {self.position}" if self.position is not None else f"GTID set {self.gtid}"


# Observation.state: what keeps the gate closed, in a word. A waiter tells people when it changes (or the
# stage does), not every time the detail's figures move.
NO_CHECKPOINT, TAIL_BEHIND, PENDING, LAG_ABOVE, LAG_UNKNOWN, UNREACHABLE, REACHED = (
    "no checkpoint", "tail behind", "segments pending", "lag above bound", "lag unknown", "unreachable", "reached")


@dataclass(frozen=True)
class Observation:
    stage: str
    reached: bool
    detail: str
    state: str = ""  # one of the words above


@dataclass(frozen=True)
class WaitResult:
    gate: str
    stage: str
    seconds: float
    polls: int
    detail: str

    def to_dict(self) -> dict[str, object]:
        return {"reached": True, "gate": self.gate, "stage": self.stage, "seconds": round(self.seconds, 3),
                "polls": self.polls, "detail": self.detail}


def default_stage(local: LocalState) -> str:
    for stage in _FURTHEST_FIRST:
        if local.has(stage):
            return stage
    raise UsageError(f"no stage has a checkpoint in {local.root} yet, so there is no default --stage",
                     hint="pass --stage (e.g. --stage tail) to wait for a stage that has not started yet")


def wait_for(settings: Settings, gate: Gate, *, stage: str | None = None, timeout: float | None = None,
             interval: float = 1.0, sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic,
             on_poll: Callable[[Observation], None] | None = None) -> WaitResult:
    """Poll until `gate` is reached by `stage`; TimeoutExpired (exit 9) after `timeout` seconds."""
    if stage is not None and stage not in WAIT_STAGES:
        raise UsageError(f"--stage {stage!r} is not one of {', '.join(WAIT_STAGES)}")
    started, polls = clock(), 0
    state = StateDir(settings.state_dir)
    while True:
        polls += 1
        observation = observe(settings, gate, read_local(state), stage)
        if on_poll is not None:
            on_poll(observation)
        elapsed = clock() - started
        if observation.reached:
            return WaitResult(gate.describe(), observation.stage, elapsed, polls, observation.detail)
        if timeout is not None and elapsed >= timeout:
            raise TimeoutExpired(
                f"{observation.stage} did not reach {gate.describe()} within {timeout:g}s: {observation.detail}",
                hint="check that the stage runs (`cdc status`), or wait longer with --timeout")
        sleep(interval if timeout is None else max(min(interval, timeout - elapsed), 0.0))


def observe(settings: Settings, gate: Gate, local: LocalState, stage: str | None) -> Observation:
    """One poll; a server that is briefly unreachable is a 'not yet', not a failure."""
    chosen = stage or default_stage(local)
    try:
        if gate.lag_below is not None:
            return _observe_lag(settings, gate.lag_below, local, chosen)
        if gate.position is not None:
            return _observe_position(settings, gate.position, local, chosen)
        return _observe_gtid(str(gate.gtid), local, chosen)
    except TransientError as exc:
        return Observation(chosen, False, exc.message, UNREACHABLE)


def _observe_position(settings: Settings, target: SourcePosition, local: LocalState, stage: str) -> Observation:
    tail = local.tail
    if tail is None:
        return Observation(stage, False, "tail has no checkpoint yet", NO_CHECKPOINT)
    at = SourcePosition(tail.file, tail.pos)
    where = f"tail is at {at}"
    if at.key() < target.key():
        if not _headers_only(settings, at, target):
            return Observation(stage, False, where, TAIL_BEHIND)
        where += f", and only rotation headers lie from there to {target}"  # no transaction in between
    if stage == TailCheckpoint.STAGE:
        return Observation(stage, True, where, REACHED)
    offset = tail.seq_offset  # change-log positions after a --rebase (docs/formats.md)
    before = [p for p in local.pending_segments(stage) if _starts_before(p.name, target, offset)]
    if before:
        return Observation(stage, False, f"{len(before)} segment(s) before {target} not consumed yet (next {before[0].name})",
                           PENDING)
    return Observation(stage, True, f"every segment before {target} consumed; at {local.last_segment(stage)}", REACHED)


def _headers_only(settings: Settings, at: SourcePosition, target: SourcePosition) -> bool:
    """True if the server says only rotation headers lie from `at` to `target`; False if it cannot be asked."""
    try:
        with connection(settings.mysql) as conn:
            return only_headers_between(conn, (at.file, at.pos), (target.file, target.pos))
    except (CdcError, pymysql.MySQLError, OSError):
        return False  # behind, as before the question: a waiter polls again, verify says BEHIND


def _starts_before(segment: str, target: SourcePosition, seq_offset: int) -> bool:
    seq, pos, kind = segment_key(segment)
    at = (target.key()[0] + seq_offset, target.pos)
    # Snapshot lines carry the hand-over position itself and hold the state before it.
    return (seq, pos) < at or ((seq, pos) == at and kind == "s")


def _observe_gtid(want: str, local: LocalState, stage: str) -> Observation:
    tail = local.tail
    # A v1 checkpoint has only its last transaction's GTID: right for one MariaDB domain, short for more.
    have = None if tail is None else tail.gtid_state or tail.gtid
    wanted = GtidSet.parse(want)
    if not have or not GtidSet.parse(have).contains(wanted):
        return Observation(stage, False, f"tail's GTID state is {have or 'unknown'}", TAIL_BEHIND)
    if stage == TailCheckpoint.STAGE:
        return Observation(stage, True, f"tail's GTID state {have} contains {want}", REACHED)
    for segment in local.pending_segments(stage):
        for change in read_segment(segment):
            gtid = (change.get("src") or {}).get("gtid")
            if change.get("op") == "r" or (gtid and wanted.contains_gtid(gtid)):
                return Observation(stage, False, f"{segment.name} holds changes inside {want}, not consumed yet", PENDING)
    return Observation(stage, True, f"every change inside {want} consumed; at {local.last_segment(stage)}", REACHED)


def _observe_lag(settings: Settings, bound: float, local: LocalState, stage: str) -> Observation:
    position = local.source_position()
    if position is None:
        return Observation(stage, False, "no tail or snapshot checkpoint yet", NO_CHECKPOINT)
    now = time.time()
    lag = server_lag(settings, read_server_view(settings.mysql), position, offline_lag(local, now), now, [])
    seconds = lag.seconds
    if stage != TailCheckpoint.STAGE and seconds is not None:
        pending = local.pending_segments(stage)
        oldest = change_time(first_line(pending[0])) if pending else None
        seconds = max(seconds, now - oldest) if oldest is not None else seconds
    if seconds is None:
        return Observation(stage, False, "lag unknown", LAG_UNKNOWN)
    return Observation(stage, seconds < bound, f"lag {seconds:.1f}s", REACHED if seconds < bound else LAG_ABOVE)
