"""Prune the Snowflake-ready batches once snowflake-apply has applied them (cdc.pipeline.prune's half for
`<state>/batches/`).

spark-merge seals a batch per busy cycle: a folder of Parquet files per table it touched, and its manifest. Only
snowflake-apply reads the files, once; after that they are disk and inodes (16 tables a cycle: ~16 files every
few seconds). The manifests are read by `cdc status` and `cdc wait` (the applied batch's segments: its manifest
stays), spark-merge (its last batch's: stays) and apply's schema evolution, which looks back for a table's schema
position; for that, the older ones are folded into `batches/folded.json` (cdc.snowflake.folded) and their folders
go too, so the folder, and a kept Applier's memory, stop growing with every batch ever sealed.

What may go: the data of sealed batches up to snowflake-apply's checkpoint (when it has one; when it is expected
but has none, nothing; when it is neither, nothing reads batches and everything merged may go), sealed more than
`keep` seconds ago. `batches/pruned.json` records how far before the deleting starts, and folded.json what it
folds before the folders go; apply refuses a batch behind either that a Snowflake target still lacks (a new
target, or an emptied bookkeeping table) instead of failing on a missing file or skipping what is gone.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cdc.checkpoints import ApplyCheckpoint, MergeCheckpoint
from cdc.pipeline.local import LocalState
from cdc.snowflake import fold_batches_into
from cdc.state import StateDir, fsync_dir, read_json


@dataclass(frozen=True)
class BatchPlan:
    batches: list[str]  # ids whose data files go, in order
    sizes: list[int]  # the bytes of each one's data files
    horizon: str | None  # the last batch whose data may go
    reason: str | None  # why none may, when none may
    folds: list[str] = field(default_factory=list)  # ids whose whole folder goes, manifest folded (data gone too)

    def to_dict(self) -> dict[str, object]:
        return {"batches": len(self.batches), "batch_bytes": self.bytes, "batch_horizon": self.horizon,
                "batch_reason": self.reason, "batches_folded": len(self.folds)}

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
    pruned: list[str] = []  # data gone already: only their manifests are left
    for batch in local.batches:
        if batch > horizon:
            break
        if done is not None and batch <= done:
            pruned.append(batch)
            continue
        try:
            if state.manifest_path(batch).stat().st_mtime > now - keep:
                break  # batch ids follow time: every later one is younger still
        except FileNotFoundError:
            continue
        chosen.append(batch)
        sizes.append(_data_bytes(state, batch))
    # The manifests the checkpoints name stay: status and wait read the applied batch's, spark-merge its last one's.
    named = [c.last_batch for c in (applied, local.get(MergeCheckpoint)) if c is not None and c.last_batch]
    folds = [b for b in pruned + chosen if all(b < n for n in named)]
    return BatchPlan(chosen, sizes, horizon, None, folds)


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


def fold_batches(state: StateDir, plan: BatchPlan, *, stop: threading.Event | None = None) -> int:
    """Fold the manifests of `plan.folds` into batches/folded.json, then remove their folders: how many went."""
    if not plan.folds:
        return 0
    base = str(state.batches)  # strings, not Paths: a first prune of a long run folds 100,000s of them
    fold_batches_into(state, [(batch, _manifest(f"{base}/{batch}/manifest.json")) for batch in plan.folds])
    gone = 0  # the fold was written (fsynced) before anything goes: a crash midway folds them again, harmlessly
    for batch in plan.folds:
        if stop is not None and stop.is_set():
            break
        _drop_folder(f"{base}/{batch}")
        gone += 1
    fsync_dir(state.batches)
    return gone


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


def _manifest(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            document = orjson.loads(handle.read())
    except FileNotFoundError:
        return {}  # a folder a killed prune removed after folding it
    except orjson.JSONDecodeError:
        document = None
    if not isinstance(document, dict):
        return read_json(Path(path)) or {}  # raises, naming the file
    return document


def _drop_folder(folder: str) -> None:
    """A batch folder whose data files went already holds its manifest alone: two calls, not a tree walk."""
    try:
        os.unlink(f"{folder}/manifest.json")
        os.rmdir(folder)
    except OSError:  # more than its manifest (data files a stopped prune left), or no manifest: the whole tree
        shutil.rmtree(folder, ignore_errors=True)
