"""spark-merge against an independent reference model: lake state and batches after every run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdc.changelog import list_segments, position_string
from cdc.spark import merge, read_lake_table
from cdc.spark.lake import table_dir
from cdc.state import StateDir
from tests.checkpoints.test_golden import has_golden_shape
from tests.spark.workload import BINLOG, EVERY, EXTRA, T1, T2, Workload, model


def build(root: Path, seed: int) -> Workload:
    """Snapshot, ~120 transactions, ADD COLUMN, DROP COLUMN, TRUNCATE, more transactions."""
    w = Workload(root, seed)
    w.snapshot(30)
    for _ in range(50):
        w.transaction()
    w.ddl(T1, "alter", EVERY + (EXTRA,))
    for _ in range(30):
        w.transaction()
    w.ddl(T2, "truncate")
    w.ddl(T1, "alter", tuple(c for c in EVERY + (EXTRA,) if c.name != "tx"))
    for _ in range(40):
        w.transaction()
    return w


def lake_state(target: Path, table: tuple[str, str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    found = read_lake_table(target, *table)
    assert found is not None
    return found.by_key()


def batch_rows(batch_dir: Path, manifest: dict[str, Any], table: tuple[str, str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    entry = manifest["tables"].get(f"{table[0]}.{table[1]}")
    if entry is None:
        return {}
    pk = ["id"] if table == T1 else ["k1", "k2"]
    rows = [r for f in entry["files"] for r in pq.read_table(batch_dir / f).to_pylist()]
    by_key = {tuple(r[k] for k in pk): r for r in rows}
    assert len(by_key) == len(rows) == entry["rows"], "exactly one row per key"
    return by_key


def check_batch(before: dict[Any, Any], after: dict[Any, Any], got: dict[Any, Any], run_positions: set[str]) -> None:
    expected = {k: ("INSERT", k in before) for k, row in after.items() if row["_cdc_position"] in run_positions}
    expected |= {k: ("DELETE", False) for k in before.keys() - after.keys()}
    assert {k: (r["METADATA$ACTION"], r["METADATA$ISUPDATE"]) for k, r in got.items()} == expected
    for key, row in got.items():
        if row["METADATA$ACTION"] == "INSERT":
            assert {n: row[n] for n in after[key] if not n.startswith("_")} == {
                n: v for n, v in after[key].items() if not n.startswith("_")}
            assert row["_CDC_POSITION"] == after[key]["_cdc_position"]


@pytest.mark.parametrize(("broadcast_keys", "fewer_lines"), [(1_000_000, False), (0, False), (1_000_000, True)],
                         ids=["broadcast", "shuffle", "superseded-left-out"])
def test_randomized_workload_matches_model_after_every_run(tmp_path: Path, spark: Any, broadcast_keys: int,
                                                           fewer_lines: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways of copying the untouched lake rows: anti join with the touched keys broadcast, or shuffled; and
    the compaction reading only the lines no later change of their key supersedes (cdc.spark.latest), which a
    merge does from 16 MiB of input on (here from any size)."""
    monkeypatch.setattr("cdc.spark.table_merge.BROADCAST_KEYS", broadcast_keys)
    if fewer_lines:
        monkeypatch.setattr("cdc.spark.latest.FEWER_LINES_BYTES", 0)
        monkeypatch.setattr("cdc.spark.latest.SKIP_AT_LEAST", 0.0)
    superseded = 0
    state = StateDir(tmp_path / "state")
    w = build(state.root, seed=11)
    cuts = [len(w.lines) // 4, len(w.lines) // 2, len(w.lines)]
    done = 0
    previous: dict[Any, Any] = {T1: {}, T2: {}}
    for run, cut in enumerate(cuts, start=1):
        # a tail replay after a crash re-reads the last transaction: duplicated positions are dropped
        replay = w.lines[max(0, done - 3):done] if done else []
        w.write_segments(replay + w.lines[done:cut], per_segment=40)
        summary = merge(state, spark=spark)
        assert summary.batch_id == f"b{run:012d}"
        superseded += summary.superseded
        expected = model(w.lines[:cut], w.history)
        manifest = _read(state.root / "batches" / summary.batch_id)
        assert manifest["segments"] == [summary.segments[0], summary.segments[-1]]
        run_positions = {line["position"] for line in w.lines[done:cut]}
        for table in (T1, T2):
            got = lake_state(state.root / "lake", table)
            assert got == expected[table], f"run {run} {table}"
            check_batch(previous[table], expected[table], batch_rows(Path(summary.batch_dir), manifest, table), run_positions)
        previous = expected
        done = cut
    lake = read_lake_table(state.root / "lake", *T1)
    assert "extra col.x" in lake.columns and "tx" not in lake.columns
    assert (superseded > 0) == fewer_lines
    # nothing new: no batch, nothing changes
    assert merge(state, spark=spark).batch_id is None


class KeysStay(Workload):
    """Updates that keep their row's key: once superseded lines are left out, each key of T1 has one event."""

    def _random_change(self, table: tuple[str, str], position: str) -> None:
        live, roll = self.live[table], self.rng.random()
        if not live or roll < 0.3:
            self._emit(table, "c", None, self._new_row(table), position)
            return
        before = live[self.rng.choice(sorted(live, key=repr))]
        key = {k: before[k] for k in self.schemas[table].primary_key}
        after = {**self._new_row(table), **key}
        self._emit(table, *(("u", before, after) if roll < 0.75 else ("d", before, None)), position)


def test_lines_holding_one_event_per_key_merge_without_searching_for_each_keys_last(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the pass vouches that the lines left hold one event per key (cdc.spark.latest.Fewer.unique), the
    compaction does without its window, and once the table has a lake version, without joining with the lake's keys
    (the pass marks the lines whose key the lake holds: cdc.spark.lake_keys): the lake and batch (its
    METADATA$ISUPDATE) still equal the model's, run after run, and a replayed line (two lines at one position) sends
    the table back to the window."""
    from cdc.spark import compact

    monkeypatch.setattr("cdc.spark.latest.FEWER_LINES_BYTES", 0)
    monkeypatch.setattr("cdc.spark.latest.SKIP_AT_LEAST", 0.0)
    monkeypatch.setattr("cdc.spark.small_tables.SMALL_LAKE_ROWS", -1)  # table by table (table_merge), as a big one
    ways: list[tuple[str, int, bool, bool]] = []
    real = compact.last_changes

    def last_changes(*args: Any, one_each: bool = False, lake_known: bool = False) -> Any:
        ways.append((args[4].table, run, one_each, lake_known))
        return real(*args, one_each=one_each, lake_known=lake_known)

    monkeypatch.setattr(compact, "last_changes", last_changes)
    state = StateDir(tmp_path / "state")
    w = KeysStay(state.root, seed=24)
    w.snapshot(40)
    snapshot = len(w.lines)
    for _ in range(60):
        w.transaction()
    middle = len(w.lines)
    for _ in range(60):
        w.transaction()
    previous: dict[Any, Any] = {T1: {}, T2: {}}
    done = 0
    replayed = w.lines[-3:]  # a tail replay of the run's last transaction inside the run: two lines at a position
    assert T1[1] in {line["table"] for line in replayed}
    for run, (cut, replay) in enumerate([(snapshot, []), (middle, []), (len(w.lines), replayed)], start=1):
        w.write_segments(w.lines[done:cut] + replay, per_segment=25)
        summary = merge(state, spark=spark)
        expected = model(w.lines[:cut], w.history)
        manifest = _read(state.root / "batches" / summary.batch_id)
        for table in (T1, T2):
            assert lake_state(state.root / "lake", table) == expected[table], f"run {run} {table}"
            check_batch(previous[table], expected[table], batch_rows(Path(summary.batch_dir), manifest, table),
                        {line["position"] for line in w.lines[done:cut]})
        previous, done = expected, cut
    assert (T1[1], 2, True, True) in ways and (T1[1], 3, False, False) in ways
    assert not any(one for table, _, one, _ in ways if table == T2[1])  # T2's keys hold escaped text: never vouched for


def test_rerun_of_a_crashed_run_gives_identical_result(tmp_path: Path, spark: Any) -> None:
    """Crash after the lake switch but before the checkpoint: the rerun reads the same base."""
    results = []
    for crash in (False, True):
        state = StateDir(tmp_path / f"s{crash}")
        w = build(state.root, seed=5)
        w.write_segments(w.lines[: len(w.lines) // 2], per_segment=50)
        merge(state, spark=spark)
        w.write_segments(w.lines[len(w.lines) // 2:], per_segment=50)
        if crash:
            checkpoint = state.checkpoint_path("merge").read_bytes()
            merge(state, spark=spark)
            state.checkpoint_path("merge").write_bytes(checkpoint)  # as if killed before the checkpoint
            manifest = state.root / "batches" / "b000000000002" / "manifest.json"
            manifest.unlink()  # ... and before the manifest: everything is redone onto the same base
        summary = merge(state, spark=spark)
        assert summary.batch_id == "b000000000002"
        results.append(({t: lake_state(state.root / "lake", t) for t in (T1, T2)},
                        {t: batch_rows(Path(summary.batch_dir), _manifest(summary), t) for t in (T1, T2)}))
    assert results[0] == results[1]
    expected = model(w.lines, w.history)
    assert results[0][0] == {T1: expected[T1], T2: expected[T2]}


def _manifest(summary: Any) -> dict[str, Any]:
    return _read(Path(summary.batch_dir))


def test_pointer_switch_keeps_previous_version(tmp_path: Path, spark: Any) -> None:
    state = StateDir(tmp_path / "state")
    w = build(state.root, seed=3)
    w.write_segments(w.lines[:100], per_segment=50)
    merge(state, spark=spark, max_segments=1)
    merge(state, spark=spark)
    directory = table_dir(state.root / "lake", *T1)
    assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == ["v000000000001", "v000000000002"]
    assert len(list_segments(state.changelog)) >= 2
    assert state.read_checkpoint("merge", 1)["last_batch"] == "b000000000002"
    assert has_golden_shape(state.checkpoint_path("merge"), "merge.v1.json")


@pytest.mark.slow  # ~30 s: many small runs; the randomized test already merges in several runs
def test_merging_in_one_run_equals_merging_in_many(tmp_path: Path, spark: Any) -> None:
    one, many = StateDir(tmp_path / "one"), StateDir(tmp_path / "many")
    for state, per in ((one, 10_000), (many, 40)):
        w = build(state.root, seed=2)
        w.write_segments(w.lines, per_segment=per)
        while merge(state, spark=spark, max_segments=4).batch_id:
            pass
    for table in (T1, T2):
        assert lake_state(one.root / "lake", table) == lake_state(many.root / "lake", table)


def _read(batch_dir: Path) -> dict[str, Any]:
    return json.loads((batch_dir / "manifest.json").read_text())


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_merging_the_same_input_twice_changes_nothing(tmp_path: Path, spark: Any) -> None:
    """Every line delivered twice (at-least-once upstream) merges like once; a second merge of it changes no byte."""
    once, twice = StateDir(tmp_path / "once"), StateDir(tmp_path / "twice")
    w = build(once.root, seed=6)
    build(twice.root, seed=6)
    w.write_segments(w.lines, per_segment=10_000)
    doubled = Workload(twice.root, seed=6)
    doubled.write_segments([line for line in w.lines for _ in (1, 2)], per_segment=20_000)
    for state in (once, twice):
        assert merge(state, spark=spark).batch_id == "b000000000001"
    expected = model(w.lines, w.history)
    for table in (T1, T2):
        assert lake_state(once.root / "lake", table) == lake_state(twice.root / "lake", table) == expected[table]
    first = "batches/b000000000001"
    for table in (T1, T2):
        assert batch_rows(twice.root / first, _read(twice.root / first), table) == batch_rows(
            once.root / first, _read(once.root / first), table)

    lake_before, batches_before = _files(twice.root / "lake"), _files(twice.root / "batches")
    assert merge(twice, spark=spark).batch_id is None  # the same input again: nothing new
    # merge.json lost: the same input is merged again as run 1, onto the same base, to the same bytes
    twice.checkpoint_path("merge").unlink()
    again = merge(twice, spark=spark)
    assert again.batch_id == "b000000000001" and again.resumed
    assert _files(twice.root / "lake") == lake_before and _files(twice.root / "batches") == batches_before


def test_key_names_differing_only_in_case_across_tables(tmp_path: Path, spark: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables keyed `ID` and `id`: the lines are read with raw-text keys (one struct cannot hold both names). The
    compaction then reads every line: no pass for superseded ones (cdc.spark.latest), whose files it would not read."""
    from cdc.changelog import SegmentWriter, encode_line, position_string
    from cdc.schema import Column, SchemaHistory, TableSchema
    from cdc.spark.types import keyed_line_schema

    assert keyed_line_schema(["ID", "id"]) is None and keyed_line_schema(["id", "k1"]) is not None
    assert keyed_line_schema(["id"], ["V", "v"]) is None and keyed_line_schema(["id"], ["v", "w"]) is not None
    state = StateDir(tmp_path / "state")
    state.ensure()
    history, writer = SchemaHistory(state.schema), SegmentWriter(state.changelog, owner="test")
    for table, pk in (("upper", "ID"), ("lower", "id")):
        history.record(TableSchema("db", table, (Column(pk, "int(11)", "int", nullable=False), Column("v", "text", "text")),
                                   (pk,), position_string("bin.000001", 4, 0)))
    changes = [("upper", "ID", "c", 1, None, "a"), ("lower", "id", "c", 1, None, "b"), ("upper", "ID", "u", 2, 1, "c"),
               ("lower", "id", "u", 1, 1, "d"), ("lower", "id", "c", 7, None, "e")]
    for pos, (table, pk, op, key, old, value) in enumerate(changes, start=1):
        position = position_string("bin.000001", 100 * pos, 0)
        writer.write(position, encode_line({
            "after": {pk: key, "v": value}, "before": None if old is None else {pk: old, "v": "?"}, "db": "db",
            "key": {pk: key}, "op": op, "position": position, "src": {}, "table": table, "ts": "2026-11-22T07:00:01Z",
            "v": 1}))
    writer.seal()
    monkeypatch.setattr("cdc.spark.latest.FEWER_LINES_BYTES", 0)
    monkeypatch.setattr("cdc.spark.latest.SKIP_AT_LEAST", 0.0)
    summary = merge(state, spark=spark)
    assert summary.batch_id == "b000000000001" and summary.superseded == 0 and "latest" not in summary.phases
    values = {t: {k: r["v"] for k, r in lake_state(state.root / "lake", ("db", t)).items()} for t in ("upper", "lower")}
    assert values == {"upper": {(2,): "c"}, "lower": {(1,): "d", (7,): "e"}}


def test_progress_reports_the_phases_in_order(tmp_path: Path, spark: Any) -> None:
    """The callback a progress display or a log is built on: phases in order, then each table's steps and result;
    the tables merged at once. (One merge for both: each was a test with the same workload and merge of its own.)"""
    from cdc.spark import MergeProgress

    state = StateDir(tmp_path / "state")
    w = build(state.root, seed=3)
    w.write_segments(w.lines[:100], per_segment=50)
    seen: list[MergeProgress] = []
    summary = merge(state, spark=spark, on_progress=seen.append)
    phases = [p.phase for p in seen]
    # The caller's session: no "starting"; its own session starts Spark first (tests/spark/test_cli.py).
    assert [phase for i, phase in enumerate(phases) if phase not in phases[:i]] == \
        ["listing", "scanning", "merging", "writing", "done"]
    assert phases == sorted(phases, key=["listing", "scanning", "merging", "writing", "done"].index)
    merging = [p for p in seen if p.phase == "merging"]
    tables = [t.table for t in summary.tables]
    assert len(tables) == 2 and all(p.tables_total == 2 and p.batch_id == summary.batch_id for p in merging)
    for done, table in enumerate(tables):
        steps = [p.step for p in merging if p.table == table]
        assert steps[0] == "compacting" and steps[-1] is None and set(steps) <= {"compacting", "lake", "batch", None}
        finished = [p for p in merging if p.table == table and p.result is not None]
        assert len(finished) == 1 and finished[0].tables_done == done + 1 and finished[0].result == summary.tables[done]
    assert seen[-1].changes_done == seen[-1].changes_total == sum(t.changes for t in summary.tables) > 0
    assert [p.seconds for p in seen] == sorted(p.seconds for p in seen)
    # A run's tables merge concurrently (a follow cycle's time is per-job latency, not work): every table has
    # started before the first one finishes; results still come in table order.
    first_done = next(i for i, p in enumerate(merging) if p.result is not None)
    assert {p.table for p in merging[:first_done] if p.step == "compacting"} == set(tables)
    assert [p.result for p in merging if p.result is not None] == summary.tables
    again: list[MergeProgress] = []
    assert merge(state, spark=spark, on_progress=again.append).batch_id is None
    assert [p.phase for p in again] == ["listing", "done"]  # nothing new: Spark not even asked


def test_superseded_lines_are_looked_for_only_where_a_key_can_change(tmp_path: Path, spark: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot's first merge (no update, no delete) skips the C pass (cdc.spark.latest) that could find nothing to
    leave out; a run of updates to few keys takes it and leaves most lines out, with the model's result."""
    monkeypatch.setattr("cdc.spark.latest.FEWER_LINES_BYTES", 0)  # the pass's size threshold: this input is small
    state = StateDir(tmp_path / "state")
    w = Workload(state.root, seed=3)
    w.snapshot(60)
    w.write_segments(w.lines, per_segment=40)
    first = merge(state, spark=spark)
    assert "latest" not in first.phases and first.superseded == 0
    done = len(w.lines)
    for _ in range(40):
        w.xid += 1
        w.pos += 300
        key = sorted(w.live[T1])[0]
        w._emit(T1, "u", w.live[T1][key], {**w._new_row(T1), "id": key[0]}, position_string(BINLOG, w.pos, 0))
    w.write_segments(w.lines[done:], per_segment=40)
    second = merge(state, spark=spark)
    assert "latest" in second.phases and second.superseded == 39
    assert lake_state(state.root / "lake", T1) == model(w.lines, w.history)[T1]
