"""Every stage's checkpoint contract: one frozen dataclass each, its file, version, fields and migrations.

Each stage writes its own checkpoint with `.write(state)` and every reader (the stage itself, the next
stage, `cdc status`, `wait`, `verify`, `run`) reads it with `.read(state)`, so the names, versions and
field types live here only. The files are golden in tests/checkpoints/golden (`<file>.v<version>.json`):
a change of shape bumps VERSION, adds a migration from the old one and a golden file for the new.

    snapshot.json         SnapshotCheckpoint (the snapshot's own), SnapshotStatus (what the later stages read)
    tail.json             TailCheckpoint
    ship-kinesis.json     ShipKinesisCheckpoint
    ship-s3.json          ShipS3Checkpoint
    merge.json            MergeCheckpoint (stage spark-merge)
    snowflake-apply.json  ApplyCheckpoint
    resnapshot.json       ResnapshotCheckpoint (cdc resnapshot's progress; beside the pipeline, not in it)
"""

from __future__ import annotations

from cdc.checkpoints.apply import ApplyCheckpoint
from cdc.checkpoints.merge import MergeCheckpoint
from cdc.checkpoints.record import Checkpoint, CheckpointView, Fields
from cdc.checkpoints.resnapshot import ResnapshotCheckpoint, ResnapshotTable
from cdc.checkpoints.ship import ShipKinesisCheckpoint, ShipS3Checkpoint
from cdc.checkpoints.snapshot import DONE, RUNNING, Handover, SnapshotCheckpoint, SnapshotStatus, TableState
from cdc.checkpoints.tail import TailCheckpoint

# The stages that consume sealed change-log segments, in pipeline order.
CHANGELOG_CONSUMERS: tuple[type[Checkpoint], ...] = (
    ShipKinesisCheckpoint, ShipS3Checkpoint, MergeCheckpoint, ApplyCheckpoint)
# What each stage writes, in pipeline order.
STAGE_CHECKPOINTS: tuple[type[Checkpoint], ...] = (SnapshotCheckpoint, TailCheckpoint, *CHANGELOG_CONSUMERS)
# What a reader of a whole state directory reads, in pipeline order (the snapshot as its status and hand-over).
PIPELINE: tuple[type[CheckpointView], ...] = (SnapshotStatus, TailCheckpoint, *CHANGELOG_CONSUMERS)

__all__ = [
    "CHANGELOG_CONSUMERS", "DONE", "PIPELINE", "RUNNING", "STAGE_CHECKPOINTS", "ApplyCheckpoint", "Checkpoint",
    "CheckpointView", "Fields", "Handover", "MergeCheckpoint", "ShipKinesisCheckpoint", "ShipS3Checkpoint",
    "ResnapshotCheckpoint", "ResnapshotTable", "SnapshotCheckpoint", "SnapshotStatus", "TableState", "TailCheckpoint",
]
