"""A MySQL table, its lake table and its Snowflake table read as multisets of rows in change-log form
(cdc.pipeline.checksum's canonical values), so that tests compare them exactly, keyed or not."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from cdc.pipeline.checksum import encode_target
from cdc.schema import TableSchema
from cdc.snowflake import names
from cdc.source.schema_reads import read_table_schema
from cdc.spark import read_lake_table
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows as sf_rows


def run_sql(server: MariaDB, db: str, statements: list[str]) -> None:
    with server.connect() as conn:
        with conn.cursor() as cur:
            cur.execute(f"USE `{db}`")
            for statement in statements:
                cur.execute(statement)
        conn.commit()


def source_rows(server: MariaDB, db: str, table: str) -> tuple[TableSchema, Counter[tuple[Any, ...]]]:
    """SELECT * of the table as a multiset of rows in change-log form (cdc.pipeline.checksum's canonical values)."""
    with server.connect() as conn:
        schema = read_table_schema(conn, db, table)
        assert schema is not None
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            found = cur.fetchall()
    return schema, Counter(tuple(_frozen(encode_target(c, _from_mysql(c, v))) for c, v in zip(schema.columns, r))
                           for r in found)


def _from_mysql(column: Any, value: Any) -> Any:
    """PyMySQL's value in the target's Python form: a SET arrives as its 'a,b' text, a Snowflake ARRAY as a list."""
    if column.data_type == "set" and isinstance(value, str):
        return [member for member in value.split(",") if member]
    return value


def lake_rows(state: Path, schema: TableSchema) -> Counter[tuple[Any, ...]]:
    table = read_lake_table(state / "lake", schema.db, schema.table)
    assert table is not None
    return Counter(tuple(_frozen(encode_target(c, r[c.name])) for c in schema.columns) for r in table.rows)


def snowflake_rows(sf: Any, schema: TableSchema) -> Counter[tuple[Any, ...]]:
    mapped = names.column_names(f"{schema.db}.{schema.table}", schema.column_names)
    temporal = [c for c in schema.columns if c.data_type == "datetime"]
    select = ", ".join([f'"{mapped[c.name]}"' for c in schema.columns] + [f'"{mapped[c.name]}" IS NULL' for c in temporal])
    found: Counter[tuple[Any, ...]] = Counter()
    for record in sf_rows(sf, f'SELECT {select} FROM "{names.snowflake_name(schema.table)}"'):
        values = dict(zip(schema.column_names, record))
        for column, is_null in zip(temporal, record[len(schema.columns):]):  # fakesnow: NULL reads as 1970-01-01
            values[column.name] = None if is_null else values[column.name]
        found[tuple(_frozen(encode_target(c, values[c.name])) for c in schema.columns)] += 1
    return found


def _frozen(value: Any) -> Any:
    """A canonical value made hashable for the multiset (a SET's members are a list)."""
    return tuple(value) if isinstance(value, list) else value
