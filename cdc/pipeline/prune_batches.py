"""Prune the Snowflake-ready batches' data files once snowflake-apply has applied them (cdc.pipeline.prune's half
for `<state>/batches/`).

spark-merge seals a batch per busy cycle: a folder of Parquet files per table it touched, and its manifest. Only
snowflake-apply reads the files, once; after that they are disk and inodes (16 tables a cycle: ~16 files every
few seconds). The manifests stay: they are small, `cdc status` and `cdc wait` read the applied batch's segments
from one, and the apply's schema evolution looks back through them for a table's previous schema position.

What may go: the data of sealed batches up to snowflake-apply's checkpoint (when it has one; when it is expected
but has none, nothing; when it is neither, nothing reads batches and everything merged may go), sealed more than
`keep` seconds ago. `batches/pruned.json` records how far before the deleting starts; apply refuses a batch behind
it that a Snowflake target still lacks (a new target, or an emptied bookkeeping table) instead of failing on a
missing file.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from cdc.checkpoints import ApplyCheckpoint, MergeCheckpoint
from cdc.pipeline.local import LocalState
from cdc.state import StateDir


@dataclass(frozen=True)
class BatchPlan:
    batches: list[str]  # ids whose data files go, in order
    sizes: list[int]  # the bytes of each one's data files
    horizon: str | None  # the last batch whose data may go
    reason: str | None  # why none may, when none may

    def to_dict(self) -> dict[str, object]:
        return {"batches": len(self.batches), "batch_bytes": self.bytes, "batch_horizon": self.horizon,
                "batch_reason": self.reason}

    @property
    def bytes(self) -> int:
        return sum(self.sizes)


def plan_batches(state: StateDir, local: LocalState, *, keep: float, expected: Iterable[str], now: float) -> BatchPlan:
    """The sealed batches whose data files a prune would delete now (reads only)."""
    applied = local.get(ApplyCheckpoint)
    horizon = applied.last_batch if applied is not None else None
    if horizon is None and ApplyCheckpoint.STAGE in set(expected):
        return BatchPlan([], [], None, "snowflake-apply has not applied a batch yet")
    if horizon is None:  # nothing applies batches here: what spark-merge sealed is read by nobody
        merged = local.get(MergeCheckpoint)
        horizon = merged.last_batch if merged is not None else None
    if horizon is None:
        return BatchPlan([], [], None, "no batch sealed yet")
    _, done = state.batches_pruned()
    chosen: list[str] = []
    sizes: list[int] = []
    for batch in local.batches:
        if batch > horizon:
            break
        if done is not None and batch <= done:
            continue
        try:
            if state.manifest_path(batch).stat().st_mtime > now - keep:
                break  # batch ids follow time: every later one is younger still
        except FileNotFoundError:
            continue
        chosen.append(batch)
        sizes.append(_data_bytes(state, batch))
    return BatchPlan(chosen, sizes, horizon, None)


def prune_batches(state: StateDir, plan: BatchPlan, *, stop: threading.Event | None = None) -> tuple[int, int]:
    """Delete the data files of `plan`'s batches (their manifests stay): (batches pruned, bytes freed)."""
    if not plan.batches:
        return 0, 0
    through, done = state.batches_pruned()
    newest = plan.batches[-1]
    state.mark_batches_pruned(max(newest, through or newest), done)  # before anything goes
    pruned = freed = 0
    for batch, size in zip(plan.batches, plan.sizes, strict=True):
        if stop is not None and stop.is_set():
            return pruned, freed  # `done` stays: the next prune starts after it again
        _drop_data(state, batch)
        pruned, freed = pruned + 1, freed + size
    state.mark_batches_pruned(max(newest, through or newest), newest)
    return pruned, freed


def _data_bytes(state: StateDir, batch: str) -> int:
    total = 0
    for folder, _, files in os.walk(state.batch_dir(batch)):
        for name in files:
            if name != "manifest.json" or folder != str(state.batch_dir(batch)):
                try:
                    total += os.stat(os.path.join(folder, name)).st_size
                except FileNotFoundError:
                    continue
    return total


def _drop_data(state: StateDir, batch: str) -> None:
    folder = state.batch_dir(batch)
    for entry in os.scandir(folder):
        if entry.name == "manifest.json":
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)
