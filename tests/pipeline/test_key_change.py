"""A change of a table's primary key, followed by spark-merge and snowflake-apply exactly (issue #30, cdc.spark.rekey).

Real MariaDB -> tail -> spark-merge -> snowflake-apply (fakesnow). The key is widened, moved to a UNIQUE NOT NULL
column and narrowed, with rows changed before and after each ALTER in the same merge input (so a run must end at
the ALTER) and in later ones; rows that only the new key allows (the old key's values repeated) are written
after it. After every round the lake and the Snowflake table equal a SELECT * of the MySQL table row for row,
and `cdc verify` says OK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc.schema import SchemaHistory
from cdc.snowflake import apply, bootstrap
from cdc.source.schema_reads import read_table_schema
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, tail_once
from tests.capture.workload import expected_rows
from tests.pipeline.verify_rig import statuses, verify_json
from tests.rig import MariaDB
from tests.snowflake.test_pipeline import _lake_expected, _snowflake_rows, _snowflake_value, _typed

TABLE = "keyed"
# Awkward names in the key columns (a space, a dot, non-ASCII): quoted through SHOW PRIMARY KEYS, ADD PRIMARY KEY, MERGE.
B, U = "`b ö-1`", "`u.1`"


def merge_all(state: StateDir, spark: Any) -> int:
    """spark-merge until nothing is left (a run ends before a key change); the number of runs that made a batch."""
    runs = 0
    while True:
        summary = merge(state, spark=spark)
        runs += summary.batch_id is not None
        if summary.key_change is None:
            return runs


def _compare(mariadb: MariaDB, db: str, state: StateDir, sf: Any, label: str) -> None:
    with mariadb.connect() as conn:
        encoded = expected_rows(conn, db, TABLE)
        schema = read_table_schema(conn, db, TABLE)
    assert schema is not None
    key = sorted(schema.primary_key)
    lake = read_lake_table(state.root / "lake", db, TABLE)
    assert lake is not None and sorted(lake.primary_key) == key, label
    assert len(lake.rows) == len(encoded), label
    lake_rows = {tuple(r[k] for k in key): _typed({c: r[c] for c in schema.column_names}) for r in lake.rows}
    assert lake_rows == _lake_expected(schema, encoded), f"lake {label}"
    expected = {k: _typed({c.name: _snowflake_value(c, row[c.name]) for c in schema.columns})
                for k, row in encoded.items()}
    assert _snowflake_rows(sf, schema) == expected, f"Snowflake {label}"
    code, doc = verify_json(state.root, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, (label, doc)


def _replicate(mariadb: MariaDB, db: str, state: StateDir, spark: Any, sf: Any, label: str, *, runs: int,
               bootstrap_first: bool = False) -> None:
    tail_once(mariadb, state.root, db)
    assert merge_all(state, spark) == runs, label
    if bootstrap_first:
        options = bootstrap.Options()
        bootstrap.run(sf, bootstrap.targets_for(bootstrap.schemas_from_history(SchemaHistory(state.schema), []),
                                                options), options)
    assert apply.run(sf, state).applied, label
    _compare(mariadb, db, state, sf, label)


def test_primary_key_changes_reach_lake_and_snowflake_exactly(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                              spark: Any, sf: Any) -> None:  # noqa: F811
    state = StateDir(tmp_path / "state")
    table = f"`{fresh_db}`.`{TABLE}`"
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, {B} INT NOT NULL, c VARCHAR(10), "
                    f"{U} INT NOT NULL UNIQUE)")
    mariadb.execute(f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, {i % 2}, 'c{i}', {100 + i})"
                                                             for i in range(1, 9)))
    tail_once(mariadb, state.root, fresh_db, start)
    _replicate(mariadb, fresh_db, state, spark, sf, "first", runs=1, bootstrap_first=True)

    # Widened: rows changed before and after the ALTER in one merge input; (1, 7) is a new row only the new key
    # allows, beside (1, 1); a key column updated under the new key moves the row.
    mariadb.execute(f"UPDATE {table} SET c = 'before' WHERE id = 2")
    mariadb.execute(f"DELETE FROM {table} WHERE id = 3")
    mariadb.execute(f"ALTER TABLE {table} DROP PRIMARY KEY, ADD PRIMARY KEY (id, {B})")
    mariadb.execute(f"INSERT INTO {table} VALUES (1, 7, 'same id', 201)")
    mariadb.execute(f"UPDATE {table} SET {B} = 5, c = 'moved' WHERE id = 4 AND {B} = 0")
    mariadb.execute(f"UPDATE {table} SET c = 'after' WHERE id = 2")
    mariadb.execute(f"DELETE FROM {table} WHERE id = 5")
    _replicate(mariadb, fresh_db, state, spark, sf, "widened", runs=2)

    # Moved to the UNIQUE NOT NULL column, then narrowed back to id in the same input: three runs, two cuts.
    # Under (u), (1, 1) can repeat; it must be gone again before (id) can be the key.
    mariadb.execute(f"UPDATE {table} SET c = 'x' WHERE {U} = 106")
    mariadb.execute(f"ALTER TABLE {table} DROP PRIMARY KEY, ADD PRIMARY KEY ({U})")
    mariadb.execute(f"INSERT INTO {table} VALUES (1, 1, 'twin', 300)")
    mariadb.execute(f"UPDATE {table} SET {U} = 307, c = 'u moved' WHERE {U} = 107")
    mariadb.execute(f"DELETE FROM {table} WHERE {U} IN (300, 201)")
    mariadb.execute(f"ALTER TABLE {table} DROP PRIMARY KEY, ADD PRIMARY KEY (id)")
    mariadb.execute(f"UPDATE {table} SET c = 'narrow' WHERE id = 8")
    mariadb.execute(f"INSERT INTO {table} VALUES (10, 0, 'ten', 110)")
    _replicate(mariadb, fresh_db, state, spark, sf, "moved and narrowed", runs=3)

    # Later changes under the latest key, in a run of their own.
    mariadb.execute(f"UPDATE {table} SET id = 11 WHERE id = 10")
    mariadb.execute(f"INSERT INTO {table} VALUES (12, 1, 'twelve', 112)")
    _replicate(mariadb, fresh_db, state, spark, sf, "later", runs=1)
