"""The untouched lake rows copied with pyarrow beside Spark's write of the kept ones (cdc.spark.lake_copy)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc.changelog import SegmentWriter, position_string
from cdc.errors import DataError
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.spark import lake_copy, merge, read_lake_table
from cdc.spark.lake import read_pointer, table_dir
from cdc.state import StateDir
from tests.spark.test_merge import batch_rows, check_batch, lake_state
from tests.spark.workload import EVERY, EXTRA, T1, T2, Workload, model

ROOT = Path(__file__).resolve().parents[2]
BINLOG = "mariadb-bin.000001"


def _copied(root: Path, table: tuple[str, str]) -> int | None:
    """Rows the current lake version holds in copied files; None if it has none (Spark wrote it all)."""
    directory = table_dir(root / "lake", *table)
    pointer = read_pointer(directory)
    assert pointer is not None
    files = list((directory / pointer["current"]).glob(f"{lake_copy.PREFIX}*.parquet"))
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files) if files else None


def test_a_lake_version_with_its_untouched_rows_copied_equals_the_model_run_after_run(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every column type, a one-column integer key (T1) and a composite key of hostile text and a 20-digit integer
    (T2), updates, deletes, key changes and a replayed transaction: after each run the lake and the batch are the
    model's. The copy is made where the run merges onto a version of its own schema, and not across an ALTER."""
    monkeypatch.setattr("cdc.spark.small_tables.SMALL_LAKE_ROWS", -1)  # table by table (table_merge), as a big one
    state = StateDir(tmp_path / "state")
    w = Workload(state.root, seed=31)
    w.snapshot(150)
    cuts = [len(w.lines)]
    for _ in range(25):
        w.transaction()
    cuts.append(len(w.lines))
    for _ in range(25):
        w.transaction()
    cuts.append(len(w.lines))
    w.ddl(T1, "alter", EVERY + (EXTRA,))
    for _ in range(20):
        w.transaction()
    cuts.append(len(w.lines))
    previous: dict[Any, Any] = {T1: {}, T2: {}}
    done, ways = 0, []
    for run, cut in enumerate(cuts, start=1):
        replay = w.lines[max(0, done - 3):done] if done else []
        w.write_segments(replay + w.lines[done:cut], per_segment=30)
        summary = merge(state, spark=spark)
        expected = model(w.lines[:cut], w.history)
        manifest = json.loads((Path(summary.batch_dir) / "manifest.json").read_text())
        for table in (T1, T2):
            assert lake_state(state.root / "lake", table) == expected[table], f"run {run} {table}"
            check_batch(previous[table], expected[table], batch_rows(Path(summary.batch_dir), manifest, table),
                        {line["position"] for line in w.lines[done:cut]})
        ways.append((_copied(state.root, T1), _copied(state.root, T2)))
        previous, done = expected, cut
    # run 1 has no lake to copy from; run 4 merges T1 across its ALTER (Spark evolves the old rows)
    assert [tuple(n is not None for n in way) for way in ways] == [(False, False), (True, True), (True, True),
                                                                   (False, True)]
    assert all(n for way in ways[1:3] for n in way), ways  # rows were copied, not only files of none


def test_only_keys_that_compare_by_their_bytes_take_the_copy() -> None:
    fits = pa.schema([("i", pa.int64()), ("u", pa.decimal128(20, 0)), ("s", pa.string()), ("b", pa.binary()),
                      ("d", pa.date32()), ("t", pa.timestamp("us", tz="UTC")), ("f", pa.float64()),
                      ("r", pa.float32())])
    assert lake_copy.key_types_fit(fits, ["i", "u", "s", "b", "d", "t"])
    assert not lake_copy.key_types_fit(fits, ["i", "f"])  # Spark: -0.0 = 0.0 and NaN = NaN; Arrow: neither
    assert not lake_copy.key_types_fit(fits, ["r"])


def test_the_copy_leaves_out_exactly_the_touched_keys_and_says_when_the_count_is_off(tmp_path: Path) -> None:
    """Composite keys of hostile text beside a list column (Arrow's join takes none), across two files."""
    base, version = tmp_path / "v1", tmp_path / "v2"
    base.mkdir()
    version.mkdir()
    texts = ["a", "O'Brien", "nul\x00byte", "emoji 🎉", "", "A"]
    for number in range(2):
        rows = pa.table({"k1": texts, "k2": pa.array([number] * 6, pa.int64()),
                         "st": pa.array([["x"], [], None, ["y", "z"], ["x"], []], pa.list_(pa.string()))})
        pq.write_table(rows, base / f"part-{number:05d}.parquet")
    touched = pa.table({"k1": ["nul\x00byte", "a", "A", "zzz"], "k2": pa.array([0, 1, 1, 0], pa.int64())})
    schema = pq.read_schema(base / "part-00000.parquet")
    assert lake_copy.copy_untouched(base, version, touched, ["k1", "k2"], schema) == 9
    left = pa.concat_tables([pq.read_table(p) for p in sorted(version.glob("*.parquet"))])
    gone = {("nul\x00byte", 0), ("a", 1), ("A", 1)}
    assert sorted(zip(left.column("k1").to_pylist(), left.column("k2").to_pylist(), strict=True)) == sorted(
        (t, n) for n in range(2) for t in texts if (t, n) not in gone)
    assert left.column("st").to_pylist().count(["y", "z"]) == 2  # each row whole, its list column too
    with pytest.raises(DataError, match="9 untouched lake rows copied where the merge counted 10"):
        lake_copy.check_count(9, 10, version)


def _lines(writer: Any, start: int, changes: list[tuple[str, int, str | None]]) -> None:
    """Change lines of bench.t (id, name) from binlog position `start` on, one transaction per line."""
    for offset, (op, key, name) in enumerate(changes):
        position = position_string(BINLOG, start + offset, 0, snapshot=op == "r")
        image = None if name is None else {"id": key, "name": name}
        writer.write(position, orjson.dumps({
            "after": image, "before": {"id": key, "name": "?"} if op in ("u", "d") else None, "db": "bench",
            "key": {"id": key}, "op": op, "position": position,
            "src": {"file": BINLOG, "gtid": None, "pos": start + offset, "row": 0, "server_id": 1, "xid": start + offset},
            "table": "t", "ts": "2026-11-22T07:00:01Z", "v": 1}) + b"\n")
    writer.seal()


@pytest.mark.spark  # two `cdc spark-merge` processes, each its own JVM, over a lake past SMALL_LAKE_ROWS (~30 s)
def test_kill_9_while_the_lake_is_copied_then_rerun_equals_uninterrupted(tmp_path: Path, spark: Any) -> None:
    """`cdc spark-merge` killed once the first copied file of the new version shows, then rerun: the lake is the
    model's (the half-written version is never switched to, and the rerun writes it whole)."""
    rows = 210_000  # past SMALL_LAKE_ROWS: the table is merged on its own, where the copy is made
    state = StateDir(tmp_path / "state").ensure()
    SchemaHistory(state.schema).record(TableSchema("bench", "t", (
        Column("id", "bigint(20)", "bigint", nullable=False), Column("name", "varchar(64)", "varchar")), ("id",),
        "0000000001:000000000004:b000000000000"))
    _lines(SegmentWriter(state.changelog, owner="test"), 10, [("r", k, f"n{k}") for k in range(rows)])
    merge(state, spark=spark)
    changes = [("u", k, f"u{k}") for k in range(0, rows, 7)] + [("d", k, None) for k in range(3, rows, 11)] \
        + [("c", k, f"c{k}") for k in range(rows, rows + 5_000)]
    _lines(SegmentWriter(state.changelog, owner="test"), 10 + rows, changes)
    expected = {k: f"n{k}" for k in range(rows)}
    for _, key, name in changes:
        if name is None:
            expected.pop(key, None)
        else:
            expected[key] = name
    version = table_dir(state.root / "lake", "bench", "t") / "v000000000002"
    checkpoint = state.checkpoint_path("merge").read_bytes()
    command = [sys.executable, "-m", "cdc", "spark-merge", "--state-dir", str(state.root), "--master", "local[2]",
               "--driver-memory", "1g", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not list(version.glob(f"{lake_copy.PREFIX}*")):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the kill must land mid-merge (the checkpoint as the first merge left it), else this test tests nothing
    assert proc.returncode == -signal.SIGKILL and state.checkpoint_path("merge").read_bytes() == checkpoint
    rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert list(version.glob(f"{lake_copy.PREFIX}*"))  # the rerun copied too
    found = read_lake_table(state.root / "lake", "bench", "t")
    assert found is not None and {r["id"]: r["name"] for r in found.rows} == expected
