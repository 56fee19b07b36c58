"""Tables without a primary key, end to end (issue #24): snapshot --allow-no-pk, tail, spark-merge, apply, verify.

A keyless table is a multiset: two identical rows are two rows, and a delete or update of one of them
leaves the other. After every round the lake and Snowflake equal `SELECT *` of the MySQL table as
multisets (values in their change-log form, so types are compared exactly), and `cdc verify` says OK.
A table with a UNIQUE NOT NULL key but no primary key is keyed by it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from cdc.changelog import list_segments, read_segment
from cdc.pipeline.checksum import encode_target
from cdc.schema import SchemaHistory, TableSchema
from cdc.snowflake import names
from cdc.source.schema_reads import read_table_schema
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, tail_once
from tests.pipeline.cli import run
from tests.pipeline.multiset_rig import lake_rows, run_sql, snowflake_rows, source_rows
from tests.pipeline.verify_rig import apply_to_snowflake, server_args, statuses, tamper_lake, verify_json
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows as sf_rows

BAG = "bag"  # no key at all
UNIQ = "uniq"  # no primary key, a UNIQUE NOT NULL key
COLUMNS = "a INT, b VARCHAR(10), d DECIMAL(6,2), t DATETIME(6)"

ROUNDS = [
    # round 1 (before the snapshot): duplicates, NULLs
    ["INSERT INTO bag VALUES (1, 'x', 1.50, '2026-11-22 07:00:01.250000'), (1, 'x', 1.50, '2026-11-22 07:00:01.250000'),"
     " (1, 'x', 1.50, '2026-11-22 07:00:01.250000'), (2, NULL, NULL, NULL), (NULL, NULL, NULL, NULL),"
     " (NULL, NULL, NULL, NULL)",
     "INSERT INTO uniq VALUES ('a', 1, 'one'), ('b', 2, NULL)"],
    # round 2 (tail, one batch): delete one duplicate, update one duplicate, update a NULL row, insert a copy
    ["DELETE FROM bag WHERE a = 1 LIMIT 1",
     "UPDATE bag SET d = 2.00 WHERE a = 1 LIMIT 1",
     "UPDATE bag SET b = 'y' WHERE a IS NULL LIMIT 1",
     "INSERT INTO bag VALUES (2, NULL, NULL, NULL), (2, NULL, NULL, NULL)",
     "DELETE FROM bag WHERE a = 2 LIMIT 1",
     "UPDATE uniq SET n = 10 WHERE code = 'a'", "UPDATE uniq SET code = 'c' WHERE code = 'b'",
     "INSERT INTO uniq VALUES ('d', 4, 'four')"],
    # round 3 (next batch): update every duplicate, a no-op update, delete the last NULL-only row, more copies
    ["INSERT INTO bag VALUES (1, 'x', 2.00, '2026-11-22 07:00:01.250000')",
     "UPDATE bag SET t = '2027-01-01 00:00:00.000001' WHERE a = 1",
     "UPDATE bag SET b = b WHERE a = 2",
     "DELETE FROM bag WHERE a IS NULL AND b IS NULL",
     "INSERT INTO bag VALUES (3, 'z', 0.00, NULL), (3, 'z', 0.00, NULL), (3, 'z', 0.00, NULL)",
     "DELETE FROM uniq WHERE code = 'a'"],
    # round 4 (next batch): every copy of a row deleted, one row updated into a copy of another
    ["DELETE FROM bag WHERE a = 3",
     "UPDATE bag SET a = 1, b = 'x', d = 2.00, t = '2027-01-01 00:00:00.000001' WHERE a = 2 LIMIT 1"],
]


def test_keyless_and_unique_key_tables_end_exact_in_lake_snowflake_and_verify(
        mariadb: MariaDB, fresh_db: str, tmp_path: Path, spark: Any, sf: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    mariadb.execute(f"CREATE TABLE {BAG} ({COLUMNS})", database=fresh_db)
    mariadb.execute(f"CREATE TABLE {UNIQ} (code VARCHAR(8) NOT NULL, n INT NOT NULL, note TEXT, UNIQUE KEY (code))",
                    database=fresh_db)
    run_sql(mariadb, fresh_db, ROUNDS[0])
    check = run("check-binlog", *server_args(mariadb), "--databases", fresh_db, "--json")
    primary = next(c for c in json.loads(check.stdout)["checks"] if c["name"] == "primary_keys")
    assert primary["status"] == "warn"
    assert primary["value"] == (f"1 table(s) without a primary key: {fresh_db}.{BAG}; keyed by their UNIQUE NOT NULL "
                                f"key instead: {fresh_db}.{UNIQ} (code)")
    assert "multisets of whole rows" in primary["fix"]
    snap = run("snapshot", "--state-dir", str(state), *server_args(mariadb), "--databases", fresh_db, "--allow-no-pk")
    assert snap.exit_code == 0, snap.output
    history = SchemaHistory(state / "schema")
    assert [v.primary_key for v in history.versions(fresh_db, BAG)] == [()]
    for number, statements in enumerate(ROUNDS[1:], start=2):
        run_sql(mariadb, fresh_db, statements)
        tail_once(mariadb, state, fresh_db)
        merge(StateDir(state), spark=spark)
        apply_to_snowflake(sf, state)
        for table in (BAG, UNIQ):
            schema, expected = source_rows(mariadb, fresh_db, table)
            assert lake_rows(state, schema) == expected, f"lake {table} after round {number}"
            assert snowflake_rows(sf, schema) == expected, f"Snowflake {table} after round {number}"
        code, doc = verify_json(state, mariadb)
        assert code == 0 and set(statuses(doc).values()) == {"OK"}, doc
    # Tail writes the whole row as a keyless row's key; the unique key is the other table's, in every version.
    lines = [line for seg in list_segments(state / "changelog") for line in read_segment(seg)]
    bag = [line for line in lines if line.get("table") == BAG and line["op"] in "cud"]
    assert bag and all(line["key"] == (line["after"] or line["before"]) for line in bag)
    assert [v.primary_key for v in history.versions(fresh_db, UNIQ)] == [("code",)]
    assert {tuple(line["key"]) for line in lines if line.get("table") == UNIQ} == {("code",)}


def test_verify_counts_copies_of_a_keyless_table(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                 spark: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    mariadb.execute(f"CREATE TABLE {BAG} ({COLUMNS})", database=fresh_db)
    run_sql(mariadb, fresh_db, ROUNDS[0][:1])
    snap = run("snapshot", "--state-dir", str(state), *server_args(mariadb), "--databases", fresh_db, "--allow-no-pk")
    assert snap.exit_code == 0, snap.output
    tail_once(mariadb, state, fresh_db)
    merge(StateDir(state), spark=spark)
    code, doc = verify_json(state, mariadb)
    assert code == 0 and statuses(doc) == {(f"{fresh_db}.{BAG}", "lake"): "OK"}, json.dumps(doc)
    assert doc["tables"][0]["source_rows"] == doc["tables"][0]["target_rows"] == 6

    def edit(lake_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ones = [r for r in lake_rows if r["a"] == 1]
        return [r for r in lake_rows if r["a"] != 1] + ones[:2] + [dict(r) for r in lake_rows if r["a"] == 2]

    tamper_lake(state / "lake", fresh_db, BAG, edit)  # one copy of (1, x, ...) lost, one of (2, ...) added
    code, doc = verify_json(state, mariadb)
    assert code == 7, doc
    found = doc["tables"][0]
    assert (found["status"], found["source_rows"], found["target_rows"]) == ("DIFF", 6, 6)
    assert sorted((d["kind"], d["copies"], d["key"]["a"]) for d in found["differing"]) == [
        ("extra", 1, 2), ("missing", 1, 1)]
    assert {d["key"]["d"] for d in found["differing"]} == {"1.50", None}


def test_cascades_into_a_keyless_child_reach_every_copy(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                        spark: Any, sf: Any) -> None:  # noqa: F811
    """InnoDB cascades into every matching child row, identical copies included; the binlog shows none of them."""
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    mariadb.execute("CREATE TABLE parent (id INT PRIMARY KEY)", database=fresh_db)
    mariadb.execute("CREATE TABLE kid (pid INT, note VARCHAR(5), FOREIGN KEY (pid) REFERENCES parent (id) "
                    "ON DELETE CASCADE ON UPDATE CASCADE)", database=fresh_db)
    run_sql(mariadb, fresh_db, ["INSERT INTO parent VALUES (1), (2), (3)",
                                 "INSERT INTO kid VALUES (1, 'a'), (1, 'a'), (2, 'b'), (2, 'b'), (3, 'c'), (NULL, 'n')"])
    tail_once(mariadb, state, fresh_db, start)
    merge(StateDir(state), spark=spark)
    run_sql(mariadb, fresh_db, ["DELETE FROM parent WHERE id = 1", "UPDATE parent SET id = 20 WHERE id = 2",
                                 "DELETE FROM kid WHERE pid = 20 LIMIT 1", "INSERT INTO kid VALUES (3, 'c')"])
    tail_once(mariadb, state, fresh_db)
    merge(StateDir(state), spark=spark)
    schema, expected = source_rows(mariadb, fresh_db, "kid")
    assert expected == Counter({(20, "b"): 1, (3, "c"): 2, (None, "n"): 1})
    assert lake_rows(state, schema) == expected
    apply_to_snowflake(sf, state)
    assert snowflake_rows(sf, schema) == expected
    code, doc = verify_json(state, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, json.dumps(doc)


def test_a_composite_key_declared_out_of_column_order_merges(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                             spark: Any, sf: Any) -> None:  # noqa: F811
    """PRIMARY KEY (b, a): information_schema lists the key in its own order, the binlog's table map in column
    order. Both are the same key: tail must not record a key change, nor spark-merge stop at one."""
    state = tmp_path / "state"
    mariadb.execute("CREATE TABLE pair (a INT NOT NULL, b VARCHAR(5) NOT NULL, n INT, PRIMARY KEY (b, a))",
                    database=fresh_db)
    run_sql(mariadb, fresh_db, ["INSERT INTO pair VALUES (1, 'x', 10), (2, 'x', 20), (1, 'y', 30)"])
    snap = run("snapshot", "--state-dir", str(state), *server_args(mariadb), "--databases", fresh_db)
    assert snap.exit_code == 0, snap.output
    run_sql(mariadb, fresh_db, ["UPDATE pair SET n = 11 WHERE a = 1 AND b = 'x'", "DELETE FROM pair WHERE a = 2",
                                 "UPDATE pair SET a = 5 WHERE b = 'y'", "INSERT INTO pair VALUES (3, 'z', NULL)"])
    tail_once(mariadb, state, fresh_db)
    assert len(SchemaHistory(state / "schema").versions(fresh_db, "pair")) == 1
    merge(StateDir(state), spark=spark)
    apply_to_snowflake(sf, state)
    schema, expected = source_rows(mariadb, fresh_db, "pair")
    assert expected == Counter({(1, "x", 11): 1, (5, "y", 30): 1, (3, "z", None): 1})
    assert lake_rows(state, schema) == expected
    assert snowflake_rows(sf, schema) == expected
    code, doc = verify_json(state, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, json.dumps(doc)
