"""The two sides `cdc verify` reads: MySQL at the pinned snapshot, and a target (lake or Snowflake).

Every reader yields rows as column name -> canonical value (cdc.pipeline.checksum), in pages
ordered by primary key and fetched by keyset pagination with bind parameters; identifiers are
always quoted (backticks for MySQL, double quotes for Snowflake), never values pasted into SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql

from cdc import sql
from cdc.checkpoints import ApplyCheckpoint, MergeCheckpoint
from cdc.masking import ColumnRules
from cdc.pipeline.checksum import encode_target, normalise
from cdc.schema import TableSchema
from cdc.snowflake import BOOKKEEPING_TABLE, CDC_DELETED, Target, build_target, snowflake_name
from cdc.source.tables import TablePlan, bindable_key, keyset_params, select_sql, stream_rows
from cdc.spark import read_pointer, table_dir

Row = dict[str, Any]
_TEMPORAL = ("DATE", "TIMESTAMP_NTZ", "TIMESTAMP_TZ", "TIMESTAMP_LTZ")


def source_pages(conn: pymysql.Connection, plan: TablePlan, page: int, rules: ColumnRules) -> Iterator[list[Row]]:
    """The table inside the snapshot transaction, one key range (page) at a time, as snapshot encodes it.

    Masked by the column rules before normalising: capture hashes the value as encoded, not its
    normalised form (canonical JSON, zero dates).
    """
    last: list[Any] | None = None
    while True:
        read = list(_read(conn, plan, rules, select_sql(plan, after_key=last is not None, limit=page),
                          None if last is None else keyset_params(last)))
        if read:
            yield [canonical for _, canonical in read]
        if len(read) < page:
            return
        # Bind the key back from its change-log form, exactly as snapshot does (DECIMAL, ENUM, BINARY...).
        last = bindable_key(plan, [read[-1][0][k] for k in plan.key])


def source_rows(conn: pymysql.Connection, plan: TablePlan, rules: ColumnRules) -> Iterator[Row]:
    """A keyless table inside the snapshot transaction: one streamed SELECT, in no order (nothing to page by)."""
    for _, canonical in _read(conn, plan, rules, select_sql(plan, after_key=False, limit=None), None):
        yield canonical


def _read(conn: pymysql.Connection, plan: TablePlan, rules: ColumnRules, statement: str,
          params: list[Any] | None) -> Iterator[tuple[Row, Row]]:
    """(row as snapshot encodes it, its masked canonical form) for each row of one SELECT."""
    columns, mask = rules.mask(plan.schema).columns, rules.row_masker(plan.schema)
    converted = plan.converted_columns()
    for values in stream_rows(conn, statement, params):
        row = dict(zip(plan.schema.column_names, values, strict=False))
        for name, encode in converted:
            row[name] = encode(row[name])
        masked = mask(row)
        yield row, {c.name: normalise(c, masked[c.name]) for c in columns}


class LakeReader:
    """spark-merge's current-state Parquet tables, read with pyarrow (no Spark)."""

    name = "lake"
    stage = MergeCheckpoint.STAGE

    def __init__(self, directory: Path, page: int) -> None:
        self.directory = Path(directory)
        self.page = page

    def describe(self) -> str:
        return str(self.directory)

    def version(self, schema: TableSchema) -> str | None:
        pointer = read_pointer(table_dir(self.directory, schema.db, schema.table))
        return None if pointer is None else f"{pointer['current']} (batch {pointer.get('batch_id')})"

    def batch(self, schema: TableSchema) -> str | None:
        pointer = read_pointer(table_dir(self.directory, schema.db, schema.table))
        return None if pointer is None else pointer.get("batch_id")

    def rows(self, schema: TableSchema) -> Iterator[Row] | None:
        """The current version sorted by key; None when the table was never merged."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        directory = table_dir(self.directory, schema.db, schema.table)
        pointer = read_pointer(directory)
        if pointer is None:
            return None
        have = {c["name"] for c in pointer["columns"]}
        present = [c.name for c in schema.columns if c.name in have]
        files = sorted((directory / pointer["current"]).glob("*.parquet"))
        parts = [pq.read_table(path, columns=present) for path in files]
        if not parts:
            return iter(())
        table = pa.concat_tables(parts)
        if schema.primary_key:  # a keyless table is compared as a multiset, in any order
            table = table.sort_by([(k, "ascending") for k in schema.primary_key])
        return self._iterate(schema, table)

    def _iterate(self, schema: TableSchema, table: Any) -> Iterator[Row]:
        for batch in table.to_batches(max_chunksize=self.page):
            for row in batch.to_pylist():
                yield {c.name: encode_target(c, row.get(c.name)) for c in schema.columns}

    def close(self) -> None:
        return None


class SnowflakeReader:
    """Target tables created by snowflake-bootstrap and filled by snowflake-apply."""

    name = "snowflake"
    stage = ApplyCheckpoint.STAGE

    def __init__(self, conn: Any, page: int) -> None:
        from cdc.snowflake import existing_columns, snowflake_cursor

        self.conn = conn
        self.cursor = snowflake_cursor(conn)
        self.page = page
        self.database, self.schema = self.cursor.execute("SELECT CURRENT_DATABASE(), CURRENT_SCHEMA()").fetchall()[0]
        self.existing = existing_columns(self.cursor, self.schema)

    def describe(self) -> str:
        return f"{self.database}.{self.schema}"

    def applied_batch(self) -> str | None:
        """The last batch in the bookkeeping table: the truth of "applied" (the checkpoint may lag it)."""
        if BOOKKEEPING_TABLE not in self.existing:
            return None
        self.cursor.execute(f'SELECT MAX("BATCH_ID") FROM {sql.quote_ident(BOOKKEEPING_TABLE)}')
        found = self.cursor.fetchone()
        return None if not found or found[0] is None else str(found[0])

    def rows(self, schema: TableSchema) -> Iterator[Row] | None:
        target = build_target(schema, snowflake_name(schema.table))
        have = self.existing.get(target.name)
        if have is None:
            return None
        return self._iterate(schema, target, have)

    def _iterate(self, schema: TableSchema, target: Target, have: dict[str, str]) -> Iterator[Row]:
        present = [c for c in target.columns if c.name in have]
        q = sql.quote_ident
        # NULL-ness of temporal columns asked in SQL: fakesnow's server returns a NULL TIMESTAMP_NTZ as 1970-01-01.
        temporal = [i for i, c in enumerate(present) if c.type.split("(")[0] in _TEMPORAL]
        select = (f"SELECT {', '.join([q(c.name) for c in present] + [f'{q(present[i].name)} IS NULL' for i in temporal])}"
                  f" FROM {q(target.name)}")
        live = f"NOT COALESCE({q(CDC_DELETED)}, FALSE)" if CDC_DELETED in have else "TRUE"
        if target.keyless:  # a multiset, read whole in any order: no key to page by
            self.cursor.execute(f"{select} WHERE {live}")
            while page := self.cursor.fetchmany(self.page):
                yield from (self._row(schema, present, temporal, record) for record in page)
            return
        order = ", ".join(q(k) for k in target.key)
        key_at = [[c.name for c in present].index(k) for k in target.key]
        last: list[Any] | None = None
        while True:
            where = live if last is None else f"{live} AND ({_keyset(target.key)})"
            self.cursor.execute(f"{select} WHERE {where} ORDER BY {order} LIMIT {int(self.page)}",
                                None if last is None else keyset_params(last))
            page = self.cursor.fetchall()
            yield from (self._row(schema, present, temporal, record) for record in page)
            if len(page) < self.page:
                return
            last = [page[-1][i] for i in key_at]  # bound back as the connector returned them

    @staticmethod
    def _row(schema: TableSchema, present: list[Any], temporal: list[int], record: Any) -> Row:
        values = list(record[:len(present)])
        for i, is_null in zip(temporal, record[len(present):], strict=False):
            values[i] = None if is_null else values[i]
        by_mysql = {c.mysql: i for i, c in enumerate(present)}
        return {c.name: (encode_target(c, values[by_mysql[c.name]]) if c.name in by_mysql else None)
                for c in schema.columns}

    def close(self) -> None:
        self.cursor.close()


def _keyset(key: tuple[str, ...]) -> str:
    """`k1 > ? OR (k1 = ? AND k2 > ?)`: rows after the last key read (binds from keyset_params)."""
    terms = []
    for i, name in enumerate(key):
        equal = [f"{sql.quote_ident(k)} = ?" for k in key[:i]]
        terms.append("(" + " AND ".join([*equal, f"{sql.quote_ident(name)} > ?"]) + ")")
    return " OR ".join(terms)
