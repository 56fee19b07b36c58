"""What the applied batches' manifests cost a long `cdc run --follow`, kept as folders or folded (cdc.snowflake.folded).

    .venv/bin/python benchmarks/bench_batch_fold.py [--batches 100000] [--tables 16] [--repeat 5]

A busy `--follow` seals a batch per cycle (~35,000 a day). Once applied, their data files are pruned; before
2026-12-05's second session their manifests stayed, so each cycle listed a folder that grew with the run, and a
kept Applier held every manifest it had read in memory. Over --batches synthetic sealed batches (manifests of
--tables tables, as spark-merge writes them; all applied, their data files gone), this measures:
- one cycle's looks at the batches (bench_batch_history's: three pending checks and a kept Applier's pass) and the
  memory the kept Applier's manifests take (tracemalloc), with every manifest kept, then after the prune folded
  all but the checkpointed one;
- the prune that folds them, against `find -delete` of as many folders in the same run (the file system's own
  cost of removing them).
Printed: medians over --repeat runs, the ratios, and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_batch_history import now, seal, timed  # noqa: E402
from bench_prune import find_delete  # noqa: E402

from cdc.checkpoints import ApplyCheckpoint, MergeCheckpoint  # noqa: E402
from cdc.pipeline.prune import plan_prune, prune  # noqa: E402
from cdc.snowflake.sealed import list_batches  # noqa: E402
from cdc.snowflake.staging import Batch  # noqa: E402
from cdc.state import StateDir  # noqa: E402

DAY = 86400.0


def fill(state: StateDir, count: int, tables: int) -> list[str]:
    """`count` applied batches two days old, data files already pruned (batches/pruned.json says so)."""
    ids = [seal(state, number, tables) for number in range(1, count + 1)]
    then = time.time() - 2 * DAY
    for batch in ids:
        os.utime(state.manifest_path(batch), (then, then))
    ApplyCheckpoint.applied(ids[-1], time.time()).write(state)
    MergeCheckpoint(f"{count:020d}.jsonl", ids[-1], None).write(state)
    state.mark_batches_pruned(ids[-1], ids[-1])
    return ids


def held(state: StateDir) -> tuple[dict[str, Batch], int]:
    """A kept Applier's manifests after its first pass, and the bytes they take."""
    tracemalloc.start()
    known: dict[str, Batch] = {}
    list_batches(state, known=known)
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return known, size


def measure(root: Path, batches: int, tables: int, repeat: int) -> dict[str, float]:
    state = StateDir(root / "state").ensure()
    fill(state, batches, tables)
    known, kept_bytes = held(state)
    kept = timed(lambda: now(state, known), repeat)
    began = time.perf_counter()
    result = prune(state, plan_prune(state, keep=DAY, expected=("snowflake-apply",)))
    folding = time.perf_counter() - began
    known, folded_bytes = held(state)
    figures = {"kept": kept, "kept_bytes": kept_bytes, "folding": folding, "folds": result.batches_folded,
               "folded": timed(lambda: now(state, known), repeat), "folded_bytes": folded_bytes,
               "size": (state.batches / "folded.json").stat().st_size}
    reference = StateDir(root / "reference").ensure()
    fill(reference, batches, tables)
    return figures | {"find": find_delete(reference.batches)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=100_000, help="applied batches (~3 busy days)")
    parser.add_argument("--tables", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}")
    root = Path(tempfile.mkdtemp(prefix="cdc-fold-"))
    try:
        f = measure(root, args.batches, args.tables, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"one cycle's looks at the batches: {args.batches:,} kept {f['kept']:.4f} s, folded {f['folded']:.5f} s: "
          f"{f['kept'] / f['folded']:,.0f}x less")
    print(f"a kept Applier's manifests: {f['kept_bytes'] / 2**20:,.1f} MiB kept, {f['folded_bytes'] / 2**10:,.1f} KiB "
          f"folded (folded.json {f['size']:,.0f} bytes)")
    print(f"the prune: {f['folds']:,.0f} folders folded in {f['folding']:.2f} s; find -delete of as many: "
          f"{f['find']:.2f} s; ratio {f['folding'] / f['find']:.2f}")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
