"""ship-kinesis.json (version 1) and ship-s3.json (version 2): the last segment a destination has acknowledged.

Both name their `destination`, so a checkpoint of another stream or prefix is refused (sinks.common).
ship-s3 v2 added `pending` (the batch being shipped, pinned before its first upload: s3_batches) and
`batches`; a v1 file shipped one segment per batch and has nothing pending.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cdc.checkpoints.record import Checkpoint, Document, Fields, Migration


@dataclass(frozen=True)
class ShipKinesisCheckpoint(Checkpoint):
    """Advanced after each segment, once Kinesis has acknowledged every record of it."""

    STAGE: ClassVar[str] = "ship-kinesis"
    FILE: ClassVar[str] = "ship-kinesis"
    VERSION: ClassVar[int] = 1

    destination: str | None = None  # e.g. "kinesis:orders"; None only before the first write
    last_segment: str | None = None
    segments: int = 0
    records: int = 0

    def to_dict(self) -> Document:
        return {"version": self.VERSION, "destination": self.destination, "last_segment": self.last_segment,
                "segments": self.segments, "records": self.records}

    @classmethod
    def from_fields(cls, fields: Fields) -> ShipKinesisCheckpoint:
        return cls(fields.optional_text("destination"), fields.optional_text("last_segment"),
                   fields.integer("segments", 0), fields.integer("records", 0))


def _s3_v1_to_v2(document: Document) -> Document:
    return {**document, "version": 2, "pending": None, "batches": document.get("segments", 0)}


@dataclass(frozen=True)
class ShipS3Checkpoint(Checkpoint):
    """Written twice per batch: with `pending` before the first upload, then past the batch after its manifest."""

    STAGE: ClassVar[str] = "ship-s3"
    FILE: ClassVar[str] = "ship-s3"
    VERSION: ClassVar[int] = 2
    MIGRATIONS: ClassVar[Mapping[int, Migration]] = {1: _s3_v1_to_v2}

    destination: str | None = None  # e.g. "s3://lake/cdc"; None only before the first write
    last_segment: str | None = None
    segments: int = 0
    batches: int = 0
    records: int = 0
    # None, or {"first", "last", "roll_size", "compression"}: kept as the JSON value written, because
    # s3_batches.pending_batch checks it against the change log and names the way out of a hand-edited one.
    pending: Any = None

    def to_dict(self) -> Document:
        return {"version": self.VERSION, "destination": self.destination, "last_segment": self.last_segment,
                "segments": self.segments, "batches": self.batches, "records": self.records, "pending": self.pending}

    @classmethod
    def from_fields(cls, fields: Fields) -> ShipS3Checkpoint:
        return cls(fields.optional_text("destination"), fields.optional_text("last_segment"),
                   fields.integer("segments", 0), fields.integer("batches", 0), fields.integer("records", 0),
                   fields.raw("pending"))
