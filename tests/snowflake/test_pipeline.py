"""The whole pipeline on the capture issue's workload: MariaDB -> tail -> spark-merge -> snowflake-apply.

The randomized all-types workload (inserts, updates, primary-key changes, deletes, multi-row
statements, rollbacks) runs in three rounds with DDL between them (ADD COLUMN, then DROP COLUMN).
After every round the lake table and the Snowflake table must equal a SELECT of the MySQL table
row for row, with exact Python types. The oracle is the SELECT, encoded the way the capture
issue pins it (tests/capture/workload.py expected_rows), then converted independently to what the
lake (pyarrow) and the Snowflake connector must return.

Documented conversions, not differences: zero and partial-zero dates become NULL (a NOT NULL column
would hold 0001-01-01); TIME stays text (MySQL TIME is a duration); DECIMAL(65,30) stays exact text.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.snowflake import apply, bootstrap, names
from cdc.snowflake.bootstrap import schemas_from_history
from cdc.source.schema_reads import read_table_schema
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from cdc.values import BINARY_TYPES, SPATIAL_TYPES
from tests.capture.conftest import binlog_start, tail_once
from tests.capture.workload import TABLE, create_all_types_table, expected_rows, prepare_session, run_workload
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows
from tests.spark.workload import lake_value

NEW_COLUMN = "note x"  # added after round 1 (a name that needs quoting in Snowflake), dropped after round 2


def _round(conn: Any, db: str, number: int) -> None:
    """One round of the workload, with the DDL that precedes it."""
    table = f"`{db}`.`{TABLE}`"
    prepare_session(conn)
    with conn.cursor() as cur:
        if number == 2:
            cur.execute(f"ALTER TABLE {table} ADD COLUMN `{NEW_COLUMN}` VARCHAR(20)")
        if number == 3:
            cur.execute(f"ALTER TABLE {table} DROP COLUMN `{NEW_COLUMN}`")
    run_workload(conn, db, seed=30 + number, transactions=35, first_key=1000 * number)
    if number == 2:
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {table} SET `{NEW_COLUMN}` = CONCAT('O''Brien ', id) WHERE id % 2 = 0")
    conn.commit()


def _typed(row: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Values with their type names: 5 == Decimal(5) must not pass for an exact comparison."""
    return {name: (type(value).__name__, value) for name, value in row.items()}


def _lake_expected(schema: TableSchema, encoded: dict[tuple[Any, ...], dict[str, Any]]) -> dict[Any, Any]:
    return {key: _typed({c.name: lake_value(c, row[c.name]) for c in schema.columns}) for key, row in encoded.items()}


def _snowflake_value(column: Column, value: Any) -> Any:
    """What the Snowflake connector returns for a change-log value in the column's mapped type."""
    lake = lake_value(column, value)
    if lake is None:
        return None
    kind = column.data_type
    if kind == "json":
        return json.loads(value)  # VARIANT: compared as a parsed document (Snowflake reformats the text)
    if kind == "set":
        return list(value)  # ARRAY: compared parsed, see _snowflake_rows
    if kind in BINARY_TYPES or kind in SPATIAL_TYPES:
        return bytes(lake)
    if isinstance(lake, Decimal) and lake == lake.to_integral_value() and kind != "decimal":
        return int(lake)  # NUMBER(p,0) comes back as int
    return lake


def _snowflake_rows(conn: Any, schema: TableSchema) -> dict[Any, Any]:
    """The Snowflake table's rows (current MySQL columns only), keyed like expected_rows."""
    mapped = names.column_names(f"{schema.db}.{schema.table}", schema.column_names)
    temporal = [c for c in schema.columns if c.data_type in ("date", "datetime", "timestamp")]
    # fakesnow's server returns a NULL TIMESTAMP_NTZ as 1970-01-01: ask for NULL-ness in SQL.
    select = ", ".join([f'"{mapped[c.name]}"' for c in schema.columns]
                       + [f'"{mapped[c.name]}" IS NULL' for c in temporal])
    found = {}
    for record in rows(conn, f'SELECT {select} FROM "{names.snowflake_name(schema.table)}"'):
        values = dict(zip(schema.column_names, record))
        for column, is_null in zip(temporal, record[len(schema.columns):]):
            values[column.name] = None if is_null else values[column.name]
        for column in schema.columns:
            value = values[column.name]
            if value is not None and column.data_type in ("json", "set"):
                values[column.name] = json.loads(value)
            elif isinstance(value, bytearray):
                values[column.name] = bytes(value)
        found[tuple(values[k] for k in sorted(schema.primary_key))] = _typed(values)
    return found


def test_tail_merge_apply_equals_mysql_after_every_round(mariadb: MariaDB, fresh_db: str, sf: Any, tmp_path: Path,
                                                         spark: Any) -> None:  # noqa: F811
    state = StateDir(tmp_path / "state")
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        create_all_types_table(conn, fresh_db)
    for number in (1, 2, 3):
        with mariadb.connect() as conn:
            _round(conn, fresh_db, number)
            encoded = expected_rows(conn, fresh_db, TABLE)
            schema = read_table_schema(conn, fresh_db, TABLE)
        assert schema is not None and len(encoded) > 20
        tail_once(mariadb, state.root, fresh_db, start if number == 1 else None)
        summary = merge(state, spark=spark)
        assert summary.batch_id == f"b{number:012d}"

        lake = read_lake_table(state.root / "lake", fresh_db, TABLE)
        assert lake is not None
        lake_rows = {key: _typed({c: row[c] for c in schema.column_names}) for key, row in lake.by_key().items()}
        assert lake_rows == _lake_expected(schema, encoded), f"lake after round {number}"

        options = bootstrap.Options()
        plan = bootstrap.run(sf, bootstrap.targets_for(schemas_from_history(SchemaHistory(state.schema), []),
                                                        options), options)
        assert plan.added == ([f"ALL_TYPES.{NEW_COLUMN}"] if number == 2 else [])
        applied = apply.run(sf, state)
        assert applied.applied == [summary.batch_id]
        expected = {key: _typed({c.name: _snowflake_value(c, row[c.name]) for c in schema.columns})
                    for key, row in encoded.items()}
        assert _snowflake_rows(sf, schema) == expected, f"Snowflake after round {number}"
        meta = rows(sf, 'SELECT "ID", "_CDC_POSITION", "_CDC_OP" FROM "ALL_TYPES"')
        assert {r[0]: (r[1], r[2]) for r in meta} == {
            row["id"]: (row["_cdc_position"], row["_cdc_op"]) for row in lake.rows}
