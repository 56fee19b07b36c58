"""resnapshot.json (version 1): the progress of `cdc resnapshot`, written after each chunk's high mark.

    {"version": 1, "run": "r20261126071500-1a2b3c4d", "status": "running" | "done" | "cancelled",
     "started_at": "2026-11-26T07:15:00Z", "next_chunk": 7,
     "tables": [{"db", "table", "cut": {"file", "pos"} | null, "last_key": [...] | null, "read_all": bool,
                 "done": bool, "rows": N, "chunks": N, "est_rows": N, "starts": {"<chunk>": last_key | null}}]}

`cut` is the binlog end read before the table's first low mark (tail's end line removes older rows that
were not read again); `last_key` the key of the last row read (change-log form, key order); `starts` the
key each chunk of the table read after (a chunk tail could not emit is read again from there); `read_all`
says every chunk was read (tail may still ask for a chunk again); `done` that tail wrote the table's end line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from cdc.checkpoints.record import Checkpoint, Document, Fields

RUNNING, DONE = "running", "done"


@dataclass(frozen=True)
class ResnapshotTable:
    """One table's progress in resnapshot.json."""

    db: str
    table: str
    cut: tuple[str, int] | None = None
    last_key: list[Any] | None = None
    read_all: bool = False
    done: bool = False
    rows: int = 0
    chunks: int = 0
    est_rows: int = 0
    starts: dict[str, list[Any] | None] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"

    def to_dict(self) -> Document:
        return {"db": self.db, "table": self.table,
                "cut": None if self.cut is None else {"file": self.cut[0], "pos": self.cut[1]},
                "last_key": self.last_key, "read_all": self.read_all, "done": self.done, "rows": self.rows,
                "chunks": self.chunks, "est_rows": self.est_rows, "starts": dict(self.starts)}

    @classmethod
    def from_fields(cls, fields: Fields) -> ResnapshotTable:
        cut = None if fields.raw("cut") is None else fields.nested("cut")
        starts = fields.raw("starts") or {}
        if not isinstance(starts, dict):
            raise fields.corrupt(f"starts = {starts!r} is not an object")
        return cls(fields.text("db"), fields.text("table"),
                   None if cut is None else (cut.text("file"), cut.integer("pos")),
                   fields.optional_list("last_key"), fields.flag("read_all"), fields.flag("done"),
                   fields.integer("rows"), fields.integer("chunks"), fields.integer("est_rows", 0), dict(starts))


@dataclass(frozen=True)
class ResnapshotCheckpoint(Checkpoint):
    """The run in progress (or the last one, done): its id, tables and the next chunk number."""

    STAGE: ClassVar[str] = "resnapshot"
    FILE: ClassVar[str] = "resnapshot"
    VERSION: ClassVar[int] = 1

    run: str
    status: str
    started_at: str
    next_chunk: int
    tables: tuple[ResnapshotTable, ...]

    def to_dict(self) -> Document:
        return {"version": self.VERSION, "run": self.run, "status": self.status, "started_at": self.started_at,
                "next_chunk": self.next_chunk, "tables": [t.to_dict() for t in self.tables]}

    @classmethod
    def from_fields(cls, fields: Fields) -> ResnapshotCheckpoint:
        return cls(fields.text("run"), fields.text("status"), fields.text("started_at"), fields.integer("next_chunk"),
                   tuple(ResnapshotTable.from_fields(t) for t in fields.items("tables")))
