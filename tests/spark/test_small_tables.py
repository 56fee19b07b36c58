"""A run's small tables merged with one Spark query (cdc.spark.small_tables): the same lake and batches as table by
table, and a Spark job count that does not grow with the tables a follow cycle touches."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from cdc.changelog import SegmentWriter, position_string
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.spark import merge, read_lake_table
from cdc.spark.lake import table_dir
from cdc.state import StateDir
from tests.spark.workload import EVERY, EXTRA, T1, T2, Workload

BINLOG = "mariadb-bin.000001"
COLUMNS = (Column("id", "bigint(20)", "bigint", nullable=False), Column("name", "varchar(64)", "varchar"),
           Column("amount", "decimal(18,4)", "decimal", precision=18, scale=4),
           Column("updated", "datetime(6)", "datetime", fsp=6))


def _workload(root: Path) -> tuple[Workload, list[int]]:
    """Snapshot, transactions, an ALTER of T1, a TRUNCATE of T2, more transactions; the cuts between runs."""
    w = Workload(root, 21)
    w.snapshot(30)
    cuts = [len(w.lines)]
    for _ in range(40):
        w.transaction()
    cuts.append(len(w.lines))  # both tables onto a base of the same schema: the small path
    w.ddl(T1, "alter", EVERY + (EXTRA,))
    for _ in range(20):
        w.transaction()
    w.ddl(T2, "truncate")
    cuts.append(len(w.lines))  # T1's schema changed, T2 truncated: both table by table
    for _ in range(30):
        w.transaction()
    cuts.append(len(w.lines))  # T1 onto a base of the new schema: small again
    return w, cuts


def _runs(root: Path, *, small: bool, monkeypatch: pytest.MonkeyPatch, spark: Any) -> list[dict[str, Any]]:
    """Per run: each table's lake rows, Arrow schema and files, and its batch rows and schema."""
    with monkeypatch.context() as patch:
        if not small:
            patch.setattr("cdc.spark.small_tables.SMALL_LAKE_ROWS", -1)  # no table qualifies
        state = StateDir(root)
        w, cuts = _workload(root)
        done, out = 0, []
        for cut in cuts:
            w.write_segments(w.lines[done:cut], per_segment=40)
            summary = merge(state, spark=spark)
            manifest = json.loads((Path(summary.batch_dir) / "manifest.json").read_text())
            run: dict[str, Any] = {}
            for table in (T1, T2):
                lake = read_lake_table(root / "lake", *table)
                assert lake is not None
                version = table_dir(root / "lake", *table) / lake.version
                files = sorted(p.name for p in version.glob("*.parquet"))
                entry = manifest["tables"].get(f"{table[0]}.{table[1]}")
                batch = [pq.read_table(Path(summary.batch_dir) / f) for f in entry["files"]] if entry else []
                run[table[1]] = {
                    "lake": sorted(map(repr, lake.rows)), "small": files == ["part-00000.parquet"],
                    "schema": _types(pq.read_schema(version / files[0])),
                    "batch": sorted(repr(r) for b in batch for r in b.to_pylist()),
                    "batch_schema": _types(batch[0].schema) if batch else None,
                    "entry": {k: v for k, v in (entry or {}).items() if k != "files"},
                }
            out.append(run)
            done = cut
    return out


def _types(schema: Any) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in schema]


def test_small_tables_give_the_lake_and_batches_of_the_table_by_table_merge(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    small = _runs(tmp_path / "small", small=True, monkeypatch=monkeypatch, spark=spark)
    spark_only = _runs(tmp_path / "spark", small=False, monkeypatch=monkeypatch, spark=spark)
    assert [[run[t]["small"] for t in (T1[1], T2[1])] for run in small] == \
        [[True, True], [True, True], [False, False], [True, True]]
    assert not any(run[t]["small"] for run in spark_only for t in (T1[1], T2[1]))
    for got, want in zip(small, spark_only, strict=True):
        for table in (T1[1], T2[1]):
            assert {k: v for k, v in got[table].items() if k != "small"} == \
                {k: v for k, v in want[table].items() if k != "small"}, table


def _tables(root: Path, tables: int) -> StateDir:
    """`tables` tables of 20 rows each, in the change log (a snapshot)."""
    state = StateDir(root).ensure()
    history = SchemaHistory(state.schema)
    writer = SegmentWriter(state.changelog, owner="test")
    for t in range(tables):
        history.record(TableSchema("bench", f"t{t}", COLUMNS, ("id",), "0000000001:000000000004:b000000000000"))
        for key in range(1, 21):
            row = t * 100 + key
            writer.write(*_line(f"t{t}", "r", key, 4, row, "snapshot"))
    writer.seal()
    return state


def _line(table: str, op: str, key: int, pos: int, row: int, name: str) -> tuple[str, bytes]:
    position = position_string(BINLOG, pos, row, snapshot=op == "r")
    image = {"id": key, "name": name, "amount": "1.5000", "updated": "2026-11-22 07:00:01.123456"}
    return position, orjson.dumps({
        "after": image, "before": image if op == "u" else None, "db": "bench", "key": {"id": key}, "op": op,
        "position": position, "src": {"file": BINLOG, "gtid": None, "pos": pos, "row": row, "server_id": 1,
                                      "xid": pos}, "table": table, "ts": "2026-11-22T07:00:01Z", "v": 1}) + b"\n"


def test_a_follow_cycle_costs_the_same_spark_jobs_for_2_or_8_touched_tables(tmp_path: Path, spark: Any) -> None:
    loaded = _tables(tmp_path / "loaded", 8)
    merge(loaded, spark=spark)
    jobs = {}
    for touched in (2, 8):
        state = StateDir(tmp_path / f"touched{touched}")
        shutil.copytree(loaded.root, state.root)
        writer = SegmentWriter(state.changelog, owner="test")
        for t in range(touched):
            writer.write(*_line(f"t{t}", "u", 3, 1000 + t, 0, f"changed {t}"))
        writer.seal()
        summary = merge(state, spark=spark)
        assert [(r.table, r.inserts, r.lake_rows) for r in summary.tables] == \
            [(f"bench.t{t}", 1, 20) for t in range(touched)]
        lake = read_lake_table(state.root / "lake", "bench", f"t{touched - 1}")
        assert lake is not None and lake.by_key()[(3,)]["name"] == f"changed {touched - 1}"
        jobs[touched] = summary.spark_jobs
    assert jobs[8] == jobs[2] <= 4, jobs


def test_a_later_follow_cycle_reuses_its_tables_expressions(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a table's typed expressions cost ~500 Py4J round trips, every cycle (issue #25); a later cycle of
    the same tables in the same session reuses them (cdc.spark.recipes), and still merges exactly. Nor does a
    cycle's cost grow with the jobs the session ran before it (a long `cdc run --follow`)."""
    import py4j.clientserver

    state = _tables(tmp_path / "state", 8)
    merge(state, spark=spark)
    sent = [0]
    send = py4j.clientserver.ClientServerConnection.send_command

    def counted(self: Any, command: str) -> Any:
        # Py4J's releases of JVM objects ("m\nd\n...") are sent when Python's GC frees them: garbage of earlier
        # tests in the same process, not this merge's work.
        if not command.startswith("m\nd\n"):
            sent[0] += 1
        return send(self, command)

    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counted)
    per_cycle = []
    for cycle in range(3):
        for _ in range(60):  # other work of the session between cycles
            spark.sparkContext.parallelize([1], 1).count()
        writer = SegmentWriter(state.changelog, owner="test")
        for t in range(8):
            writer.write(*_line(f"t{t}", "u", 3 + cycle, 1000 + 10 * cycle + t, 0, f"cycle {cycle} table {t}"))
        writer.seal()
        sent[0] = 0
        summary = merge(state, spark=spark)
        per_cycle.append(sent[0])
        assert [(r.table, r.inserts, r.lake_rows) for r in summary.tables] == [(f"bench.t{t}", 1, 20) for t in range(8)]
        for t in range(8):
            lake = read_lake_table(state.root / "lake", "bench", f"t{t}")
            assert lake is not None
            assert [lake.by_key()[(3 + c,)]["name"] for c in range(cycle + 1)] == \
                [f"cycle {c} table {t}" for c in range(cycle + 1)]
    # Building the expressions took ~400 round trips per table; reused, ~69 per table were left while every select
    # sent its columns again (551 for the 8 tables); with their JVM lists reused too, 167 in all; with each table's
    # events no longer asked for their schema (compact.after_is_text), 151 (~7 DataFrame calls per table, the rest
    # the cycle's own: its read, its job, the settings). Counting the session's jobs took 4 more per job it had run
    # (240 per 60 jobs here; ~4,000 in a session that ran 1,000).
    assert max(per_cycle[1:]) < 20 * 8, per_cycle
    assert per_cycle[2] - per_cycle[1] < 60, per_cycle


def test_a_follow_cycle_in_many_segments_runs_its_one_job_in_few_tasks(tmp_path: Path, spark: Any) -> None:
    """`cdc run --follow` seals a segment every 0.5 s, so a cycle's few lines come in 8-10 small files; read as
    they are, each table's branch of the one job had a partition per pair of files (~30 tasks for 16 tables), and
    scheduling them cost more than their rows (issue #25). A small input is read as one partition."""
    state = _tables(tmp_path / "state", 8)
    merge(state, spark=spark)
    for segment in range(8):
        writer = SegmentWriter(state.changelog, owner="test")
        for t in range(8):
            writer.write(*_line(f"t{t}", "u", 3, 1000 + 10 * segment + t, 0, f"segment {segment} table {t}"))
        writer.seal()
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    summary = merge(state, spark=spark)
    assert [(r.table, r.inserts, r.lake_rows) for r in summary.tables] == [(f"bench.t{t}", 1, 20) for t in range(8)]
    for t in range(8):
        lake = read_lake_table(state.root / "lake", "bench", f"t{t}")
        assert lake is not None and lake.by_key()[(3,)]["name"] == f"segment 7 table {t}"
    jobs = [tracker.getJobInfo(j) for j in set(tracker.getJobIdsForGroup(None)) - before]
    tasks = sum(tracker.getStageInfo(s).numTasks for job in jobs if job for s in job.stageIds if tracker.getStageInfo(s))
    assert summary.spark_jobs == 1 and 1 <= tasks <= 8, (summary.spark_jobs, tasks)


def test_a_follow_cycle_runs_its_one_query_without_generated_code(tmp_path: Path, spark: Any) -> None:
    """The small tables' query runs interpreted (issue #25): for a few thousand rows, generating and compiling
    Java for each table branch cost more than evaluating it. A table shape the session has never merged (decimal
    precisions no other test uses) compiles no class; the session's own settings are back afterwards."""
    codegen = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    warm = _tables(tmp_path / "warm", 1)  # the session's queries that do not depend on a table's shape, run once
    merge(warm, spark=spark)
    state = StateDir(tmp_path / "state").ensure()
    columns = (Column("id", "bigint(20)", "bigint", nullable=False),
               *(Column(f"d{p}", f"decimal({p},{p - 9})", "decimal", precision=p, scale=p - 9) for p in (23, 29, 33)))
    SchemaHistory(state.schema).record(TableSchema("bench", "odd", columns, ("id",),
                                                   "0000000001:000000000004:b000000000000"))
    writer = SegmentWriter(state.changelog, owner="test")
    for key in range(1, 6):
        position = position_string(BINLOG, 4, key, snapshot=True)
        image = {"id": key, **{f"d{p}": f"{key}.{'7' * (p - 9)}" for p in (23, 29, 33)}}
        writer.write(position, orjson.dumps({
            "after": image, "before": None, "db": "bench", "key": {"id": key}, "op": "r", "position": position,
            "src": {"file": BINLOG, "gtid": None, "pos": 4, "row": key, "server_id": 1, "xid": 4}, "table": "odd",
            "ts": "2026-11-22T07:00:01Z", "v": 1}) + b"\n")
    writer.seal()
    spark.conf.set("spark.sql.codegen.wholeStage", "true")  # the session's own setting, to be kept
    compiled = codegen.METRIC_COMPILATION_TIME().getCount()
    summary = merge(state, spark=spark)
    assert codegen.METRIC_COMPILATION_TIME().getCount() - compiled == 0
    assert [(r.table, r.inserts, r.lake_rows) for r in summary.tables] == [("bench.odd", 5, 5)]
    lake = read_lake_table(state.root / "lake", "bench", "odd")
    assert lake is not None and str(lake.by_key()[(2,)]["d33"]) == "2." + "7" * 24
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert spark.conf.get("spark.sql.codegen.factoryMode", None) in (None, "FALLBACK")
