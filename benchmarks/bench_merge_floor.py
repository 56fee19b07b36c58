"""How close a warm 1M merge is to what Spark's reads and writes alone cost, against DuckDB's whole merge.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_merge_floor.py [--rows 1000000] [--changes 1000000]
        [--repeat 5] [--warm-up 2]

bench_merge.py's workload and DuckDB statement. In one warm SparkSession, each round runs DuckDB's merge, cdc's
merge, then three pieces no merge of this shape can skip, each alone on the same files:
- `lake copy`: the previous lake version read and written again (copy-on-write: every row is in the new version);
- `kept read`: the change lines the superseded-lines pass leaves (cdc.spark.latest), parsed as the compaction
  reads them (types.keyed_line_schema), nothing done with them;
- `batch write`: about as many rows as the batch holds (a sample of the lake's, cached first, as the merge's
  changed rows are) written as Parquet.
Their sum is a floor for a merge's wall time in this session (the C pass, the grouping, the join, the typing,
the counts and the driver's own work come on top), printed beside the merge as ratios to DuckDB's time.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_merge as bm  # noqa: E402

from cdc.state import StateDir  # noqa: E402

PIECES = ("lake copy", "kept read", "batch write")


def pieces(spark: object, state: StateDir, change_files: list[str], base: Path,
           scratch: Path) -> dict[str, Callable[[Path], None]]:
    """The floor's three pieces, each writing where it is told (the pass's kept lines go under `scratch`)."""
    from pyspark.sql import functions as F

    from cdc.masking import masked_history
    from cdc.spark import latest, scan
    from cdc.spark.types import keyed_schema

    history = masked_history(state)
    infos = scan.local_stats(change_files, None)  # the files are the changes after the loaded snapshot: all new
    fewer = latest.for_run(change_files, None, history, infos, scratch / "kept")
    if fewer is None:
        raise SystemExit("the superseded-lines pass did not run (C reader not built?)")
    kept = [str(f) for f in fewer[0]]
    schema = keyed_schema(history, infos)
    lines = spark.read.schema(schema).json(kept)  # type: ignore[attr-defined]
    batch_rows = lines.count()
    lake = spark.read.parquet(str(base))  # type: ignore[attr-defined]
    share = batch_rows / lake.count()
    sample = lake.filter(F.rand(7) < share).persist()
    print(f"kept lines {batch_rows:,} in {len(kept)} files; batch-sized write: {sample.count():,} rows")
    return {
        "lake copy": lambda out: spark.read.parquet(str(base)).write.parquet(str(out)),  # type: ignore[attr-defined]
        "kept read": lambda out: spark.read.schema(schema).json(kept).write.format("noop").mode("overwrite").save(),  # type: ignore[attr-defined]
        "batch write": lambda out: sample.write.parquet(str(out)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warm-up", type=int, default=2, help="untimed rounds first (the JIT's warm-up)")
    args = parser.parse_args()
    worker = bm.Worker(ROOT)
    state, loaded, change_files, base, _, _ = bm.load_state(args.rows, args.changes, worker)
    worker.close()
    from cdc.config import SparkSettings
    from cdc.spark import merge
    from cdc.spark.session import build_session

    spark = build_session(SparkSettings(driver_memory="4g"))
    scratch = Path(tempfile.mkdtemp(prefix="cdc-floor-"))
    runs = pieces(spark, state, change_files, base, scratch)
    duck_out = scratch.with_suffix(".duckdb.parquet")
    times: dict[str, list[float]] = {k: [] for k in ("duckdb", "merge", *PIECES)}

    def timed(name: str, run: Callable[[], object]) -> None:
        started = time.monotonic()
        run()
        times[name].append(time.monotonic() - started)
        shutil.rmtree(scratch / name, ignore_errors=True)

    for round_ in range(args.warm_up + args.repeat):
        timed("duckdb", lambda: bm.duckdb_merge(change_files, base, duck_out))
        timed("merge", lambda: merge(StateDir(state.root), spark=spark))
        loaded.restore()
        for name in PIECES:
            timed(name, lambda name=name: runs[name](scratch / name))
        if round_ < args.warm_up:
            for values in times.values():
                values.clear()
    report(times)
    spark.stop()
    shutil.rmtree(state.root)
    shutil.rmtree(scratch, ignore_errors=True)
    duck_out.unlink(missing_ok=True)


def report(times: dict[str, list[float]]) -> None:
    import os

    duck = statistics.median(times["duckdb"])
    floor = sum(statistics.median(times[p]) for p in PIECES)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; medians of {len(times['duckdb'])} rounds")
    print(f"{'':22s}{'median s':>10s}{'x DuckDB':>10s}   every round")
    for name, values in times.items():
        print(f"{name:22s}{statistics.median(values):10.2f}{statistics.median(values) / duck:10.2f}   "
              + " ".join(f"{v:.2f}" for v in values))
    print(f"{'floor (sum of pieces)':22s}{floor:10.2f}{floor / duck:10.2f}")


if __name__ == "__main__":
    main()
