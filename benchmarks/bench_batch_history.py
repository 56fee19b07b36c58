"""What a long `cdc run --follow` pays per cycle for the batches it sealed before: the batch bookkeeping alone.

    .venv/bin/python benchmarks/bench_batch_history.py [--batches 100,2000,20000] [--tables 16] [--repeat 5]

A busy `--follow` seals a batch every few seconds (~1,200 an hour), and every sealed batch stays in the state
directory. Each cycle looks at them: snowflake-bootstrap and snowflake-apply ask which batches wait (before and
after the apply), and the apply's pass lists the sealed batches with their manifests (what schema evolution looks
back on). This times one cycle's worth of those looks over a state directory of --batches synthetic sealed
batches (manifests of --tables tables, as spark-merge writes them), one of them new, Snowflake left out:
- reference, in the same run: the looks as they were before 2026-12-05, every one reading every manifest
  (`list_batches(state)` four times: the pending checks of bootstrap and apply, the pass, the check after);
- cdc: the looks as a cycle makes them now: the pending checks on the batch names after the apply checkpoint
  (three), and the pass of a kept Applier, which reads only the manifests it has not read yet.
Printed: the median seconds of each over --repeat runs, their ratio, and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cdc.checkpoints import ApplyCheckpoint  # noqa: E402
from cdc.pipeline.run_stages import pending_batches  # noqa: E402
from cdc.snowflake.sealed import list_batches  # noqa: E402
from cdc.snowflake.staging import Batch  # noqa: E402
from cdc.state import StateDir  # noqa: E402


def seal(state: StateDir, number: int, tables: int) -> str:
    """A sealed batch as spark-merge leaves it: its folder and its manifest (the part files are not read here)."""
    batch = f"b{number:012d}"
    state.batch_dir(batch).mkdir(parents=True)
    manifest = {"version": 1, "batch_id": batch, "segments": [f"{number:020d}.jsonl", f"{number:020d}.jsonl"],
                "tables": {f"shop.t{t:02d}": {"files": [f"shop.t{t:02d}/part-00000.parquet"], "rows": 12,
                                              "deletes": 3, "schema_position": "mariadb-bin.000001:000000004567"}
                           for t in range(tables)}}
    state.manifest_path(batch).write_bytes(orjson.dumps(manifest))
    return batch


def before(state: StateDir) -> None:
    for _ in range(4):
        list_batches(state)


def now(state: StateDir, known: dict[str, Batch]) -> None:
    for _ in range(3):
        pending_batches(state)
    list_batches(state, known=known)


def timed(call: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="100,2000,20000", help="sealed batches in the state directory")
    parser.add_argument("--tables", type=int, default=16, help="tables per batch manifest")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}")
    print(f"{'batches':>8} {'before s':>10} {'now s':>10} {'ratio':>8}   (one cycle's looks at the batches)")
    for count in (int(n) for n in args.batches.split(",")):
        root = Path(tempfile.mkdtemp(prefix="cdc-batches-"))
        try:
            state = StateDir(root).ensure()
            for number in range(1, count + 1):
                seal(state, number, args.tables)
            ApplyCheckpoint.applied(f"b{count - 1:012d}", time.time()).write(state)  # the last one is new
            known: dict[str, Batch] = {}
            list_batches(state, known=known)  # the kept Applier has read the others in earlier cycles
            del known[f"b{count:012d}"]
            old = timed(lambda: before(state), args.repeat)
            new = timed(lambda: now(state, dict(known)), args.repeat)
            print(f"{count:>8} {old:>10.4f} {new:>10.4f} {old / new:>7.1f}x")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
