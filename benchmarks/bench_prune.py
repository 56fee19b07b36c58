"""What a day of change log costs a `cdc run --follow` cycle, and what pruning it costs (cdc.pipeline.prune).

    .venv/bin/python benchmarks/bench_prune.py [--segments 172800] [--repeat 5]

A `--follow` run seals a segment every flush interval (0.5 s) while rows come: up to 172,800 a day. Every reader
lists the change log's folder on every cycle; this times one cycle's looks at it, as `cdc run` makes them (the
merge's pending check, ship's listing, the merge's input listing: each the segments after its own checkpoint),
over --segments synthetic sealed segments (one line each, named as tail names them) whose readers have all passed
them but the last, and again once they are pruned. Then the prune itself, against the same number of files
deleted by `find -delete` in the same run (the reference: the file system's own cost of unlinking them).
Printed: medians over --repeat runs, the ratios, and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_batch_history import timed  # noqa: E402  (the median of --repeat calls)

from cdc.changelog import encode_line, list_segments, position_string, segment_name  # noqa: E402
from cdc.checkpoints import MergeCheckpoint, ShipS3Checkpoint, TailCheckpoint  # noqa: E402
from cdc.pipeline.prune import prune_changelog  # noqa: E402
from cdc.state import StateDir  # noqa: E402

BINLOG = "mariadb-bin.000001"
LINE = {"after": {"id": 1, "name": "x" * 200}, "before": None, "db": "shop", "key": {"id": 1}, "op": "c",
        "src": {"file": BINLOG, "gtid": None, "pos": 0, "row": 0, "server_id": 1, "xid": 1}, "table": "t",
        "ts": "2026-12-05T12:00:00Z", "v": 1}


def fill(state: StateDir, count: int) -> list[str]:
    """`count` sealed segments two days old; ship-s3 and spark-merge have read all but the last, tail wrote it."""
    state.changelog.mkdir(parents=True, exist_ok=True)
    names, then = [], time.time() - 2 * 86400
    for n in range(count):
        position = position_string(BINLOG, 4 + n * 100, 0)
        path = state.changelog / segment_name(position)
        path.write_bytes(encode_line({**LINE, "position": position}))
        os.utime(path, (then, then))
        names.append(path.name)
    ShipS3Checkpoint("s3://lake/cdc", names[-2], count - 1, count - 1, count - 1).write(state)
    MergeCheckpoint(names[-2], "b000000000001", None).write(state)
    TailCheckpoint(BINLOG, 4 + count * 100, last_segment=names[-1], server_uuid="u").write(state)
    return names


def cycle_looks(state: StateDir, after: str) -> None:
    for reader in ("spark-merge", "ship-s3", "spark-merge"):
        list_segments(state.changelog, after, reader=reader)


def find_delete(folder: Path, *which: str) -> float:
    """Seconds `find -delete` takes over `folder`'s entries (the file system's own cost of removing them)."""
    began = time.perf_counter()
    subprocess.run(["find", str(folder), "-mindepth", "1", *which, "-delete"], check=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--segments", type=int, default=172_800, help="sealed segments (a day at 2 a second)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}")
    root = Path(tempfile.mkdtemp(prefix="cdc-prune-"))
    try:
        state = StateDir(root / "state").ensure()
        names = fill(state, args.segments)
        full = timed(lambda: cycle_looks(state, names[-2]), args.repeat)
        began = time.perf_counter()
        result = prune_changelog(state, keep=86400.0, expected=("ship-s3", "spark-merge"))
        pruning = time.perf_counter() - began
        pruned = timed(lambda: cycle_looks(state, names[-2]), args.repeat)
        reference = StateDir(root / "reference").ensure()
        fill(reference, args.segments)
        find = find_delete(reference.changelog, "-name", "seg-*")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"one cycle's looks at the change log: {args.segments:,} segments {full:.4f} s, after the prune "
          f"({result.plan.kept} kept) {pruned:.5f} s: {full / pruned:,.0f}x less")
    print(f"the prune: {result.deleted:,} segments ({result.freed / 2**20:.1f} MiB) in {pruning:.2f} s "
          f"(plan and unlink); find -delete of as many: {find:.2f} s; ratio {pruning / find:.2f}")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
