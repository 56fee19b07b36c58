"""Benchmark: spark-merge of 1,000,000 changes into a 1,000,000-row table vs a DuckDB single-SQL merge.

    .venv/bin/python benchmarks/bench_merge.py [--rows 1000000] [--changes 1000000]

Workload: the table is loaded by a first merge of snapshot rows; then the changes: 30% of the keys
touched repeatedly (updates), deletes, and new keys. DuckDB computes the same new state in one
statement over the same files. Printed: seconds and Spark/DuckDB ratios, warm (session already up)
and cold (session start included), and where the Spark merge's time goes (scan: read + parse the
JSON lines; compact: last change per key joined with the lake; lake / batch: the Parquet writes).
DuckDB writes only the new table state; Spark also writes the Snowflake batch.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cdc.changelog import SegmentWriter, position_string  # noqa: E402
from cdc.config import SparkSettings  # noqa: E402
from cdc.schema import Column, SchemaHistory, TableSchema  # noqa: E402
from cdc.state import StateDir  # noqa: E402

BINLOG = "mariadb-bin.000001"
COLUMNS = (Column("id", "bigint(20)", "bigint", nullable=False), Column("name", "varchar(64)", "varchar"),
           Column("amount", "decimal(18,4)", "decimal", precision=18, scale=4),
           Column("updated", "datetime(6)", "datetime", fsp=6))


def line(op: str, key: int, pos: int, row: int, rng: random.Random, snapshot: bool = False, before: bool = False) -> bytes:
    image = {"id": key, "name": f"name {key} {rng.randrange(1000)}", "amount": f"{rng.randrange(10**9)}.{rng.randrange(10000):04d}",
             "updated": "2026-11-22 07:00:01.123456"}
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
    for i in range(changes):
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


def duckdb_merge(change_files: list[str], base: Path, out: Path) -> tuple[float, int]:
    """Seconds DuckDB takes for the same merge in one statement, and the rows of its new table state."""
    import duckdb

    t0 = time.monotonic()
    con = duckdb.connect()
    con.execute(DUCKDB_MERGE.format(files=change_files, lake=base, out=out))
    rows = con.execute(f"SELECT count(*) FROM '{out}'").fetchone()[0]
    return time.monotonic() - t0, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    args = parser.parse_args()
    from cdc.changelog import list_segments
    from cdc.spark import merge
    from cdc.spark.lake import read_pointer, table_dir
    from cdc.spark.session import build_session

    state = StateDir(Path(tempfile.mkdtemp(prefix="cdc-bench-merge-")))
    workload(state, args.rows, args.changes)
    segments = list_segments(state.changelog)
    started = time.monotonic()
    spark = build_session(SparkSettings(driver_memory="4g"))
    session_start = time.monotonic() - started
    n_snapshot = len([s for s in segments if "-s0" in s.name])
    load = merge(state, spark=spark, max_segments=n_snapshot)
    directory = table_dir(state.root / "lake", "bench", "t")
    base = directory / read_pointer(directory)["current"]
    change_files = [str(p) for p in list_segments(state.changelog, load.segments[-1])]
    # DuckDB right before and right after the Spark merge, averaged: on a shared machine the load
    # changes within minutes, and a ratio means something only if both sides saw the same load.
    duck_before, _ = duckdb_merge(change_files, base, state.root / "duckdb-1.parquet")
    t0 = time.monotonic()
    summary = merge(state, spark=spark)
    spark_warm = time.monotonic() - t0
    spark.stop()
    duck_after, duck_rows = duckdb_merge(change_files, base, state.root / "duckdb-2.parquet")
    duck = (duck_before + duck_after) / 2
    table = summary.tables[0]
    assert table.lake_rows == duck_rows, (table.lake_rows, duck_rows)
    print(f"rows {args.rows:,}  changes {args.changes:,}  -> lake {table.lake_rows:,} rows, batch {table.batch_rows:,} rows")
    print(f"initial load (1 merge of {args.rows:,} snapshot rows): {load.seconds:.1f}s")
    print(f"session start     {session_start:6.1f}s")
    print(f"spark merge warm  {spark_warm:6.1f}s   ratio to DuckDB {spark_warm / duck:5.1f}x")
    print(f"spark merge cold  {spark_warm + session_start:6.1f}s   ratio to DuckDB {(spark_warm + session_start) / duck:5.1f}x")
    print(f"duckdb single SQL {duck:6.1f}s   (mean of {duck_before:.1f}s before and {duck_after:.1f}s after Spark)")
    print("where the warm Spark merge's time goes: " + ", ".join(
        f"{name} {seconds:.1f}s" for name, seconds in summary.phases.items())
        + f", other (switch, manifest, checkpoint) {spark_warm - sum(summary.phases.values()):.1f}s")


if __name__ == "__main__":
    main()
