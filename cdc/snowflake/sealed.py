"""The sealed batches of a state directory, with their manifests: what snowflake-apply applies and looks back on.

spark-merge writes a batch's manifest last, so a batch folder without one is a merge still running, and a sealed
batch's manifest never changes afterwards: a kept Applier (`cdc run --follow`, a batch every few seconds) reads each
one once, not every batch at every pass (docs/performance.md, "Session of 2026-12-05").
"""

from __future__ import annotations

from cdc.errors import PositionError, PreconditionError
from cdc.snowflake import names
from cdc.snowflake.staging import Batch
from cdc.state import StateDir, read_json

NEW_TARGET_HINT = ("a new target (or an emptied bookkeeping table) needs the whole history: build it from a new state "
                   "directory and a fresh snapshot (cdc run), or point this one back at the target it was applied to")


def list_batches(state: StateDir, *, known: dict[str, Batch] | None = None) -> list[Batch]:
    """Sealed batches (manifest written last) in batch-id = time order, with their manifests.

    known: batches read before, by id, filled in with those read now. A sealed batch's manifest never changes, so a
    kept Applier (`cdc run --follow`, a batch every few seconds) reads each once, not every batch at every pass.
    """
    found = []
    ids = state.batch_ids()
    if known is not None and len(known) > len(ids):  # folded away by cdc prune: a kept Applier holds them no longer
        for gone in known.keys() - set(ids):
            del known[gone]
    for batch_id in ids:
        batch = None if known is None else known.get(batch_id)
        if batch is None:
            path = state.manifest_path(batch_id)
            manifest = read_json(path)
            if manifest is None:  # not sealed yet: its merge is running
                continue
            if manifest.get("version", 0) > 1:
                raise PreconditionError(f"batch manifest {path} has a newer version than this cdc",
                                        hint="apply it with the cdc version that merged it, or a newer one")
            batch = Batch(batch_id, state.batch_dir(batch_id), manifest)
            if known is not None:
                known[batch_id] = batch
        found.append(batch)
    return found


def refuse_pruned(state: StateDir, batch_id: str) -> None:
    """A batch whose data files `cdc prune` deleted (it was applied, to the target that then was) cannot be applied
    to one that lacks it: said so, rather than failing on a missing file."""
    through, _ = state.batches_pruned()
    if through is not None and batch_id <= through:
        raise PositionError(
            f"batch {batch_id} is not in this Snowflake target's {names.BOOKKEEPING_TABLE}, but its data files were "
            f"pruned (cdc prune, or cdc run by changelog.keep: every batch up to {through} was applied before)",
            hint=NEW_TARGET_HINT)


def refuse_folded(through: str | None, applied: set[str]) -> None:
    """A target that lacks `through`, the newest batch `cdc prune` folded away (cdc.snowflake.folded), lacks history
    whose data and manifests are gone: said so, rather than applying what is left on top of nothing."""
    if through is not None and through not in applied:
        raise PositionError(
            f"batch {through} is not in this Snowflake target's {names.BOOKKEEPING_TABLE}, but it and the batches "
            "before it were pruned (cdc prune, or cdc run by changelog.keep: they had been applied before)",
            hint=NEW_TARGET_HINT)


def forget_folded(applied: set[str], through: str | None) -> None:
    """A kept Applier's applied ids before the newest folded batch: never listed again (their folders are gone),
    so let go of, as the manifests are (list_batches)."""
    if through is not None and applied and min(applied) < through:
        applied.difference_update([batch_id for batch_id in applied if batch_id < through])
