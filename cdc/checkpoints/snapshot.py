"""snapshot.json (version 1): the snapshot's progress and the hand-over position tail starts from.

    {"version": 1, "status": "running" | "done",
     "handover": {"file": "mariadb-bin.000003", "pos": 1234, "gtid": "0-1-57" | null},
     "tables": {"db.table": {"db", "table", "done": bool, "last_key": [...] | null, "rows": N, "chunks": N}},
     "row_counter": N, "started_at": "2026-11-22T07:00:01Z", "server_id": N,
     "lock": "mariadb" | "global" | "tables" | "none", "lock_seconds": 0.004, "resumes": N}

tail's first run starts at `handover`, and only once `status` is "done". `last_key` is the key of
the last row written, in change-log form and key order; `row_counter` numbers the next row.
server_id, lock, lock_seconds, resumes and chunks came after the first snapshots: absent, they read as 0 / "".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cdc.checkpoints.record import Checkpoint, CheckpointView, Document, Fields

RUNNING, DONE = "running", "done"


@dataclass(frozen=True)
class Handover:
    """The binlog position (a transaction boundary) where tail takes over from the snapshot."""

    file: str
    pos: int
    gtid: str | None  # the server's whole GTID state at that position

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid}

    @classmethod
    def from_fields(cls, fields: Fields) -> Handover:
        return cls(fields.text("file"), fields.integer("pos"), fields.optional_text("gtid"))


@dataclass(frozen=True)
class TableState:
    """One table's progress in snapshot.json; last_key is in change-log form, in key order."""

    db: str
    table: str
    done: bool = False
    last_key: list[Any] | None = None
    rows: int = 0
    chunks: int = 0

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"

    def to_dict(self) -> dict[str, Any]:
        return {"db": self.db, "table": self.table, "done": self.done, "last_key": self.last_key, "rows": self.rows,
                "chunks": self.chunks}

    @classmethod
    def from_fields(cls, fields: Fields) -> TableState:
        return cls(fields.text("db"), fields.text("table"), fields.flag("done"), fields.optional_list("last_key"),
                   fields.integer("rows"), fields.integer("chunks", 0))


class _SnapshotFile:
    STAGE: ClassVar[str] = "snapshot"
    FILE: ClassVar[str] = "snapshot"
    VERSION: ClassVar[int] = 1


@dataclass(frozen=True)
class SnapshotCheckpoint(_SnapshotFile, Checkpoint):
    """The snapshot stage's own record: written after every chunk, read to resume."""

    status: str
    handover: Handover
    tables: dict[str, TableState]
    row_counter: int
    started_at: str  # UTC, the `ts` of every snapshot line
    server_id: int
    lock: str
    lock_seconds: float
    resumes: int = 0

    @property
    def is_done(self) -> bool:
        return self.status == DONE

    def to_dict(self) -> Document:
        return {
            "version": self.VERSION, "status": self.status, "handover": self.handover.to_dict(),
            "tables": {name: t.to_dict() for name, t in self.tables.items()},
            "row_counter": self.row_counter, "started_at": self.started_at, "server_id": self.server_id,
            "lock": self.lock, "lock_seconds": self.lock_seconds, "resumes": self.resumes,
        }

    @classmethod
    def from_fields(cls, fields: Fields) -> SnapshotCheckpoint:
        return cls(
            fields.text("status"), Handover.from_fields(fields.nested("handover")),
            {name: TableState.from_fields(table) for name, table in fields.each("tables")},
            fields.integer("row_counter"), fields.text("started_at"), fields.integer("server_id", 0),
            fields.text("lock", ""), fields.number("lock_seconds", 0.0), fields.integer("resumes", 0),
        )


@dataclass(frozen=True)
class SnapshotStatus(_SnapshotFile, CheckpointView):
    """What the stages after the snapshot read of snapshot.json: is it done, and where does tail take over.

    Only these two fields, so a hand-written `{"version": 1, "status": "done", "handover": {...}}` (a
    runbook's explicit hand-over) starts tail; a snapshot without a hand-over is refused by tail only
    once it says it is done (its status is the first thing to tell the user).
    """

    status: str
    handover: Handover | None

    @property
    def is_done(self) -> bool:
        return self.status == DONE

    @classmethod
    def from_fields(cls, fields: Fields) -> SnapshotStatus:
        handover = fields.optional_nested("handover")
        return cls(fields.text("status"), None if handover is None else Handover.from_fields(handover))
