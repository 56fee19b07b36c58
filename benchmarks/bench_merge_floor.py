"""How close a warm 1M merge is to what Spark's reads and writes alone cost, against DuckDB's whole merge.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_merge_floor.py [--rows 1000000] [--changes 1000000]
        [--repeat 5] [--warm-up 2] [--cold 3]

bench_merge.py's workload and DuckDB statement. In one warm SparkSession, each round runs DuckDB's merge, cdc's
merge, then three pieces no merge of this shape can skip, each alone on the same files:
- `lake copy`: the previous lake version read and written again (copy-on-write: every row is in the new version);
- `kept read`: the change lines the superseded-lines pass leaves (cdc.spark.latest), read as the compaction reads
  them (its JSON lines as types.keyed_line_schema and its flat ones through cdc.spark.flat), nothing done with them;
- `batch write`: about as many rows as the batch holds (a sample of the lake's, cached first, as the merge's
  changed rows are) written as Parquet.
Their sum is a floor for a merge's wall time in this session (the C pass, the grouping, the join, the typing,
the counts and the driver's own work come on top), printed beside the merge as ratios to DuckDB's time.

`--cold N` adds the floor of a fresh process (what `cdc spark-merge` pays from its start): N rounds, each of
DuckDB's merge, then `python` started afresh to build the one-shot merge's session (its JIT options and class
archive, as cdc.spark.job builds it) and stop it (`session`), then the same with the lake copy between the two
(`session + lake copy`). Every 1M merge writes every row of the new lake version, so the second is a floor under
a fresh merge's wall time, weighed against issue 25's <= 5x DuckDB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    from cdc.spark import flat, latest, scan
    from cdc.spark.types import keyed_schema

    history = masked_history(state)
    infos = scan.local_stats(change_files, None)  # the files are the changes after the loaded snapshot: all new
    fewer = latest.for_run(change_files, None, history, infos, scratch / "kept")
    if fewer is None:
        raise SystemExit("the superseded-lines pass did not run (C reader not built?)")
    kept = [str(f) for f in fewer.files]
    schema = keyed_schema(history, infos)

    def kept_lines() -> Any:  # as cdc.spark.job reads them: most are in flat form, the rest JSON
        return flat.with_flat(spark, spark.read.schema(schema).json(kept), schema, fewer)  # type: ignore[attr-defined]

    batch_rows = kept_lines().count()
    lake = spark.read.parquet(str(base))  # type: ignore[attr-defined]
    share = batch_rows / lake.count()
    sample = lake.filter(F.rand(7) < share).persist()
    flat_files = sum(len(t.files) for t in fewer.flat.values())
    print(f"kept lines {batch_rows:,} in {len(kept)} JSON and {flat_files} flat files; "
          f"batch-sized write: {sample.count():,} rows")
    return {
        "lake copy": lambda out: spark.read.parquet(str(base)).write.parquet(str(out)),  # type: ignore[attr-defined]
        "kept read": lambda out: kept_lines().write.format("noop").mode("overwrite").save(),
        "batch write": lambda out: sample.write.parquet(str(out)),
    }


def fresh(piece: str, base: Path, out: Path, input_bytes: int) -> None:
    """One cold piece in this (fresh) process: the one-shot session started, the lake copied if asked, stopped."""
    from cdc.config import SparkSettings
    from cdc.spark.session import build_session, stop_session

    spark = build_session(SparkSettings(driver_memory="4g"), record_classes=True, one_shot=True,
                          input_bytes=input_bytes)
    if piece == "lake-copy":
        spark.read.parquet(str(base)).write.parquet(str(out))
    stop_session(spark)


def cold_rounds(rounds: int, change_files: list[str], base: Path, scratch: Path) -> dict[str, list[float]]:
    """Wall seconds of fresh processes making the cold pieces, each round beside DuckDB's merge."""
    input_bytes = sum(os.path.getsize(f) for f in change_files)
    duck_out = scratch.with_suffix(".duckdb.parquet")
    times: dict[str, list[float]] = {"duckdb": [], "session": [], "session + lake copy": []}
    for _ in range(rounds):
        started = time.monotonic()
        bm.duckdb_merge(change_files, base, duck_out)
        times["duckdb"].append(time.monotonic() - started)
        for name, piece in (("session", "session"), ("session + lake copy", "lake-copy")):
            out = scratch / "cold-copy"
            started = time.monotonic()
            subprocess.run([sys.executable, __file__, "--fresh", piece, "--base", str(base), "--out", str(out),
                            "--input-bytes", str(input_bytes)], check=True, cwd=ROOT)
            times[name].append(time.monotonic() - started)
            shutil.rmtree(out, ignore_errors=True)
    duck_out.unlink(missing_ok=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warm-up", type=int, default=2, help="untimed rounds first (the JIT's warm-up)")
    parser.add_argument("--cold", type=int, default=0, help="rounds of the fresh-process floor after the warm ones")
    parser.add_argument("--fresh", choices=("session", "lake-copy"), help=argparse.SUPPRESS)  # a cold piece's process
    parser.add_argument("--base", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--input-bytes", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fresh:
        fresh(args.fresh, args.base, args.out, args.input_bytes)
        return
    worker = bm.Worker(ROOT)
    state, loaded, change_files, base, _, _ = bm.load_state(args.rows, args.changes, worker)
    worker.close()
    scratch = Path(tempfile.mkdtemp(prefix="cdc-floor-"))
    if args.repeat:  # --repeat 0: the cold floor alone
        report(warm_rounds(args.warm_up, args.repeat, state, loaded, change_files, base, scratch))
    if args.cold:
        cold_rounds(1, change_files, base, scratch)  # untimed: the first fresh JVM may record the class archive
        report(cold_rounds(args.cold, change_files, base, scratch), pieces=("session + lake copy",))
    shutil.rmtree(state.root)
    shutil.rmtree(scratch, ignore_errors=True)


def warm_rounds(warm_up: int, repeat: int, state: StateDir, loaded: bm.Checkpointed, change_files: list[str],
                base: Path, scratch: Path) -> dict[str, list[float]]:
    """Wall seconds of DuckDB's merge, cdc's and the floor's pieces, round after round in one warm session."""
    from cdc.config import SparkSettings
    from cdc.spark import merge
    from cdc.spark.session import build_session

    spark = build_session(SparkSettings(driver_memory="4g"))
    runs = pieces(spark, state, change_files, base, scratch)
    duck_out = scratch.with_suffix(".duckdb.parquet")
    times: dict[str, list[float]] = {k: [] for k in ("duckdb", "merge", *PIECES)}

    def timed(name: str, run: Callable[[], object]) -> None:
        started = time.monotonic()
        run()
        times[name].append(time.monotonic() - started)
        shutil.rmtree(scratch / name, ignore_errors=True)

    for round_ in range(warm_up + repeat):
        timed("duckdb", lambda: bm.duckdb_merge(change_files, base, duck_out))
        timed("merge", lambda: merge(StateDir(state.root), spark=spark))
        loaded.restore()
        for name in PIECES:
            timed(name, lambda name=name: runs[name](scratch / name))
        if round_ < warm_up:
            for values in times.values():
                values.clear()
    spark.stop()
    duck_out.unlink(missing_ok=True)
    return times


def report(times: dict[str, list[float]], pieces: tuple[str, ...] = PIECES) -> None:
    duck = statistics.median(times["duckdb"])
    floor = sum(statistics.median(times[p]) for p in pieces)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; medians of {len(times['duckdb'])} rounds")
    print(f"{'':22s}{'median s':>10s}{'x DuckDB':>10s}   every round")
    for name, values in times.items():
        print(f"{name:22s}{statistics.median(values):10.2f}{statistics.median(values) / duck:10.2f}   "
              + " ".join(f"{v:.2f}" for v in values))
    print(f"{'floor (sum of pieces)':22s}{floor:10.2f}{floor / duck:10.2f}")


if __name__ == "__main__":
    main()
