"""The randomized all-types workload replayed from the change log equals a SELECT of the table."""

from __future__ import annotations

from pathlib import Path

import orjson

from cdc.changelog import encode_line, list_segments
from cdc.schema import SchemaHistory
from cdc.source.schema_reads import read_table_schema
from tests.capture.conftest import binlog_start, changelog_bytes, changelog_lines, tail_once
from tests.capture.workload import TABLE, create_all_types_table, expected_rows, replay, run_workload
from tests.rig import MariaDB


def test_workload_replays_to_the_table_and_rereads_identically(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        create_all_types_table(conn, fresh_db)
        counts = run_workload(conn, fresh_db, seed=11, transactions=80)
        expected = expected_rows(conn, fresh_db, TABLE)

    summary = tail_once(mariadb, tmp_path / "a", fresh_db, start)
    lines = changelog_lines(tmp_path / "a")

    assert replay(lines, fresh_db, TABLE) == expected
    assert summary.transactions == counts["commits"] + 1  # + the CREATE TABLE
    assert lines[0]["op"] == "ddl" and lines[0]["kind"] == "create"
    assert {line["op"] for line in lines[1:]} <= {"c", "u", "d"}
    positions = [line["position"] for line in lines]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    # Every line is exactly what encode_line makes of it: sorted keys, compact, version 1.
    for raw in changelog_bytes(tmp_path / "a").splitlines(keepends=True):
        assert encode_line(orjson.loads(raw)) == raw
    schema = SchemaHistory(tmp_path / "a" / "schema").latest(fresh_db, TABLE)
    with mariadb.connect() as conn:
        assert schema is not None and schema.columns == read_table_schema(conn, fresh_db, TABLE).columns
    # A second reader of the same range (tiny segments this time) writes the same bytes.
    tail_once(mariadb, tmp_path / "b", fresh_db, start, segment_bytes=1, spill_bytes=1)
    assert changelog_bytes(tmp_path / "b") == changelog_bytes(tmp_path / "a")
    assert len(list_segments(tmp_path / "b" / "changelog")) == summary.transactions


def test_lines_carry_coordinates_and_commit_time(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (a INT, b VARCHAR(10), v INT, PRIMARY KEY (b, a))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1, 'x', 10), (2, 'y', 20)")
    mariadb.execute(f"UPDATE `{fresh_db}`.t SET a = 3, v = 30 WHERE a = 1")
    mariadb.execute(f"DELETE FROM `{fresh_db}`.t WHERE a = 2")
    gtid = str(mariadb.variable("gtid_binlog_pos"))

    tail_once(mariadb, tmp_path / "s", fresh_db, start)
    lines = changelog_lines(tmp_path / "s")

    insert, second, update, delete = lines[1:]
    assert insert["key"] == {"a": 1, "b": "x"} and insert["after"] == {"a": 1, "b": "x", "v": 10}
    assert insert["src"]["row"] == 0 and second["src"]["row"] == 1 and insert["src"]["pos"] == second["src"]["pos"]
    assert isinstance(insert["src"]["xid"], int) and insert["src"]["server_id"] == 1
    assert update["op"] == "u" and update["key"] == {"a": 3, "b": "x"} and update["before"]["a"] == 1
    assert delete["op"] == "d" and delete["after"] is None and delete["key"] == {"a": 2, "b": "y"}
    assert delete["src"]["gtid"] == gtid.split(",")[-1]
    assert all(line["ts"].endswith("Z") and len(line["ts"]) == 20 for line in lines)
    history = SchemaHistory(tmp_path / "s" / "schema").latest(fresh_db, "t")
    assert history is not None and history.primary_key == ("a", "b")  # table order, not key order
    assert [c.type for c in history.columns] == ["int(11)", "varchar(10)", "int(11)"]
