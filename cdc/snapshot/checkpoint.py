"""snapshot.json (version 1): the snapshot's progress and the hand-over position tail starts from.

    {"version": 1, "status": "running" | "done",
     "handover": {"file": "mariadb-bin.000003", "pos": 1234, "gtid": "0-1-57" | null},
     "tables": {"db.table": {"db", "table", "done": bool, "last_key": [...] | null, "rows": N, "chunks": N}},
     "row_counter": N, "started_at": "2026-11-22T07:00:01Z", "server_id": N,
     "lock": "mariadb" | "global" | "tables" | "none", "lock_seconds": 0.004, "resumes": N}

tail's first run starts at `handover`, and only once `status` is "done". `last_key` is the key of
the last row written, in change-log form and key order; `row_counter` numbers the next row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc.snapshot.handover import Handover
from cdc.errors import PositionError
from cdc.state import StateDir

STAGE = "snapshot"
CHECKPOINT_VERSION = 1
RUNNING, DONE = "running", "done"


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


@dataclass(frozen=True)
class SnapshotCheckpoint:
    status: str
    handover: Handover
    tables: dict[str, TableState]
    row_counter: int
    started_at: str  # UTC, the `ts` of every snapshot line
    server_id: int
    lock: str
    lock_seconds: float
    resumes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION, "status": self.status, "handover": self.handover.to_dict(),
            "tables": {name: {"db": t.db, "table": t.table, "done": t.done, "last_key": t.last_key,
                              "rows": t.rows, "chunks": t.chunks} for name, t in self.tables.items()},
            "row_counter": self.row_counter, "started_at": self.started_at, "server_id": self.server_id,
            "lock": self.lock, "lock_seconds": self.lock_seconds, "resumes": self.resumes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SnapshotCheckpoint:
        tables = {name: TableState(t["db"], t["table"], bool(t["done"]), t.get("last_key"), int(t["rows"]),
                                   int(t.get("chunks", 0))) for name, t in d["tables"].items()}
        return cls(d["status"], Handover.from_dict(d["handover"]), tables, int(d["row_counter"]),
                   d["started_at"], int(d.get("server_id", 0)), d.get("lock", ""),
                   float(d.get("lock_seconds", 0.0)), int(d.get("resumes", 0)))


def read_checkpoint(state: StateDir) -> SnapshotCheckpoint | None:
    document = state.read_checkpoint(STAGE, CHECKPOINT_VERSION)
    if document is None:
        return None
    try:
        return SnapshotCheckpoint.from_dict(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise PositionError(f"checkpoint {state.checkpoint_path(STAGE)} is corrupt ({exc!r})",
                            hint="restore it from a backup, or start over in a new state directory") from exc
