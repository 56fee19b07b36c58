"""DDL whose effect on existing rows has no row event, reproduced in the lake and in Snowflake (issue #30).

Real MariaDB -> tail -> spark-merge -> snowflake-apply (fakesnow), rounds of DDL with rows written before and
after it in the same batch and in later batches. After every round the lake and the Snowflake table equal a
SELECT * of the MySQL table row for row (exact types), and `cdc verify` says OK for both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cdc.schema import SchemaHistory
from cdc.snapshot import ResnapshotRequest, run_resnapshot
from cdc.snowflake import apply, bootstrap, names
from cdc.source.schema_reads import read_table_schema
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, tail_once
from tests.capture.workload import expected_rows
from tests.pipeline.cli import run
from tests.pipeline.verify_rig import statuses, verify_json
from tests.rig import MariaDB
from tests.snapshot.resnapshot_rig import create_marks_table, resnapshot_settings, tail_running
from tests.snowflake.stand_in import rows
from tests.snowflake.test_pipeline import _lake_expected, _snowflake_rows, _snowflake_value, _typed

TABLE = "customer"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _differences(found: dict[Any, Any], want: dict[Any, Any]) -> list[Any]:
    return [(key, name, found.get(key, {}).get(name), value) for key, row in want.items() for name, value in row.items()
            if found.get(key, {}).get(name) != value][:6]


def _replicate_and_compare(mariadb: MariaDB, db: str, state: StateDir, sf: Any, spark: Any, label: str, *,
                           bootstrap_first: bool = False) -> None:
    tail_once(mariadb, state.root, db)
    merge(state, spark=spark)
    if bootstrap_first:  # from the schema history's latest version, as `cdc run` does; with the SCD2 table
        options = bootstrap.Options(history=True)
        bootstrap.run(sf, bootstrap.targets_for(bootstrap.schemas_from_history(SchemaHistory(state.schema), []),
                                                options), options)
    assert apply.run(sf, state).applied, label
    with mariadb.connect() as conn:
        encoded = expected_rows(conn, db, TABLE)
        schema = read_table_schema(conn, db, TABLE)
    assert schema is not None
    sf_names = names.column_names(f"{db}.{TABLE}", schema.column_names)
    lake = read_lake_table(state.root / "lake", db, TABLE)
    assert lake is not None
    assert lake.columns[:-3] == schema.column_names, label
    lake_rows = {key: _typed({c: row[c] for c in schema.column_names}) for key, row in lake.by_key().items()}
    want = _lake_expected(schema, encoded)
    assert lake_rows == want, f"lake {label}: {_differences(lake_rows, want)}"
    expected = {key: _typed({c.name: _snowflake_value(c, row[c.name]) for c in schema.columns})
                for key, row in encoded.items()}
    found = _snowflake_rows(sf, schema)
    assert found == expected, f"Snowflake {label}: {_differences(found, expected)}"
    code, doc = verify_json(state.root, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, (label, doc)
    # SCD2: the current version of every key holds the same values as the table (added and renamed columns too).
    current = rows(sf, f'SELECT "ID", {", ".join(_quoted(sf_names[c]) for c in schema.column_names)} '
                       f'FROM "CUSTOMER_HISTORY" WHERE "_CDC_IS_CURRENT" ORDER BY "ID"')
    table = rows(sf, f'SELECT "ID", {", ".join(_quoted(sf_names[c]) for c in schema.column_names)} FROM "CUSTOMER" '
                     'ORDER BY "ID"')
    assert current == table, label


def test_add_drop_rename_columns_reach_lake_and_snowflake_exactly(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                                  spark: Any, sf: Any) -> None:  # noqa: F811
    state = StateDir(tmp_path / "state")
    table = f"`{fresh_db}`.`{TABLE}`"
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, phone VARCHAR(20), "
                    "amount DECIMAL(8,2))")
    mariadb.execute(f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, 'n{i}', '555-{i}', {(-1) ** i * (i + 0.25)})"
                                                             for i in range(1, 7)))
    tail_once(mariadb, state.root, fresh_db, start)
    merge(state, spark=spark)  # applied after the ALTER below: bootstrap then sees the new NOT NULL columns

    # Rows changed before and after one ALTER adding columns of every kind of fill, in the same batch.
    mariadb.execute(f"UPDATE {table} SET name = 'before' WHERE id = 1")
    mariadb.execute(f"INSERT INTO {table} (id, name) VALUES (7, 'n7')")
    mariadb.execute(
        f"ALTER TABLE {table} ADD COLUMN loyalty_points INT NOT NULL DEFAULT 100, "
        "ADD COLUMN (tier ENUM('gold','silver') NOT NULL, joined DATE NOT NULL, tags SET('a','b') NOT NULL "
        "DEFAULT 'b,a', nothing INT NULL, code CHAR(3) NOT NULL, flag TINYINT NOT NULL DEFAULT TRUE), "
        "ADD note VARCHAR(10) DEFAULT 'O''Brien' AFTER id, ADD COLUMN IF NOT EXISTS balance DECIMAL(8,2) "
        "DEFAULT '-1.5' FIRST")
    mariadb.execute(f"UPDATE {table} SET loyalty_points = 5, tier = 'silver' WHERE id = 2")
    mariadb.execute(f"INSERT INTO {table} (id, name, loyalty_points, note, joined, code) "
                    "VALUES (8, 'n8', 8, NULL, '2026-01-02', 'xyz')")
    _replicate_and_compare(mariadb, fresh_db, state, sf, spark, "after ADD COLUMN", bootstrap_first=True)

    # An ALTER and no row change of the table after it: the batch still carries it.
    mariadb.execute(f"UPDATE {table} SET name = 'last before' WHERE id = 3")
    mariadb.execute(f"ALTER TABLE {table} ADD COLUMN late INT NOT NULL DEFAULT 7, DROP COLUMN phone")
    _replicate_and_compare(mariadb, fresh_db, state, sf, spark, "after an ALTER alone")

    # Dropped and added again with another default; a NOT NULL column renamed (the old name must not stay behind
    # NOT NULL in Snowflake); rows before and after.
    mariadb.execute(f"UPDATE {table} SET loyalty_points = 50 WHERE id = 4")
    mariadb.execute(f"ALTER TABLE {table} DROP COLUMN loyalty_points")
    mariadb.execute(f"ALTER TABLE {table} ADD COLUMN loyalty_points INT DEFAULT 9, RENAME COLUMN name TO full_name")
    mariadb.execute(f"INSERT INTO {table} (id, full_name, joined, code) VALUES (9, 'n9', '2026-02-03', 'c9')")
    mariadb.execute(f"UPDATE {table} SET loyalty_points = 1 WHERE id = 5")
    _replicate_and_compare(mariadb, fresh_db, state, sf, spark, "after DROP, re-ADD and RENAME")

    # Types MySQL converts in place: a DECIMAL's scale (stored values rounded), an ENUM's members reordered.
    mariadb.execute(f"UPDATE {table} SET amount = 3.45 WHERE id = 6")
    mariadb.execute(f"ALTER TABLE {table} MODIFY amount DECIMAL(8,1), MODIFY tier ENUM('silver','gold','x') NOT NULL")
    mariadb.execute(f"INSERT INTO {table} (id, full_name, joined, code, amount) VALUES (10, 'n10', '2026-02-03', 'c', 7.7)")
    _replicate_and_compare(mariadb, fresh_db, state, sf, spark, "after MODIFY")

    # A default MySQL evaluates when the ALTER runs: never guessed; status and verify name the repair.
    mariadb.execute(f"ALTER TABLE {table} ADD COLUMN created DATETIME DEFAULT CURRENT_TIMESTAMP")
    tail_once(mariadb, state.root, fresh_db)
    merge(state, spark=spark)
    apply.run(sf, state)
    code, doc = verify_json(state.root, mariadb)
    repair = f"cdc resnapshot {fresh_db}.{TABLE}"
    assert code == 7 and {t["status"] for t in doc["tables"]} == {"DIFF"}
    for found in doc["tables"]:
        assert found["repair"] == repair and "created: DEFAULT CURRENT_TIMESTAMP" in found["resnapshot"]
    status = run("status", "--state-dir", str(state.root), "--offline", "--json")
    assert [(f["table"], f["repair"]) for f in json.loads(status.stdout)["needs_resnapshot"]] == [
        (f"{fresh_db}.{TABLE}", repair)]

    # The repair it names, done online while tail runs: the flag clears, and lake and Snowflake end exact.
    create_marks_table(mariadb)
    with tail_running(mariadb, state.root, fresh_db, None):
        run_resnapshot(resnapshot_settings(mariadb, state.root, fresh_db), ResnapshotRequest((f"{fresh_db}.{TABLE}",)))
    _replicate_and_compare(mariadb, fresh_db, state, sf, spark, "after cdc resnapshot")
    status = run("status", "--state-dir", str(state.root), "--offline", "--json")
    assert json.loads(status.stdout)["needs_resnapshot"] == []
