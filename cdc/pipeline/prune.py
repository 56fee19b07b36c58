"""Prune the local change log: the sealed segments every consumer has read, once older than a retention window.

The change log is the buffer between the writers (snapshot, tail) and the stages that read it (ship-kinesis,
ship-s3, spark-merge; `cdc wait` and `cdc verify` look at snowflake-apply's place in it too). A segment behind
all of them is read by nothing again, yet it holds every row change of its seconds (~350 bytes a line) and every
reader lists the folder on every cycle: a `--follow` run seals one per flush interval (0.5 s) while rows come, up
to 172,800 a day (listing a day of them cost a cycle 0.84 s: docs/performance.md).

What may go, and what never does:
- only segments at or before the lowest position of the readers: those with a checkpoint, and those `expected`
  (the configured ones, the run's chain). An expected reader without a checkpoint would read the log from its
  start, so nothing goes until it has one;
- only segments sealed more than `keep` seconds ago (their file's modification time), for an operator's look back;
- never a segment a checkpoint names (tail resumes after its own; `cdc verify` reads a reader's last line);
- nothing while a snapshot or a re-snapshot is unfinished (a resumed one reads back its last sealed segment).
The newest name to go is recorded in the change log's marker first (fsynced), then the files are unlinked; a
reader whose position is before the marker refuses to start (cdc.changelog.check_not_pruned) instead of skipping
what is gone. A crash midway leaves some of them on disk, listed again by the next prune.
The same prune deletes the data files of the batches snowflake-apply has applied, then the folders of the older
ones, their manifests folded into one small file (cdc.pipeline.prune_batches).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cdc.changelog import mark_pruned, pruned_through
from cdc.checkpoints import (
    ApplyCheckpoint,
    MergeCheckpoint,
    ResnapshotCheckpoint,
    ShipKinesisCheckpoint,
    ShipS3Checkpoint,
    SnapshotStatus,
)
from cdc.checkpoints.resnapshot import RUNNING
from cdc.pipeline.local import LocalState, read_local
from cdc.pipeline.prune_batches import BatchPlan, fold_batches, plan_batches, prune_batches
from cdc.state import StateDir, fsync_dir

log = logging.getLogger(__name__)
# `cdc run`: a prune at most this often (and at the end of an --until-now run); with a short keep, more often:
# a 24th of it, so the log holds little more than asked, yet at most one prune every 10 s.
RUN_PRUNE_EVERY = 600.0
RUN_PRUNE_EVERY_MIN = 10.0
# The stages whose place in the change log holds it back, in pipeline order.
READERS = (ShipKinesisCheckpoint.STAGE, ShipS3Checkpoint.STAGE, MergeCheckpoint.STAGE, ApplyCheckpoint.STAGE)


@dataclass(frozen=True)
class PrunePlan:
    segments: list[Path]  # to delete, in source order
    bytes: int
    kept: int  # sealed segments that stay
    horizon: str | None  # the lowest reader position: nothing after it may go
    held_by: str | None  # the reader at the horizon
    reason: str | None  # why nothing may go, when nothing may
    positions: dict[str, str | None] = field(default_factory=dict)  # each reader's last segment
    batches: BatchPlan = BatchPlan([], [], None, None)  # the batches whose data files go

    def to_dict(self) -> dict[str, object]:
        return {"segments": len(self.segments), "bytes": self.bytes, "kept": self.kept, "horizon": self.horizon,
                "held_by": self.held_by, "reason": self.reason, "readers": dict(self.positions),
                "first": self.segments[0].name if self.segments else None,
                "last": self.segments[-1].name if self.segments else None, **self.batches.to_dict()}


@dataclass(frozen=True)
class PruneResult:
    plan: PrunePlan
    deleted: int
    freed: int  # bytes
    seconds: float
    through: str | None  # the change log's pruned marker after this prune
    batches_pruned: int = 0
    batches_freed: int = 0  # bytes
    batches_folded: int = 0  # folders removed, their manifests folded (cdc.snowflake.folded)

    def to_dict(self) -> dict[str, object]:
        return {**self.plan.to_dict(), "deleted": self.deleted, "freed": self.freed,
                "seconds": round(self.seconds, 3), "through": self.through, "batches_pruned": self.batches_pruned,
                "batches_freed": self.batches_freed, "batches_folded": self.batches_folded}


def plan_prune(state: StateDir, *, keep: float, expected: Iterable[str] = (), now: float | None = None) -> PrunePlan:
    """What a prune would delete now (reads only)."""
    local = read_local(state)
    now = time.time() if now is None else now
    batches = plan_batches(state, local, keep=keep, expected=expected, now=now)
    positions = {stage: local.last_segment(stage) for stage in READERS
                 if local.has(stage) or stage in set(expected)}
    reason = _unfinished(state, local)
    if reason is None and not positions:
        reason = "no stage reads the change log here yet"
    missing = sorted(stage for stage, at in positions.items() if at is None)
    if reason is None and missing:
        reason = f"{', '.join(missing)} has not read the change log yet (it would read it from its start)"
    if reason is not None:
        return PrunePlan([], 0, len(local.segments), None, None, reason, positions, batches)
    horizon, held_by = min((at, stage) for stage, at in positions.items() if at is not None)
    named = _named_by_checkpoints(local)
    chosen, size = [], 0
    for path in local.segments:
        if path.name > horizon:
            break
        if path.name in named:
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:  # another prune got there first
            continue
        if stat.st_mtime <= now - keep:
            chosen.append(path)
            size += stat.st_size
    return PrunePlan(chosen, size, len(local.segments) - len(chosen), horizon, held_by, None, positions, batches)


def prune(state: StateDir, plan: PrunePlan, *, now: float | None = None,
          stop: threading.Event | None = None) -> PruneResult:
    """Delete what `plan` chose: the marker first, then the files (the folder fsynced once at the end). A `stop`
    ends it early: what is left stays listed, behind the marker, for the next prune."""
    began = time.monotonic()
    through = pruned_through(state.changelog)
    if plan.segments:
        newest = plan.segments[-1].name
        if through is None or newest > through:
            mark_pruned(state.changelog, newest, at=time.time() if now is None else now)
            through = newest
    deleted = freed = 0
    for path in plan.segments:
        if stop is not None and stop.is_set():
            break
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        deleted, freed = deleted + 1, freed + size
    if deleted:
        fsync_dir(state.changelog)
    batches, batch_bytes = prune_batches(state, plan.batches, stop=stop)
    folded = fold_batches(state, plan.batches, stop=stop) if stop is None or not stop.is_set() else 0
    return PruneResult(plan, deleted, freed, time.monotonic() - began, through, batches, batch_bytes, folded)


def prune_changelog(state: StateDir, *, keep: float, expected: Iterable[str] = (),
                    stop: threading.Event | None = None) -> PruneResult:
    return prune(state, plan_prune(state, keep=keep, expected=expected), stop=stop)


def _unfinished(state: StateDir, local: LocalState) -> str | None:
    snapshot = local.get(SnapshotStatus)
    if snapshot is not None and not snapshot.is_done:
        return "a snapshot is unfinished (a resumed one reads back its last sealed segment)"
    resnapshot = ResnapshotCheckpoint.read(state)
    if resnapshot is not None and resnapshot.status == RUNNING:
        return "a re-snapshot is unfinished (a resumed one reads back its last sealed segment)"
    return None


def _named_by_checkpoints(local: LocalState) -> set[str]:
    """Segments a checkpoint names: tail's last one, and every reader's."""
    names = {local.last_segment(stage) for stage in local.checkpoints}
    return {name for name in names if name is not None}


class Pruner:
    """`cdc run`'s pruning, on a thread of its own at most once per `every` seconds: a first prune of a log kept for
    days unlinks for seconds, and the cycles go on meanwhile (it deletes only what every reader has passed)."""

    def __init__(self, state: StateDir, keep: float, expected: Iterable[str], stop: threading.Event) -> None:
        self.state, self.keep, self.expected, self.stop = state, keep, tuple(expected), stop
        self.every = min(RUN_PRUNE_EVERY, max(RUN_PRUNE_EVERY_MIN, keep / 24))
        self._thread: threading.Thread | None = None
        self._started: float | None = None

    def maybe(self) -> None:
        """Start a prune unless one runs or one started less than `every` seconds ago."""
        now = time.monotonic()
        if (self._thread is not None and self._thread.is_alive()) or (
                self._started is not None and now - self._started < self.every):
            return
        self._started = now
        self._thread = threading.Thread(target=self._prune, name="cdc-prune", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def _prune(self) -> None:
        try:
            result = prune_changelog(self.state, keep=self.keep, expected=self.expected, stop=self.stop)
        except Exception as exc:  # noqa: BLE001 - housekeeping: the run goes on, the next prune tries again
            log.warning("pruning the change log failed: %s", exc)
            return
        if result.deleted:
            log.info("pruned %d change-log segments (%.1f MiB) through %s; %d kept, held at %s by %s",
                     result.deleted, result.freed / 2**20, result.through, result.plan.kept, result.plan.horizon,
                     result.plan.held_by)
        if result.batches_pruned:
            log.info("pruned the data files of %d applied batches (%.1f MiB), up to %s", result.batches_pruned,
                     result.batches_freed / 2**20, result.plan.batches.batches[-1])
        if result.batches_folded:
            log.info("folded %d applied batches' manifests into batches/folded.json, their folders removed",
                     result.batches_folded)
