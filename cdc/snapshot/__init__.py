"""The initial copy: a consistent snapshot of the selected tables, handed over to tail at an exact position.

Other stages use only the names below (pipeline's verify reuses the hand-over to read the source at a known
position; run and probe start a snapshot and read its runway). The modules beside this one are internals.
Names are imported on first use (PEP 562), so importing cdc.snapshot does not load the copier and its driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.checkpoints import Handover
    from cdc.snapshot.handover import LOCK_MODES, take_handover
    from cdc.snapshot.purge_gap import PurgeGap
    from cdc.snapshot.resnapshot import (
        RESNAPSHOT_CHUNK_SIZE,
        ResnapshotProgress,
        ResnapshotRequest,
        ResnapshotSummary,
        run_resnapshot,
    )
    from cdc.snapshot.run import DEFAULT_CHUNK_SIZE, SnapshotRequest, SnapshotSummary, TableProgress, run_snapshot
    from cdc.snapshot.runway import read_retention

_HOMES = {"DEFAULT_CHUNK_SIZE": "cdc.snapshot.run", "SnapshotRequest": "cdc.snapshot.run",
          "SnapshotSummary": "cdc.snapshot.run", "TableProgress": "cdc.snapshot.run", "run_snapshot": "cdc.snapshot.run",
          "Handover": "cdc.checkpoints", "take_handover": "cdc.snapshot.handover", "LOCK_MODES": "cdc.snapshot.handover",
          "read_retention": "cdc.snapshot.runway", "ResnapshotProgress": "cdc.snapshot.resnapshot",
          "ResnapshotRequest": "cdc.snapshot.resnapshot", "ResnapshotSummary": "cdc.snapshot.resnapshot",
          "run_resnapshot": "cdc.snapshot.resnapshot", "RESNAPSHOT_CHUNK_SIZE": "cdc.snapshot.resnapshot",
          "PurgeGap": "cdc.snapshot.purge_gap"}

__all__ = ["DEFAULT_CHUNK_SIZE", "Handover", "LOCK_MODES", "PurgeGap", "RESNAPSHOT_CHUNK_SIZE", "ResnapshotProgress",
           "ResnapshotRequest", "ResnapshotSummary", "SnapshotRequest", "SnapshotSummary", "TableProgress", "read_retention",
           "run_resnapshot", "run_snapshot", "take_handover"]

__getattr__ = exports(__name__, _HOMES)
