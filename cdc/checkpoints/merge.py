"""merge.json (version 1): the last segment and batch spark-merge has merged (written after the lake pointers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cdc.checkpoints.record import Checkpoint, Document, Fields


@dataclass(frozen=True)
class MergeCheckpoint(Checkpoint):
    """Written last in a merge run: the batch is sealed and every lake table switched to its version."""

    STAGE: ClassVar[str] = "spark-merge"
    FILE: ClassVar[str] = "merge"
    VERSION: ClassVar[int] = 1

    last_segment: str | None = None  # the run's last input segment (the batch manifest's segments[1])
    last_batch: str | None = None  # b<run>, zero-padded: run numbers follow from it
    # Beyond the documented fields: lines at or before it that a tail replay after a crash re-sealed
    # were merged by an earlier run and are dropped, never re-applied.
    last_position: str | None = None

    def to_dict(self) -> Document:
        return {"version": self.VERSION, "last_segment": self.last_segment, "last_batch": self.last_batch,
                "last_position": self.last_position}

    @classmethod
    def from_fields(cls, fields: Fields) -> MergeCheckpoint:
        return cls(fields.optional_text("last_segment"), fields.optional_text("last_batch"),
                   fields.optional_text("last_position"))
