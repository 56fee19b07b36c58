"""A Snowflake table's declared primary key made to follow a MySQL key change (issue #30; cdc.spark.rekey).

spark-merge ends a run before a key change, so every batch holds changes under one key, and its schema
position names it: snowflake-apply's MERGE matches on the key in force at the batch's position. What is left
is the table's declared PRIMARY KEY, which Snowflake does not enforce but tools read: before the first batch
under a new key, it is dropped and declared again (`ALTER TABLE ... DROP PRIMARY KEY / ADD PRIMARY KEY`), and
the old key's columns that are no longer in it lose their NOT NULL (cdc puts NOT NULL only on key columns;
MySQL may now hold NULL there). The declared key is read back (SHOW PRIMARY KEYS) each time, so a run killed
between the steps finishes them on its rerun.

An engine that refuses `DROP PRIMARY KEY` as syntax (the local stand-in, fakesnow over DuckDB, enforces
the old key and cannot drop it) gets the table rebuilt instead: a copy with the new key replaces it. Only
there: on Snowflake a rebuild would lose the table's grants, streams and Time Travel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc import sql
from cdc.errors import CdcError
from cdc.schema import TableSchema
from cdc.snowflake import names

_Q = sql.quote_ident
Execute = Callable[..., list[tuple[Any, ...]]]


def key_changed(schema: TableSchema, versions: list[TableSchema], since: str | None) -> bool:
    """Whether the key at the batch's version differs from the one at `since` (any earlier one when unknown)."""
    earlier = [v for v in versions if since is None or v.position <= since]
    if since is not None:
        earlier = earlier[-1:]
    return any(not v.same_key(schema) for v in earlier)


def declared_key(execute: Execute, table: str) -> list[str]:
    """The table's declared primary key columns, in key order (SHOW PRIMARY KEYS: column_name, key_sequence)."""
    rows = execute(f"SHOW PRIMARY KEYS IN TABLE {_Q(table)}")
    return [str(r[4]) for r in sorted(rows, key=lambda r: int(r[5]))]


def rekey(execute: Execute, table: str, key: tuple[str, ...], *, drop_unkeyed: bool = True,
          not_null: bool = False) -> list[str]:
    """Declare `key` (Snowflake column names) as `table`'s primary key, or none when it is empty (MySQL's key was
    dropped: the rows are a multiset now and copies may follow); what was done (nothing if it already is).

    drop_unkeyed: delete the rows with NULL in a new key column first. MySQL's key columns are never NULL: such a
    row's key was assigned by the ALTER (`ADD COLUMN id INT AUTO_INCREMENT PRIMARY KEY`) and is in no binlog
    event, so no later change could find the row; the table is flagged for the re-snapshot that brings it back.
    not_null: the key columns made NOT NULL first, as bootstrap declares them (a key column was just converted:
    the column that replaced it was added nullable).
    """
    declared = declared_key(execute, table)
    if sorted(declared) == sorted(key):
        return []
    done = []
    if drop_unkeyed and key:
        execute(f"DELETE FROM {_Q(table)} WHERE {' OR '.join(f'{_Q(k)} IS NULL' for k in key)}")
        done.append(f"rows of {table} without a value in the new key deleted (a re-snapshot brings them back)")
    for column in key if not_null else ():
        execute(f"ALTER TABLE {_Q(table)} ALTER COLUMN {_Q(column)} SET NOT NULL")
    if declared:
        try:
            execute(f"ALTER TABLE {_Q(table)} DROP PRIMARY KEY")
        except CdcError as exc:
            if "syntax error" not in exc.message:
                raise
            return done + _rebuild(execute, table, key)
    for column in declared:
        if column not in key:
            execute(f"ALTER TABLE {_Q(table)} ALTER COLUMN {_Q(column)} DROP NOT NULL")
    if not key:
        return done + [f"primary key ({', '.join(declared)}) of {table} dropped"]
    execute(f"ALTER TABLE {_Q(table)} ADD PRIMARY KEY ({', '.join(_Q(k) for k in key)})")
    return done + [f"primary key of {table} changed from ({', '.join(declared)}) to ({', '.join(key)})"]


def undeclare(execute: Execute, table: str) -> list[str]:
    """The table's declared primary key dropped, so that a key column can be converted to a new type (a new column
    filled by a cast replaces it: cdc.snowflake.evolve; no engine drops a column its declared key holds); `rekey`
    declares the key again after. Nothing if none is declared (a rerun after this step)."""
    if not declared_key(execute, table):
        return []
    try:
        execute(f"ALTER TABLE {_Q(table)} DROP PRIMARY KEY")
    except CdcError as exc:
        if "syntax error" not in exc.message:
            raise
        return _rebuild(execute, table, (), why="to convert a key column")
    return [f"primary key of {table} dropped to convert a key column"]


def _rebuild(execute: Execute, table: str, key: tuple[str, ...], why: str = "as MySQL's was dropped") -> list[str]:
    """The table replaced by a copy declaring `key`, or none (an engine that cannot drop a primary key: see above)."""
    scratch = names.derived_name(table, "_CDC_REKEY")
    execute(f"CREATE OR REPLACE TABLE {_Q(scratch)} AS SELECT * FROM {_Q(table)}")
    if key:
        execute(f"ALTER TABLE {_Q(scratch)} ADD PRIMARY KEY ({', '.join(_Q(k) for k in key)})")
    execute(f"DROP TABLE {_Q(table)}")
    execute(f"ALTER TABLE {_Q(scratch)} RENAME TO {_Q(table)}")
    return [f"table {table} rebuilt with primary key ({', '.join(key)})" if key else
            f"table {table} rebuilt without its primary key, {why}"]
