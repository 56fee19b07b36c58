"""A small spark-merge: a few changes over many tables, the case a `cdc run --follow` cycle has.

    .venv/bin/python benchmarks/bench_small_merge.py [--tables 16] [--changes 8] [--rows 1000] [--repeat 3] [--via cli|job]

The lake holds --tables tables of --rows rows (loaded by a first merge); then --changes changes (one
update each, on --changes different tables, the rest untouched) are merged, as:
- cold: `cdc spark-merge --json` in a fresh process (interpreter, the command line's imports, JVM and session start
  included), what a one-shot `cdc spark-merge` pays; `--via job`: `python -m cdc.spark.job` instead (the figures
  before 2026-12-04), without the command line's start;
- warm: merge() in a process whose SparkSession is up (benchmarks/merge_worker.py), what a `cdc run
  --follow` cycle pays.
The state is reset between runs. Printed: each run's seconds and its phases, and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_merge import BINLOG, COLUMNS, Checkpointed, Worker, cold_merge, write  # noqa: E402

from cdc.changelog import position_string  # noqa: E402
from cdc.schema import SchemaHistory, TableSchema  # noqa: E402
from cdc.state import StateDir  # noqa: E402


def change(table: str, op: str, key: int, pos: int, row: int, rng: random.Random, snapshot: bool = False) -> bytes:
    image = {"id": key, "name": f"name {key} {rng.randrange(1000)}",
             "amount": f"{rng.randrange(10**9)}.{rng.randrange(10000):04d}", "updated": "2026-11-22 07:00:01.123456"}
    return orjson.dumps({
        "after": image, "before": image if op == "u" else None, "db": "bench", "key": {"id": key}, "op": op,
        "position": position_string(BINLOG, pos, row, snapshot=snapshot),
        "src": {"file": BINLOG, "gtid": None, "pos": pos, "row": row, "server_id": 1, "xid": pos},
        "table": table, "ts": "2026-11-22T07:00:01Z", "v": 1}, option=orjson.OPT_SORT_KEYS) + b"\n"


def load(tables: int, rows: int, changes: int, worker: Worker) -> tuple[StateDir, Checkpointed]:
    rng = random.Random(5)
    state = StateDir(Path(tempfile.mkdtemp(prefix="cdc-bench-small-")))
    history = SchemaHistory(state.schema)
    names = [f"t{i:02d}" for i in range(tables)]
    for name in names:
        history.record(TableSchema("bench", name, COLUMNS, ("id",), "0000000001:000000000004:b000000000000"))
    snapshot = [(position_string(BINLOG, 4, n, snapshot=True), change(name, "r", key, 4, n, rng, snapshot=True))
                for n, (name, key) in enumerate((name, key) for name in names for key in range(1, rows + 1))]
    write(state, snapshot)
    worker.merge(state.root)
    later = [(position_string(BINLOG, 1000 + 100 * i, 0), change(names[i % tables], "u", i + 1, 1000 + 100 * i, 0, rng))
             for i in range(changes)]
    write(state, later)
    return state, Checkpointed(state.root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=16)
    parser.add_argument("--changes", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout measured (default: this one)")
    parser.add_argument("--via", choices=("cli", "job"), default="cli", help="the cold merge's process (see above)")
    args = parser.parse_args()
    cli = args.via == "cli"
    code = args.code.resolve()
    if cli and code != ROOT:  # cdc.commands comes from this interpreter's install: another checkout's would be mixed
        parser.error("--code measures another checkout's library: give it --via job")
    print(f"load average at start {os.getloadavg()}", flush=True)
    worker = Worker(code)
    state, loaded = load(args.tables, args.rows, args.changes, worker)
    runs: dict[str, list[float]] = {"warm": [], "cold": []}
    try:
        worker.merge(state.root)  # untimed: a warm session has merged before
        loaded.restore()
        cold_merge(code, state.root, cli)  # untimed: the first fresh process records the JVM's class archive
        loaded.restore()
        for repeat in range(args.repeat):
            reply = worker.merge(state.root)
            loaded.restore()
            runs["warm"].append(float(reply["seconds"]))  # type: ignore[arg-type]
            summary = reply["summary"]
            print(f"repeat {repeat + 1}: warm {reply['seconds']:.2f}s spark jobs "  # type: ignore[index]
                  f"{summary.get('spark_jobs', '?')} phases {summary['phases']} "  # type: ignore[union-attr,index]
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
            seconds, phases = cold_merge(code, state.root, cli)
            loaded.restore()
            runs["cold"].append(seconds)
            print(f"repeat {repeat + 1}: cold {seconds:.2f}s phases {phases} load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        worker.close()
        shutil.rmtree(state.root)
    print(f"{args.changes} changes over {args.tables} tables of {args.rows} rows: warm median "
          f"{statistics.median(runs['warm']):.2f}s, cold (fresh process) median {statistics.median(runs['cold']):.2f}s; "
          f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
