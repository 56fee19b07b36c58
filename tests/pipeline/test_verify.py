"""`cdc verify` against a real MariaDB, a lake written by the real spark-merge, and fakesnow for Snowflake."""

from __future__ import annotations

import copy
import shlex
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc.pipeline.checksum import RowHasher, TableDiff, compare_streams, encode_target, normalise
from cdc.schema import Column
from cdc.snowflake.names import snowflake_name
from cdc.sql import quote_ident
from tests.capture.conftest import binlog_start
from tests.capture.workload import TABLE, create_all_types_table, run_workload
from tests.pipeline.cli import run
from tests.pipeline.verify_rig import (
    HOSTILE_TABLE,
    SNOWFLAKE_HOSTILE_TABLE,
    apply_to_snowflake,
    create_hostile_table,
    replicate,
    server_args,
    statuses,
    tamper_lake,
    verify_json,
)
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows


def _source(mariadb: MariaDB, db: str, state: Path, spark: Any, hostile: str = HOSTILE_TABLE) -> None:  # noqa: F811
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        create_all_types_table(conn, db)
        run_workload(conn, db, seed=5, transactions=40)
    create_hostile_table(mariadb, db, hostile)
    replicate(mariadb, state, db, spark, start)


def test_equal_lake_is_ok_and_tampering_lists_the_exact_keys(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                             spark: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    _source(mariadb, fresh_db, state, spark)
    code, doc = verify_json(state, mariadb)
    assert code == 0, doc
    assert statuses(doc) == {(f"{fresh_db}.{TABLE}", "lake"): "OK", (f"{fresh_db}.{HOSTILE_TABLE}", "lake"): "OK"}
    rows = {t["table"]: t for t in doc["tables"]}
    assert rows[f"{fresh_db}.{HOSTILE_TABLE}"]["source_rows"] == rows[f"{fresh_db}.{HOSTILE_TABLE}"]["target_rows"] == 4
    assert doc["targets"]["lake"]["reached"] is True and doc["ok"] is True

    ids: list[int] = []

    def edit(lake_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        lake_rows.sort(key=lambda r: r["id"])
        ids.extend(r["id"] for r in lake_rows[:2])
        lake_rows[0]["c_varchar"] = "tampered"  # a changed value
        del lake_rows[1]  # a missing row
        extra = copy.deepcopy(lake_rows[-1])
        extra["id"] = 999_999
        return [*lake_rows, extra]  # an extra row

    tamper_lake(state / "lake", fresh_db, TABLE, edit)
    code, doc = verify_json(state, mariadb, "--page", "7")
    assert code == 7
    found = {t["table"]: t for t in doc["tables"]}[f"{fresh_db}.{TABLE}"]
    assert found["status"] == "DIFF" and found["more"] == 0 and found["repair"] == f"cdc resnapshot {fresh_db}.{TABLE}"
    assert found["differing"] == sorted([{"key": {"id": ids[0]}, "kind": "changed"},
                                        {"key": {"id": ids[1]}, "kind": "missing"},
                                        {"key": {"id": 999_999}, "kind": "extra"}], key=lambda d: str(d["key"]["id"]))
    assert found["target_rows"] == found["source_rows"]
    assert statuses(doc)[(f"{fresh_db}.{HOSTILE_TABLE}", "lake")] == "OK"


def test_hostile_table_diff_is_listed_with_its_composite_key(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                             spark: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    create_hostile_table(mariadb, fresh_db)
    replicate(mariadb, state, fresh_db, spark, start)

    def edit(lake_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for row in lake_rows:
            if row["Key Col"] == "c'd":
                row["Mixed Case"] = row["Mixed Case"] + 1
        return lake_rows

    tamper_lake(state / "lake", fresh_db, HOSTILE_TABLE, edit)
    code, doc = verify_json(state, mariadb, "--tables", f"{fresh_db}.{HOSTILE_TABLE}", "--sample", "1")
    assert code == 7
    [found] = doc["tables"]
    assert found["differing"] == [{"key": {"Key Col": "c'd", "select": 3}, "kind": "changed"}] and found["more"] == 0
    repair = f"cdc resnapshot {shlex.quote(f'{fresh_db}.{HOSTILE_TABLE}')}"  # the repair, runnable as printed
    assert found["repair"] == repair and found["detail"].endswith(f"repair: {repair}")
    human = run("verify", "--state-dir", str(state), *server_args(mariadb))
    assert human.exit_code == 7 and "DIFF" in human.stdout and "c'd" in human.stdout
    assert repair in " ".join(human.stderr.split())


def test_target_behind_the_source_is_behind_not_diff(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                     spark: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    create_hostile_table(mariadb, fresh_db)
    replicate(mariadb, state, fresh_db, spark, start)
    assert verify_json(state, mariadb)[0] == 0
    mariadb.execute(f"INSERT INTO `{fresh_db}`.`{HOSTILE_TABLE.replace('`', '``')}` VALUES ('z', 9, 9, 'late')")
    file, pos = mariadb.binlog_position()
    code, doc = verify_json(state, mariadb, "--wait", "200ms")
    assert code == 7
    [found] = doc["tables"]
    assert found["status"] == "BEHIND" and found["source_rows"] is None
    assert doc["pinned"]["file"] == file and doc["pinned"]["pos"] == pos
    assert doc["targets"]["lake"]["reached"] is False and "tail is at" in doc["targets"]["lake"]["detail"]
    assert f"{file}:" in found["detail"] and "cdc run --until-now" in found["detail"]
    replicate(mariadb, state, fresh_db, spark)
    code, doc = verify_json(state, mariadb)
    assert code == 0 and [t["source_rows"] for t in doc["tables"]] == [5]


def test_snowflake_equal_after_apply_then_tampering_is_listed(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                              spark: Any, sf: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    _source(mariadb, fresh_db, state, spark, SNOWFLAKE_HOSTILE_TABLE)
    apply_to_snowflake(sf, state)
    code, doc = verify_json(state, mariadb)  # default: both targets, their stages have run
    assert code == 0, doc
    assert set(statuses(doc).values()) == {"OK"} and len(doc["tables"]) == 4
    assert doc["targets"]["snowflake"]["reached"] is True
    first, second, last = (r[0] for r in rows(sf, 'SELECT "ID" FROM "ALL_TYPES" ORDER BY "ID"')[:3])
    sf.cursor().execute('UPDATE "ALL_TYPES" SET "C_VARCHAR" = ? WHERE "ID" = ?', ("tampered", first))
    sf.cursor().execute('DELETE FROM "ALL_TYPES" WHERE "ID" = ?', (second,))
    hostile = quote_ident(snowflake_name(SNOWFLAKE_HOSTILE_TABLE))
    sf.cursor().execute(f'INSERT INTO {hostile} ("Key Col", "SELECT", "Mixed Case", "_CDC_POSITION", "_CDC_OP") '
                        "VALUES (?, ?, ?, ?, ?)", ("new", 5, 1, "x", "c"))
    code, doc = verify_json(state, mariadb, "--target", "snowflake")
    assert code == 7 and {t["target"] for t in doc["tables"]} == {"snowflake"}
    found = {t["table"]: t for t in doc["tables"]}
    assert found[f"{fresh_db}.{TABLE}"]["differing"] == [{"key": {"id": first}, "kind": "changed"},
                                                        {"key": {"id": second}, "kind": "missing"}]
    assert found[f"{fresh_db}.{SNOWFLAKE_HOSTILE_TABLE}"]["differing"] == [{"key": {"Key Col": "new", "select": 5},
                                                                 "kind": "extra"}]
    assert last is not None


def test_ranges_ordered_differently_on_each_side_still_compare_exactly() -> None:
    """A `_ci` collation orders keys its own way: rows in different ranges on each side cancel, real diffs stay."""
    key = Column("k", "varchar(10)", "varchar", nullable=False)
    hasher = RowHasher([key, Column("v", "int(11)", "int")], ["k"])
    source = [{"k": k, "v": 1} for k in ("a", "B", "c", "D", "e", "F")]  # case-insensitive order
    target = sorted(source, key=lambda r: r["k"])  # code-point order: B D F a c e
    target = [{**r, "v": 2} if r["k"] == "c" else r for r in target if r["k"] != "e"] + [{"k": "g", "v": 1}]
    pages = [[hasher.digest(r) for r in source[i:i + 2]] for i in range(0, len(source), 2)]
    diff = compare_streams(TableDiff(), pages, (hasher.digest(r) for r in target))
    assert [(hasher.key_dict(k), kind) for k, kind in diff.differences()] == [
        ({"k": "c"}, "changed"), ({"k": "e"}, "missing"), ({"k": "g"}, "extra")]
    assert (diff.source_rows, diff.target_rows) == (6, 6)


def test_canonical_forms_of_the_documented_conversions() -> None:
    assert normalise(Column("j", "json", "json"), '{"b": [1, 2], "a": "x"}') == '{"a":"x","b":[1,2]}'
    assert normalise(Column("d", "date", "date"), "2026-00-00") is None
    assert normalise(Column("d", "datetime(6)", "datetime", nullable=False, fsp=6), "0000-00-00 00:00:00.000000") == (
        "0001-01-01 00:00:00.000000")
    assert encode_target(Column("s", "set('x','y')", "set", set_values=("x", "y")), '[\n  "y",\n  "x"\n]') == ["x", "y"]
    assert encode_target(Column("n", "decimal(5,2)", "decimal", precision=5, scale=2), Decimal("1.5")) == "1.50"


def test_a_binlog_moved_only_by_rotations_and_restarts_is_not_behind(mariadb_factory: Any, tmp_path: Path,
                                                                      spark: Any) -> None:  # noqa: F811
    """FLUSH BINARY LOGS and a restart write headers, and MariaDB's Binlog_checkpoint up to a second later,
    without a transaction: a pipeline run up to "now" before them holds every row, so verify is OK, not BEHIND
    (found by the fault campaign: a rotation just before its final `cdc run --until-now`)."""
    server, state = mariadb_factory(), tmp_path / "state"
    db = server.create_database("moved")
    start = binlog_start(server)
    create_hostile_table(server, db)
    replicate(server, state, db, spark, start)
    for move in ("FLUSH BINARY LOGS", "restart", "FLUSH BINARY LOGS"):
        server.restart() if move == "restart" else server.execute(move)
        time.sleep(2)  # the checkpoint event is written once the engines flushed: about a second on this rig
        code, doc = verify_json(state, server)
        assert code == 0, (move, doc["targets"])
        assert doc["pinned"]["file"] == server.binlog_position()[0], "the pin is in the newest file"
    end = ":".join(map(str, server.binlog_position()))
    waited = run("wait", "--state-dir", str(state), *server_args(server), "--position", end, "--stage", "tail",
                 "--timeout", "1s")
    assert waited.exit_code == 0 and "only rotation headers" in waited.stderr, waited.output
    server.execute("FLUSH BINARY LOGS")
    server.execute(f"INSERT INTO `{db}`.`{HOSTILE_TABLE.replace('`', '``')}` VALUES ('z', 9, 9, 'late')")
    server.execute("FLUSH BINARY LOGS")
    code, doc = verify_json(state, server)
    assert code == 7 and doc["targets"]["lake"]["reached"] is False, "a transaction among the headers is behind"
    replicate(server, state, db, spark)
    assert verify_json(state, server)[0] == 0
