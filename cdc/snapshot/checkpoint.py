"""snapshot.json: its records (SnapshotCheckpoint, TableState) are cdc.checkpoints'; the snapshot stage's names for them."""

from __future__ import annotations

from cdc.checkpoints import DONE, RUNNING, SnapshotCheckpoint, TableState
from cdc.state import StateDir

__all__ = ["DONE", "RUNNING", "STAGE", "SnapshotCheckpoint", "TableState", "read_checkpoint"]

STAGE = SnapshotCheckpoint.STAGE


def read_checkpoint(state: StateDir) -> SnapshotCheckpoint | None:
    return SnapshotCheckpoint.read(state)
