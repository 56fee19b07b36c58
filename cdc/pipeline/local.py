"""Read a state directory the way an operator needs it: every stage's checkpoint and what waits between stages.

Only reads; never takes a stage's lock (status must work while the stages run). Every stage writes
its checkpoint atomically (temp file + rename), so a read sees the old or the new document, never half.
A stage without a checkpoint has not run (or is not configured here); a corrupt one is a PositionError.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from cdc.changelog import file_seq, list_segments
from cdc.checkpoints import (
    PIPELINE,
    ApplyCheckpoint,
    CheckpointView,
    MergeCheckpoint,
    ShipKinesisCheckpoint,
    ShipS3Checkpoint,
    SnapshotStatus,
    TailCheckpoint,
)
from cdc.errors import PositionError
from cdc.state import StateDir, read_json

V = TypeVar("V", bound=CheckpointView)
_TAIL_BYTES = 65536


@dataclass(frozen=True)
class SourcePosition:
    """A binlog coordinate at a transaction boundary, as a checkpoint records it."""

    file: str
    pos: int
    gtid: str | None = None

    def key(self) -> tuple[int, int]:
        return (file_seq(self.file), self.pos)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(frozen=True)
class LocalState:
    """One consistent-enough read of a state directory (each file is read once)."""

    root: Path
    checkpoints: dict[str, CheckpointView]  # by stage name (cdc.checkpoints.PIPELINE); absent: not run
    segments: list[Path]
    batches: list[str] = field(default_factory=list)  # sealed batch ids (StateDir.sealed_batches), in order

    def has(self, stage: str) -> bool:
        return stage in self.checkpoints

    def get(self, kind: type[V]) -> V | None:
        found = self.checkpoints.get(kind.STAGE)
        return found if isinstance(found, kind) else None

    @property
    def tail(self) -> TailCheckpoint | None:
        return self.get(TailCheckpoint)

    def source_position(self) -> SourcePosition | None:
        """Where the pipeline's reading of the binlog stands: tail's checkpoint, else the snapshot's hand-over."""
        if self.tail is not None:
            return SourcePosition(self.tail.file, self.tail.pos, self.tail.gtid)
        snapshot = self.get(SnapshotStatus)
        if snapshot is not None and snapshot.handover is not None:
            h = snapshot.handover
            return SourcePosition(h.file, h.pos, h.gtid)
        return None

    def last_batch(self, stage: str) -> str | None:
        """The last batch spark-merge wrote or snowflake-apply applied (None for the other stages)."""
        found = self.checkpoints.get(stage)
        return found.last_batch if isinstance(found, (MergeCheckpoint, ApplyCheckpoint)) else None

    def last_segment(self, stage: str) -> str | None:
        """The last change-log segment `stage` has consumed (snowflake-apply: through its last applied batch)."""
        found = self.checkpoints.get(stage)
        if isinstance(found, (TailCheckpoint, ShipKinesisCheckpoint, ShipS3Checkpoint, MergeCheckpoint)):
            return found.last_segment
        if not isinstance(found, ApplyCheckpoint) or found.last_batch is None:
            return None
        return self._last_segment_of(found.last_batch)

    def _last_segment_of(self, batch: str) -> str:
        path = StateDir(self.root).manifest_path(batch)
        manifest = read_json(path)
        if manifest is None or not isinstance(manifest.get("segments"), list) or len(manifest["segments"]) != 2:
            raise PositionError(
                f"{ApplyCheckpoint.FILE}.json names batch {batch}, but {path} is missing or has no segments "
                "[first, last]",
                hint="restore the batch directory, or rerun spark-merge and snowflake-apply",
            )
        return str(manifest["segments"][1])

    def pending_segments(self, stage: str) -> list[Path]:
        """Sealed segments `stage` has not consumed yet."""
        last = self.last_segment(stage)
        return [p for p in self.segments if last is None or p.name > last]

    def pending_batches(self) -> list[str]:
        """Sealed batches snowflake-apply has not applied yet."""
        last = self.last_batch(ApplyCheckpoint.STAGE)
        return [b for b in self.batches if last is None or b > last]


def read_local(state: StateDir) -> LocalState:
    """Every stage's checkpoint (each validated by its dataclass), the sealed segments and batches."""
    checkpoints: dict[str, CheckpointView] = {}
    for kind in PIPELINE:
        checkpoint = kind.read(state)
        if checkpoint is not None:
            checkpoints[kind.STAGE] = checkpoint
    return LocalState(state.root, checkpoints, list_segments(state.changelog), state.sealed_batches())


def first_line(path: Path) -> dict[str, Any] | None:
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                return _decode(line, path)
    return None


def last_line(path: Path) -> dict[str, Any] | None:
    """The last change of a sealed segment, reading only the end of the file."""
    size = path.stat().st_size
    chunk = _TAIL_BYTES
    with open(path, "rb") as handle:
        while True:
            handle.seek(max(size - chunk, 0), os.SEEK_SET)
            lines = [line for line in handle.read().split(b"\n") if line.strip()]
            # The first piece may be a partial line unless we read from the start of the file.
            if len(lines) > 1 or chunk >= size:
                return _decode(lines[-1], path) if lines else None
            chunk *= 4


def _decode(line: bytes, path: Path) -> dict[str, Any]:
    try:
        change: dict[str, Any] = orjson.loads(line)
        return change
    except orjson.JSONDecodeError as exc:
        raise PositionError(f"change-log segment {path} holds a line that is not JSON ({exc})",
                            hint="the segment is damaged: restore it, or rerun tail from a checkpoint before it") from exc


def change_time(change: dict[str, Any] | None) -> float | None:
    """The commit time (unix seconds) of a change line; None if it has none."""
    text = (change or {}).get("ts")
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
