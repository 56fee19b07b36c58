"""snowflake-apply.json (version 1): the last batch applied (after its row in the bookkeeping table)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from cdc.checkpoints.record import Checkpoint, Document, Fields


@dataclass(frozen=True)
class ApplyCheckpoint(Checkpoint):
    """A convenience for `cdc status`/`wait`: Snowflake's bookkeeping table decides what is applied."""

    STAGE: ClassVar[str] = "snowflake-apply"
    FILE: ClassVar[str] = "snowflake-apply"
    VERSION: ClassVar[int] = 1

    last_batch: str | None = None
    applied_at: str | None = None  # UTC, 2026-11-22T07:00:01Z

    @classmethod
    def applied(cls, batch_id: str, when: float) -> ApplyCheckpoint:
        """The checkpoint after applying `batch_id` at `when` (unix seconds)."""
        return cls(batch_id, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)))

    def to_dict(self) -> Document:
        return {"version": self.VERSION, "last_batch": self.last_batch, "applied_at": self.applied_at}

    @classmethod
    def from_fields(cls, fields: Fields) -> ApplyCheckpoint:
        return cls(fields.optional_text("last_batch"), fields.optional_text("applied_at"))
