"""spark-merge of a table without a key: a multiset of full rows, in the lake and in the batches (issue #24).

The reference model is a Counter of rows; the batch is checked by applying it the way snowflake-apply
does (every copy of each row it names removed, its INSERT rows added) to the previous multiset.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdc.changelog import SegmentWriter, encode_line, position_string
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir

COLUMNS = (Column("a", "int(11)", "int", nullable=True), Column("b", "varchar(10)", "varchar"),
           Column("d", "decimal(6,2)", "decimal", precision=6, scale=2))
Row = tuple[Any, ...]


class Lines:
    """Change lines of one keyless table `db.t`, with the multiset they leave."""

    def __init__(self, state: StateDir) -> None:
        self.state, self.pos, self.lines = state, 0, []  # type: ignore[var-annotated]
        self.rows: Counter[Row] = Counter()
        SchemaHistory(state.schema).record(TableSchema("db", "t", COLUMNS, (), self._next()))

    def _next(self) -> str:
        self.pos += 1
        return position_string("bin.000001", 100 * self.pos, 0)

    def emit(self, op: str, before: Row | None, after: Row | None) -> None:
        position = self._next()
        self.lines.append({"after": image(after), "before": image(before), "db": "db",
                           "key": image(after if after is not None else before), "op": op, "position": position,
                           "src": {}, "table": "t", "ts": "2026-11-22T07:00:01Z", "v": 1})
        if before is not None:
            assert self.rows[before] > 0
            self.rows[before] -= 1
        if after is not None:
            self.rows[after] += 1
        self.rows = +self.rows

    def truncate(self) -> None:
        position = self._next()
        self.lines.append({"db": "db", "ddl": "TRUNCATE TABLE t", "kind": "truncate", "op": "ddl", "position": position,
                           "src": {}, "table": "t", "ts": "2026-11-22T07:00:02Z", "v": 1})
        self.rows = Counter()

    def write(self, lines: list[dict[str, Any]]) -> None:
        writer = SegmentWriter(self.state.changelog, owner="test")
        for line in lines:
            writer.write(line["position"], encode_line(line))
        writer.seal()


def image(row: Row | None) -> dict[str, Any] | None:
    return None if row is None else {"a": row[0], "b": row[1], "d": row[2]}


def _row(record: dict[str, Any]) -> Row:
    d = record["d"]
    return (record["a"], record["b"], None if d is None else f"{d:.2f}")


def _lake(state: StateDir) -> Counter[Row]:
    table = read_lake_table(state.root / "lake", "db", "t")
    assert table is not None
    return Counter(_row(r) for r in table.rows)


def _applied(state: StateDir, batch: str, before: Counter[Row]) -> Counter[Row]:
    """The batch applied as snowflake-apply does: delete every copy of each named row, insert the INSERT rows."""
    document = json.loads((state.batches / batch / "manifest.json").read_text())
    entry = document["tables"].get("db.t")
    if entry is None:
        return before
    rows = [r for f in entry["files"] for r in pq.read_table(state.batches / batch / f).to_pylist()]
    assert len(rows) == entry["rows"] == entry["inserts"] + entry["deletes"]
    after = Counter({r: n for r, n in before.items() if r not in {_row(x) for x in rows}})
    after.update(_row(r) for r in rows if r["METADATA$ACTION"] == "INSERT")
    return after


def test_duplicates_deletes_and_updates_of_one_copy_across_runs(tmp_path: Path, spark: Any) -> None:
    state = StateDir(tmp_path / "state")
    state.ensure()
    w = Lines(state)
    dup, other, nulls = (1, "x", "1.50"), (2, None, None), (None, None, None)
    for row in (dup, dup, dup, other, nulls, nulls):
        w.emit("r", None, row)
    w.emit("d", dup, None)  # one copy of three
    w.emit("u", nulls, (None, "y", None))  # one NULL row of two
    w.emit("u", other, other)  # an update that changes nothing nets out
    w.emit("c", None, dup)
    runs = [list(w.lines)]
    before = Counter(w.rows)
    w.emit("u", dup, (1, "x", "2.00"))  # one copy updated, in the next run
    w.emit("u", dup, (1, "x", "2.00"))
    w.emit("d", nulls, None)  # the last NULL row
    w.emit("c", None, (None, "y", None))
    runs.append(w.lines[len(runs[0]):])
    expected = [before, Counter(w.rows)]
    w.emit("u", dup, (1, "x", "2.00"))  # the last copy: every copy now updated
    w.truncate()
    w.emit("c", None, other)
    w.emit("c", None, other)
    runs.append(w.lines[len(runs[0]) + len(runs[1]):])
    expected.append(Counter(w.rows))
    snowflake: Counter[Row] = Counter()
    for number, (lines, rows) in enumerate(zip(runs, expected), start=1):
        w.write(lines[-2:] + lines if number > 1 else lines)  # a replay of lines already merged is dropped
        summary = merge(state, spark=spark)
        assert summary.batch_id == f"b{number:012d}"
        assert _lake(state) == rows, f"lake after run {number}"
        snowflake = _applied(state, summary.batch_id, snowflake)
        assert snowflake == rows, f"batch {number} applied"


@pytest.mark.parametrize("seed", [3, 8])
def test_random_multiset_in_one_run_equals_many(tmp_path: Path, spark: Any, seed: int) -> None:
    rng = random.Random(seed)
    values = [(1, "a", "0.00"), (1, "a", None), (None, "a", "0.00"), (2, "", "-1.25"), (None, None, None)]
    one, many = StateDir(tmp_path / "one"), StateDir(tmp_path / "many")
    one.ensure()
    many.ensure()
    w = Lines(one)
    Lines(many)
    for _ in range(120):
        held = list(w.rows.elements())
        choice = rng.random()
        if not held or choice < 0.45:
            w.emit("c", None, rng.choice(values))
        elif choice < 0.7:
            w.emit("d", rng.choice(held), None)
        else:
            w.emit("u", rng.choice(held), rng.choice(values))
    w.write(w.lines)
    merge(one, spark=spark)
    assert _lake(one) == w.rows
    w.state = many
    snowflake: Counter[Row] = Counter()
    for start in range(0, len(w.lines), 40):
        w.write(w.lines[start:start + 40])
        snowflake = _applied(many, merge(many, spark=spark).batch_id or "", snowflake)
    assert _lake(many) == w.rows == snowflake


def test_rerun_after_a_crash_before_the_checkpoint_counts_each_change_once(tmp_path: Path, spark: Any) -> None:
    """Killed after the lake switch, before the manifest and merge.json: the rerun redoes the run onto the same
    base, so no copy is added or removed twice."""
    state = StateDir(tmp_path / "state")
    state.ensure()
    w = Lines(state)
    dup = (7, "x", "0.10")
    for _ in range(3):
        w.emit("c", None, dup)
    w.write(w.lines)
    merge(state, spark=spark)
    first = Counter(w.rows)
    done = len(w.lines)
    w.emit("d", dup, None)
    w.emit("u", dup, (7, "y", "0.10"))
    w.emit("c", None, dup)
    w.write(w.lines[done:])
    checkpoint = state.checkpoint_path("merge").read_bytes()
    merge(state, spark=spark)
    state.checkpoint_path("merge").write_bytes(checkpoint)  # as if killed before the checkpoint
    (state.batches / "b000000000002" / "manifest.json").unlink()  # ... and before the manifest
    summary = merge(state, spark=spark)
    assert summary.batch_id == "b000000000002"
    assert _lake(state) == w.rows == Counter({dup: 2, (7, "y", "0.10"): 1})
    assert _applied(state, "b000000000002", _applied(state, "b000000000001", Counter())) == w.rows
    assert first == Counter({dup: 3})


def test_added_column_and_lines_read_as_text(tmp_path: Path, spark: Any) -> None:
    """A column added mid-run (older copies hold NULL in it, as MySQL's rows do for a column without DEFAULT), and
    two tables whose columns differ only in case (`a`, `A`): the lines are then read as text, not as structs."""
    state = StateDir(tmp_path / "state")
    state.ensure()
    w = Lines(state)
    history = SchemaHistory(state.schema)
    history.record(TableSchema("db", "upper", (Column("A", "int(11)", "int"),), (), position_string("bin.000001", 1, 0)))
    for _ in range(2):
        w.emit("c", None, (1, "x", None))
    w.emit("c", None, (2, None, None))
    added = w._next()
    history.record(TableSchema("db", "t", (*COLUMNS, Column("e", "int(11)", "int")), (), added))
    rows = [{"a": 1, "b": "x", "d": None, "e": None}, {"a": 1, "b": "x", "d": None, "e": 5}]
    lines = [  # delete one old copy (e NULL), update the other to e = 5, insert a row with e, in the new shape
        ("d", rows[0], None), ("u", rows[0], rows[1]), ("c", None, {"a": 3, "b": None, "d": "1.00", "e": 6})]
    for op, before, after in lines:
        position = w._next()
        w.lines.append({"after": after, "before": before, "db": "db", "key": after or before, "op": op,
                        "position": position, "src": {}, "table": "t", "ts": "2026-11-22T07:00:03Z", "v": 1})
    position = w._next()
    w.lines.append({"after": {"A": 9}, "before": None, "db": "db", "key": {"A": 9}, "op": "c", "position": position,
                    "src": {}, "table": "upper", "ts": "2026-11-22T07:00:03Z", "v": 1})
    w.write(w.lines)
    merge(state, spark=spark)
    table = read_lake_table(state.root / "lake", "db", "t")
    assert table is not None
    got = Counter((r["a"], r["b"], None if r["d"] is None else f"{r['d']:.2f}", r["e"]) for r in table.rows)
    assert got == Counter({(1, "x", None, 5): 1, (2, None, None, None): 1, (3, None, "1.00", 6): 1})
    upper = read_lake_table(state.root / "lake", "db", "upper")
    assert upper is not None and [r["A"] for r in upper.rows] == [9]


def test_shipped_to_s3_then_merged_from_there(aws_env: dict[str, str], moto_server: Any, tmp_path: Path,
                                              spark: Any) -> None:
    """tail -> ship --to s3 -> spark-merge --source s3://: the objects carry the same lines, the same multiset."""
    import shutil

    from cdc import sinks
    from cdc.config import AWSSettings

    aws = AWSSettings(region=moto_server.region, endpoint_url=moto_server.endpoint_url)
    moto_server.client("s3").create_bucket(Bucket="keyless-src")
    shipper = StateDir(tmp_path / "shipper")
    shipper.ensure()
    w = Lines(shipper)
    merger = StateDir(tmp_path / "merger")
    shutil.copytree(shipper.schema, merger.schema)
    snowflake: Counter[Row] = Counter()
    dup = (4, "q", "4.00")
    for step in range(2):
        done = len(w.lines)
        for _ in range(3 - step):
            w.emit("c", None, dup)
        w.emit("d", dup, None)
        w.emit("u", dup, (4, None, "4.00"))
        w.write(w.lines[done:])
        assert sinks.ship(shipper, sinks.open_sink(aws, sinks.ShipTarget(to="s3://keyless-src/p"))).remaining == 0
        summary = merge(merger, source="s3://keyless-src/p", aws=aws, spark=spark)
        assert _lake(merger) == w.rows
        snowflake = _applied(merger, summary.batch_id or "", snowflake)
        assert snowflake == w.rows
    assert w.rows == Counter({dup: 1, (4, None, "4.00"): 2})


def test_a_column_added_with_a_default_fills_older_copies_in_the_lake_and_in_the_run(tmp_path: Path,
                                                                                     spark: Any) -> None:
    """ADD COLUMN e INT NOT NULL DEFAULT 7: every older copy holds 7 (the lake's and those the run wrote before the
    ALTER), so a later delete of one, whose before image holds e = 7, finds it (issue #30 on a keyless table)."""
    state = StateDir(tmp_path / "state")
    state.ensure()
    w = Lines(state)
    for _ in range(2):
        w.emit("c", None, (1, "x", None))
    w.write(w.lines)
    merge(state, spark=spark)
    w.lines = []
    w.emit("c", None, (2, None, None))  # the same run, before the ALTER
    added = w._next()
    SchemaHistory(state.schema).record(TableSchema("db", "t", (*COLUMNS, Column("e", "int(11)", "int")), (), added,
                                                   fills={"e": 7}))
    lines = [("d", {"a": 1, "b": "x", "d": None, "e": 7}, None), ("c", None, {"a": 3, "b": None, "d": "1.00", "e": 6})]
    for op, before, after in lines:
        w.lines.append({"after": after, "before": before, "db": "db", "key": after or before, "op": op,
                        "position": w._next(), "src": {}, "table": "t", "ts": "2026-11-22T07:00:03Z", "v": 1})
    w.write(w.lines)
    merge(state, spark=spark)
    table = read_lake_table(state.root / "lake", "db", "t")
    assert table is not None
    got = Counter((r["a"], r["b"], None if r["d"] is None else f"{r['d']:.2f}", r["e"]) for r in table.rows)
    assert got == Counter({(1, "x", None, 7): 1, (2, None, None, 7): 1, (3, None, "1.00", 6): 1})
