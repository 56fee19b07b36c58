"""Benchmark: spark-merge of 1,000,000 changes into a 1,000,000-row table vs a DuckDB single-SQL merge.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_merge.py [--rows 1000000] [--changes 1000000]
        [--repeat 3] [--warm-up 1] [--baseline /path/to/older/checkout] [--no-cold | --no-warm]

Workload: the table is loaded by a first merge of snapshot rows; then the changes: 30% of the keys
touched repeatedly (updates), deletes, and new keys. DuckDB computes the same new state in one
statement over the same files. Every Spark merge runs on the same data (the state directory is reset
to the loaded table between runs) and sits between two DuckDB runs; its ratio is to their mean, so
both engines saw the same load on a shared machine. Per repeat: warm (a merge in a process whose
SparkSession is already up) and cold (`python -m cdc.spark.job` as a fresh process: interpreter,
JVM and session start included). --baseline runs an older checkout's code the same way, interleaved,
for before/after pairs measured back to back. Printed: every repeat's seconds and ratios, the median
ratios, where the warm merge's time goes (`phases`), and a check that each Spark lake version holds
exactly DuckDB's rows. DuckDB writes only the new table state; Spark also writes the Snowflake batch.
--warm-up N: untimed warm merges first (default 1). The JVM's JIT is still compiling the merge's code after
one: a long-lived session's (`cdc run --follow`) steady state is reached after ~3.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cdc.changelog import SegmentWriter, position_string  # noqa: E402
from cdc.schema import Column, SchemaHistory, TableSchema  # noqa: E402
from cdc.state import StateDir  # noqa: E402

BINLOG = "mariadb-bin.000001"
COLUMNS = (Column("id", "bigint(20)", "bigint", nullable=False), Column("name", "varchar(64)", "varchar"),
           Column("amount", "decimal(18,4)", "decimal", precision=18, scale=4),
           Column("updated", "datetime(6)", "datetime", fsp=6))


def line(op: str, key: int, pos: int, row: int, rng: random.Random, snapshot: bool = False, before: bool = False) -> bytes:
    image = {"id": key, "name": f"name {key} {rng.randrange(1000)}",
             "amount": f"{rng.randrange(10**9)}.{rng.randrange(10000):04d}", "updated": "2026-11-22 07:00:01.123456"}
    return orjson.dumps({
        "after": None if op == "d" else image, "before": image if op in ("u", "d") else None, "db": "bench",
        "key": {"id": key}, "op": op, "position": position_string(BINLOG, pos, row, snapshot=snapshot),
        "src": {"file": BINLOG, "gtid": None, "pos": pos, "row": row, "server_id": 1, "xid": pos},
        "table": "t", "ts": "2026-11-22T07:00:01Z", "v": 1}, option=orjson.OPT_SORT_KEYS) + b"\n"


def write(state: StateDir, lines: list[tuple[str, bytes]], per_segment: int = 250_000) -> None:
    writer = SegmentWriter(state.changelog, owner="bench")
    for position, data in lines:
        writer.write(position, data)
        if writer.lines >= per_segment:
            writer.seal()
    writer.seal()


def workload(state: StateDir, rows: int, changes: int) -> None:
    rng = random.Random(42)
    SchemaHistory(state.schema).record(TableSchema("bench", "t", COLUMNS, ("id",), "0000000001:000000000004:b000000000000"))
    write(state, [(position_string(BINLOG, 4, i, snapshot=True), line("r", i, 4, i, rng, snapshot=True))
                  for i in range(1, rows + 1)])
    hot = rng.sample(range(1, rows + 1), int(rows * 0.3))
    out, next_key, pos = [], rows + 1, 1000
    for _ in range(changes):
        pos += 100
        roll = rng.random()
        if roll < 0.75:
            out.append(line("u", rng.choice(hot), pos, 0, rng))
        elif roll < 0.85:
            out.append(line("d", rng.choice(hot), pos, 0, rng))  # a delete of a gone key is a no-op both ways
        else:
            out.append(line("c", next_key, pos, 0, rng))
            next_key += 1
    write(state, [(position_string(BINLOG, 1000 + 100 * (i + 1), 0), data) for i, data in enumerate(out)])


DUCKDB_MERGE = """
COPY (
  WITH raw AS (
    SELECT * FROM read_json({files}, format='newline_delimited', columns={{
      'after': 'STRUCT(id BIGINT, name VARCHAR, amount DECIMAL(18,4), updated TIMESTAMP)',
      'key': 'STRUCT(id BIGINT)', 'op': 'VARCHAR', 'position': 'VARCHAR', 'ts': 'VARCHAR'}})),
  ev AS (
    SELECT coalesce(after.id, key.id) AS id, after, op, position, ts FROM raw),
  last AS (
    SELECT id, arg_max(ev, position) AS e FROM ev GROUP BY id)
  SELECT coalesce(l.id, o.id) AS id,
         CASE WHEN l.id IS NULL THEN o.name ELSE l.e.after.name END AS name,
         CASE WHEN l.id IS NULL THEN o.amount ELSE l.e.after.amount END AS amount,
         CASE WHEN l.id IS NULL THEN o.updated ELSE l.e.after.updated END AS updated,
         coalesce(l.e.op, o._cdc_op) AS _cdc_op, coalesce(l.e.position, o._cdc_position) AS _cdc_position
  FROM last l FULL OUTER JOIN read_parquet('{lake}/*.parquet') o ON l.id = o.id
  WHERE l.id IS NULL OR l.e.op <> 'd'
) TO '{out}' (FORMAT parquet)
"""


def duckdb_merge(change_files: list[str], base: Path, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds DuckDB takes for the same merge in one statement (new table state written to `out`)."""
    import duckdb

    t0, cpu0 = time.monotonic(), time.process_time()  # DuckDB's threads are this process's
    con = duckdb.connect()
    con.execute(DUCKDB_MERGE.format(files=change_files, lake=base, out=out))
    return time.monotonic() - t0, time.process_time() - cpu0


def same_rows(lake_version: Path, duck_out: Path) -> int:
    """Rows that differ between a Spark lake version and DuckDB's output (0: the same new state)."""
    import duckdb

    cols = "id, name, amount, updated, _cdc_op, _cdc_position"
    spark_rows, duck_rows = f"SELECT {cols} FROM read_parquet('{lake_version}/*.parquet')", f"SELECT {cols} FROM '{duck_out}'"
    con = duckdb.connect()
    return sum(con.execute(f"SELECT count(*) FROM (({a}) EXCEPT ALL ({b}))").fetchone()[0]
               for a, b in ((spark_rows, duck_rows), (duck_rows, spark_rows)))


class Checkpointed:
    """The state directory as loaded (table merged once), restorable after each timed merge."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = {p for p in root.rglob("*")}
        self.small = {p: p.read_bytes() for p in self.paths if p.is_file() and p.suffix == ".json"}

    def restore(self) -> None:
        for path in sorted(set(self.root.rglob("*")) - self.paths, key=lambda p: len(p.parts), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        for path, data in self.small.items():
            path.write_bytes(data)


class Worker:
    """A warm spark-merge process (benchmarks/merge_worker.py) importing cdc from `code`."""

    def __init__(self, code: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "merge_worker.py"), "--code", str(code)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.session = self._read()["session"]

    def merge(self, state: Path, max_segments: int | None = None) -> dict[str, object]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"state": str(state), "max_segments": max_segments}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        reply = self.proc.stdout.readline()
        if not reply:
            raise SystemExit(f"merge worker exited with {self.proc.wait()}")
        return json.loads(reply)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def cold_merge(code: Path, state: Path, cli: bool = False) -> tuple[float, dict[str, float]]:
    """Wall seconds of `python -m cdc.spark.job` from `code` (a fresh `cdc spark-merge` without the command line's
    own start), or of `cdc spark-merge --json` itself (cli: the command's modules come from this interpreter's install,
    its library from `code`), and its phases."""
    job = ["cdc", "spark-merge", "--json"] if cli else ["cdc.spark.job"]
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", *job, "--state-dir", str(state), "--driver-memory", "4g"],
                          cwd=code, env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if done.returncode:
        raise SystemExit(f"cold merge failed ({done.returncode}):\n{done.stderr}")
    summary = json.loads(done.stdout)
    # process = everything outside merge(): interpreter, imports, JVM exit
    return seconds, {**summary["phases"], "process": round(seconds - summary["seconds"], 3),
                     "spark_jobs": summary.get("spark_jobs", -1)}


@dataclass(frozen=True)
class Measured:
    seconds: float
    ratio: float  # to the mean wall time of the DuckDB runs around it
    cpu: float | None = None
    cpu_ratio: float | None = None

    def __str__(self) -> str:
        cpu = f", cpu {self.cpu:5.1f}s {self.cpu_ratio:5.1f}x" if self.cpu is not None else ""
        return f"{self.seconds:5.1f}s {self.ratio:5.1f}x{cpu}"


@dataclass
class Variant:
    label: str
    code: Path
    worker: Worker
    runs: dict[str, list[Measured]] = field(default_factory=lambda: {"warm": [], "cold": []})
    phases: dict[str, list[dict[str, float]]] = field(default_factory=lambda: {"warm": [], "cold": []})


class Bench:
    """Spark runs, each between two DuckDB runs on the same data; the state reset after each."""

    def __init__(self, state: StateDir, loaded: Checkpointed, change_files: list[str], base: Path, lake: Path) -> None:
        self.state, self.loaded, self.change_files, self.base, self.lake = state, loaded, change_files, base, lake
        self.duck_out = state.root.with_name(state.root.name + "-duckdb.parquet")  # outside what restore() resets
        self.last_duck = self.duck()
        self.mismatches = 0

    def duck(self) -> tuple[float, float]:
        self.last_duck = duckdb_merge(self.change_files, self.base, self.duck_out)
        return self.last_duck

    def timed(self, run: Callable[[], tuple[float, float | None]]) -> tuple[Measured, float]:
        """The Spark run measured against the mean of the DuckDB runs around it (and that mean's wall seconds)."""
        before = self.last_duck
        seconds, cpu = run()
        self.mismatches += same_rows(self.lake / "v000000000002", self.duck_out)
        self.loaded.restore()
        after = self.duck()
        duck, duck_cpu = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
        return Measured(seconds, seconds / duck, cpu, None if cpu is None else cpu / duck_cpu), duck

    def run(self, variant: Variant, kind: str) -> str:
        phases: dict[str, float] = {}

        def warm() -> tuple[float, float | None]:
            reply = variant.worker.merge(self.state.root)
            phases.update(reply["summary"]["phases"])  # type: ignore[index]
            return float(reply["seconds"]), float(reply["cpu"])  # type: ignore[arg-type]

        def cold() -> tuple[float, float | None]:
            seconds, found = cold_merge(variant.code, self.state.root)
            phases.update(found)
            return seconds, None

        measured, duck = self.timed(warm if kind == "warm" else cold)
        variant.runs[kind].append(measured)
        variant.phases[kind].append(phases)
        return f"{variant.label} {kind} {measured} (duckdb {duck:.2f}s)"

    def warm_up(self, variant: Variant, cold: bool, merges: int = 1) -> None:
        """Untimed merges: a warm session has run queries before (JIT, loaded classes, codegen caches), and a
        user's fresh process has run before (the first one records the JVM's class archive, ~/.cache/cdc)."""
        for _ in range(merges):
            variant.worker.merge(self.state.root)
            self.loaded.restore()
        if cold:
            cold_merge(variant.code, self.state.root)
            self.loaded.restore()


def load_state(rows: int, changes: int, worker: Worker) -> tuple[StateDir, Checkpointed, list[str], Path, Path, float]:
    from cdc.changelog import list_segments

    state = StateDir(Path(tempfile.mkdtemp(prefix="cdc-bench-merge-")))
    workload(state, rows, changes)
    segments = list_segments(state.changelog)
    n_snapshot = len([s for s in segments if "-s0" in s.name])
    load = worker.merge(state.root, max_segments=n_snapshot)
    directory = state.root / "lake" / "bench.t"  # lake.table_dir; not imported: --code may be another checkout
    base = directory / json.loads((directory / "_current.json").read_text())["current"]
    change_files = [str(p) for p in list_segments(state.changelog, load["summary"]["segments"][-1])]
    return state, Checkpointed(state.root), change_files, base, directory, float(load["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm-up", type=int, default=1, help="untimed warm merges before the timed ones")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout measured (default: this one)")
    parser.add_argument("--baseline", type=Path, help="an older checkout, run interleaved with this one")
    parser.add_argument("--no-cold", action="store_true", help="warm runs only")
    parser.add_argument("--no-warm", action="store_true", help="cold runs only")
    args = parser.parse_args()
    variants = [Variant("new", args.code.resolve(), Worker(args.code.resolve()))]
    if args.baseline:
        variants.append(Variant("old", args.baseline.resolve(), Worker(args.baseline.resolve())))
    state, loaded, change_files, base, lake, load_seconds = load_state(args.rows, args.changes, variants[0].worker)
    bench = Bench(state, loaded, change_files, base, lake)
    print(f"rows {args.rows:,}  changes {args.changes:,}  initial load (1 merge of the snapshot rows): {load_seconds:.1f}s"
          f"  session start: " + ", ".join(f"{v.label} {v.worker.session:.1f}s" for v in variants), flush=True)
    for variant in variants:
        bench.warm_up(variant, not args.no_cold, args.warm_up)
    for repeat in range(1, args.repeat + 1):
        for variant in variants:
            for kind in [k for k, skip in (("warm", args.no_warm), ("cold", args.no_cold)) if not skip]:
                print(f"repeat {repeat}: {bench.run(variant, kind)}", flush=True)
    for variant in variants:
        variant.worker.close()
    shutil.rmtree(state.root)
    bench.duck_out.unlink()
    report(variants, bench.mismatches)


def report(variants: list[Variant], mismatches: int) -> None:
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; rows differing from DuckDB's state: {mismatches}")
    for v in variants:
        for kind, runs in v.runs.items():
            if not runs:
                continue
            line = (f"{v.label} {kind}: median {statistics.median(m.seconds for m in runs):5.1f}s, median ratio "
                    f"{statistics.median(m.ratio for m in runs):5.1f}x (ratios {' '.join(f'{m.ratio:.1f}' for m in runs)})")
            if runs[0].cpu is not None:
                line += (f"; cpu median {statistics.median(m.cpu for m in runs):5.1f}s, median cpu ratio "  # type: ignore[misc]
                         f"{statistics.median(m.cpu_ratio for m in runs):5.1f}x")  # type: ignore[misc]
            print(line)
            names = sorted({n for p in v.phases[kind] for n in p})
            print(f"{v.label} {kind} phases (median s): " + ", ".join(
                f"{n} {statistics.median(p.get(n, 0.0) for p in v.phases[kind]):.1f}" for n in names))
        if v.runs["warm"]:
            print(f"{v.label} session start in a process (once) + median warm merge: "
                  f"{v.worker.session + statistics.median(m.seconds for m in v.runs['warm']):5.1f}s")


if __name__ == "__main__":
    main()
