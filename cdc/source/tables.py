"""What the snapshot reads: table selection, the streaming SELECT with its keyset predicate, per-column encoders.

Identifiers are always quoted with backticks and values always bound as parameters, so
hostile names (spaces, quotes, backticks, reserved words, non-ASCII) and values are safe.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Any

import pymysql
import pymysql.converters
import pymysql.cursors
from pymysql.constants import FIELD_TYPE

from cdc.config import MySQLSettings
from cdc.errors import PreconditionError, UsageError
from cdc.schema import Column, TableSchema
from cdc.source.connect import query
from cdc.source.schema_reads import SYSTEM_SCHEMAS, read_table_schema
from cdc.values import INTEGER_TYPES, TEXT_TYPES, encode_value

_GLOB_CHARS = frozenset("*?[")
# What PyMySQL already returns in change-log form for these types: skip the encoder call.
_NATIVE: dict[str, type] = {**{t: int for t in INTEGER_TYPES}, **{t: str for t in TEXT_TYPES}, "double": float}
FETCH_BATCH = 2000
# The snapshot connection keeps temporal and DECIMAL values as the server's text: that text is
# already (almost) the change-log form, and parsing it into datetime/Decimal only to format it
# back cost more than reading the row (benchmarks/bench_snapshot.py).
RAW_TEXT_TYPES = (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIME,
                  FIELD_TYPE.DECIMAL, FIELD_TYPE.NEWDECIMAL)
RAW_CONVERSIONS = {**pymysql.converters.conversions, **{t: pymysql.converters.through for t in RAW_TEXT_TYPES}}

Encoder = Callable[[Any], Any]


def quote_ident(name: str) -> str:
    """Quote a MySQL identifier: backticks, with embedded backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


def qualified(db: str, table: str) -> str:
    return f"{quote_ident(db)}.{quote_ident(table)}"


@dataclass(frozen=True)
class TableInfo:
    """A table the selection matched, with information_schema's (approximate) size."""

    db: str
    table: str
    est_rows: int
    data_length: int

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"


@dataclass(frozen=True)
class TablePlan:
    """How one table is read: its schema, the key it is paginated and identified by, its encoders."""

    info: TableInfo
    schema: TableSchema
    key: tuple[str, ...]
    has_pk: bool

    @property
    def name(self) -> str:
        return self.info.name

    def converted_columns(self) -> list[tuple[str, Encoder]]:
        """(name, encoder) of the columns whose fetched value is not already in change-log form."""
        return [(c.name, column_encoder(c)) for c in self.schema.columns if not is_final_as_fetched(c)]


SYSTEM_VERSIONED = "SYSTEM VERSIONED"  # information_schema.TABLES.TABLE_TYPE of MariaDB's versioned tables
# MariaDB's sequences (CREATE SEQUENCE): TABLE_TYPE 'SEQUENCE' (so never snapshotted), and in the binlog a table of
# these columns whose NEXTVAL, SETVAL and ALTER SEQUENCE are rows events. A generator's state, not rows: not captured.
SEQUENCE_COLUMNS = ("next_not_cached_value", "minimum_value", "maximum_value", "start_value", "increment",
                    "cache_size", "cycle_option", "cycle_count")


def select_tables(conn: pymysql.Connection, settings: MySQLSettings) -> list[TableInfo]:
    """The base tables matching --tables / --databases minus --exclude-tables, in (db, table) order."""
    if not settings.tables and not settings.databases:
        raise UsageError(
            "no tables selected for the snapshot",
            hint="pass --tables 'db.table' (globs allowed, repeatable) or --databases db, "
            "or set mysql.tables / mysql.databases in cdc.toml",
        )
    placeholders = ", ".join(["%s"] * len(SYSTEM_SCHEMAS))
    rows = query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, TABLE_ROWS, DATA_LENGTH FROM information_schema.TABLES "
        f"WHERE TABLE_SCHEMA NOT IN ({placeholders}) ORDER BY TABLE_SCHEMA, TABLE_NAME",
        SYSTEM_SCHEMAS,
    )
    found = [
        (TableInfo(_text(r["TABLE_SCHEMA"]), _text(r["TABLE_NAME"]), int(r["TABLE_ROWS"] or 0),
                   int(r["DATA_LENGTH"] or 0)), _text(r["TABLE_TYPE"]))
        for r in rows
    ]
    _check_patterns(settings, [t for t, _ in found])
    selected = [(t, kind) for t, kind in found
                if _is_selected(t, settings) and not _matches_any(t.name, settings.exclude_tables)]
    _refuse_versioned([t.name for t, kind in selected if kind == SYSTEM_VERSIONED])
    chosen = [t for t, kind in selected if kind == "BASE TABLE"]
    if not chosen:
        raise PreconditionError(
            f"the selection (tables={list(settings.tables)}, databases={list(settings.databases)}) "
            f"matches no base table on the server",
            hint="check the names (case matters) with SHOW TABLES; views are never snapshotted",
        )
    return sorted(chosen, key=lambda t: (t.db, t.table))


def _refuse_versioned(names: list[str]) -> None:
    """MariaDB's system-versioned tables (WITH SYSTEM VERSIONING) are refused, not skipped in silence: their old
    versions are rows of the table in the binlog (an UPDATE inserts one, a DELETE closes the row), while SELECT *
    shows the current rows only, so neither a copy nor the change log would match what users query."""
    if names:
        raise PreconditionError(
            f"system-versioned tables are not supported: {', '.join(names)} (WITH SYSTEM VERSIONING: their history "
            "rows reach the binlog as row changes of the table)",
            hint=f"leave them out of capture: {exclude_setting(names)} in cdc.toml (or --exclude-tables)")


def exclude_setting(names: list[str]) -> str:
    """The cdc.toml line that leaves these db.table names out, as a user pastes it (TOML takes JSON's strings)."""
    return f"[mysql] exclude_tables = {json.dumps(names, ensure_ascii=False)}"


def _is_selected(table: TableInfo, settings: MySQLSettings) -> bool:
    return _matches_any(table.name, settings.tables) or any(
        table.db == d or fnmatchcase(table.db, d) for d in settings.databases
    )


def _matches_any(name: str, patterns: Sequence[str]) -> bool:
    # Exact comparison first: a hostile name may itself contain glob characters such as '['.
    return any(name == p or fnmatchcase(name, p) for p in patterns)


def is_captured(databases: Sequence[str], tables: Sequence[str], exclude_tables: Sequence[str], db: str,
                table: str) -> bool:
    """Whether tail's table filters (the settings' databases / tables / exclude_tables globs) capture db.table.

    Unlike a snapshot's selection, no filter at all captures every table outside the server's own schemas.
    """
    if db in SYSTEM_SCHEMAS:
        return False
    if databases and not any(fnmatchcase(db, pattern) for pattern in databases):
        return False
    name = f"{db}.{table}"
    if tables and not any(fnmatchcase(name, pattern) for pattern in tables):
        return False
    return not any(fnmatchcase(name, pattern) for pattern in exclude_tables)


def _check_patterns(settings: MySQLSettings, tables: list[TableInfo]) -> None:
    """An exact (non-glob) name that does not exist is a typo: say so rather than copy less."""
    names = {t.name for t in tables}
    dbs = {t.db for t in tables}
    for pattern in settings.tables:
        if not _GLOB_CHARS & set(pattern) and pattern not in names:
            raise PreconditionError(
                f"table {pattern!r} (from {'--tables'}) does not exist on the server",
                hint="spell it db.table exactly as SHOW TABLES does (names are case-sensitive on Linux)",
            )
    for pattern in settings.databases:
        if not _GLOB_CHARS & set(pattern) and pattern not in dbs:
            raise PreconditionError(f"database {pattern!r} (from --databases) has no tables on the server",
                                    hint="check the name with SHOW DATABASES")


def plan_table(conn: pymysql.Connection, info: TableInfo, position: str, *, allow_no_pk: bool,
               foreign_keys: bool = True) -> TablePlan:
    """Read the table's schema (inside the snapshot transaction) and choose its key; foreign_keys as
    read_table_schema's."""
    schema = read_table_schema(conn, info.db, info.table, position=position, foreign_keys=foreign_keys)
    if schema is None:
        raise PreconditionError(f"table {info.name} disappeared while the snapshot started",
                                hint="rerun cdc snapshot; drop it from --tables if it was dropped on purpose")
    if schema.primary_key:
        return TablePlan(info, schema, schema.primary_key, True)
    if not allow_no_pk:
        raise PreconditionError(
            f"table {info.name} has no primary key: its rows cannot be identified, paginated or merged exactly",
            hint=f"add a primary key to {info.name}, exclude it (--exclude-tables), or pass --allow-no-pk "
            "(the table is then replicated as a multiset of whole rows: duplicates are kept)",
        )
    return TablePlan(info, schema, tuple(schema.column_names), False)


def is_final_as_fetched(column: Column) -> bool:
    """True when PyMySQL (with RAW_CONVERSIONS) returns this column's values exactly in change-log form.

    Integers (and YEAR) arrive as int, text as str (decoded from utf8mb4, whatever the column
    charset), DOUBLE as float, DECIMAL and DATE and fsp-0 DATETIME/TIME as the server's text.
    """
    kind = column.data_type
    return (kind in _NATIVE or kind in ("year", "decimal", "date")
            or (kind in ("datetime", "time") and not column.fsp))


def column_encoder(column: Column) -> Encoder:
    """The change-log encoder of one column, resolved once per table (the hot loop calls it per value).

    Values PyMySQL already returns in change-log form pass through; the server's text of temporal
    and DECIMAL columns (RAW_CONVERSIONS) is finished here; anything else goes to cdc.values.
    """
    native = _NATIVE.get(column.data_type)
    text = _text_encoder(column)

    def encode(value: Any) -> Any:
        if value is None or type(value) is native:
            return value
        if text is not None and type(value) is str:
            return text(value)
        return encode_value(column, value)

    return encode


def _text_encoder(column: Column) -> Encoder | None:
    """Server text -> change-log text (docs/formats.md): 6 fraction digits when fsp > 0, TIMESTAMP as ISO UTC.

    The server prints DECIMAL with exactly its scale, DATE/DATETIME/TIME as the change log spells
    them (zero and partial-zero dates included) and fractions with exactly fsp digits.
    """
    kind = column.data_type
    pad = "0" * (6 - column.fsp) if column.fsp else ""
    if kind in ("decimal", "date") or (kind in ("datetime", "time") and not pad):
        return _same
    if kind in ("datetime", "time"):
        return lambda v: v + pad
    if kind == "timestamp":
        return lambda v: v.replace(" ", "T") + pad + "Z"
    return None


def _same(value: Any) -> Any:
    return value


# MariaDB's max_statement_time, MySQL's max_execution_time (SELECT only); each server lacks the other's.
STATEMENT_TIME_UNLIMITED = ("SET SESSION max_statement_time = 0", "SET SESSION max_execution_time = 0")


def prepare_session(conn: pymysql.Connection) -> None:
    """Session settings of every connection that reads snapshot rows."""
    with conn.cursor() as cursor:
        # TIMESTAMP columns are returned in the session time zone: make it UTC (docs/formats.md).
        cursor.execute("SET SESSION time_zone = '+00:00'")
        # A table is streamed unbuffered; give the server time to push it if we are slow to read.
        cursor.execute("SET SESSION net_write_timeout = 600")
        # One SELECT reads a whole table, for hours on a big one: a server-wide statement time limit
        # (a common guard against runaway queries) must not cut it off.
        for statement in STATEMENT_TIME_UNLIMITED:
            try:
                cursor.execute(statement)
                break
            except pymysql.err.MySQLError:
                continue  # the other flavour's variable


def select_sql(plan: TablePlan, *, after_key: bool, limit: int | None) -> str:
    """SELECT of the rows whose key sorts after the last one read (all, or at most `limit`), in key order.

    The keyset predicate is spelled out as `k1 > ? OR (k1 = ? AND k2 > ?) ...` instead of the
    row constructor `(k1, k2) > (?, ?)`: MariaDB 10.11 plans the latter as a full index scan,
    which makes every resumed or helper query read the table from its start; the OR form is a range.
    """
    columns = ", ".join(_select_expression(c) for c in plan.schema.columns)
    sql = f"SELECT {columns} FROM {qualified(plan.info.db, plan.info.table)}"
    order = " ORDER BY " + ", ".join(quote_ident(k) for k in plan.key) if plan.has_pk else ""
    if after_key:
        # PyMySQL %-formats a statement that has parameters: a '%' in a name must be doubled there.
        sql = f"{sql.replace('%', '%%')} WHERE {keyset_predicate(plan.key)}"
        order = order.replace("%", "%%")
    sql += order
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql


def _select_expression(column: Column) -> str:
    name = quote_ident(column.name)
    if column.data_type == "float":
        # The text protocol shows FLOAT with 6 significant digits (635107 for 635107.44f); widened
        # to DOUBLE it is exact, and cdc.values makes it the shortest decimal that round-trips.
        return f"{name} + 0E0 AS {name}"
    return name


def keyset_predicate(key: Sequence[str]) -> str:
    """`k1 > %s OR (k1 = %s AND k2 > %s) ...`, for a statement with parameters ('%' in names doubled)."""
    terms = []
    names = [quote_ident(k).replace("%", "%%") for k in key]
    for i, name in enumerate(names):
        equal = [f"{k} = %s" for k in names[:i]]
        terms.append("(" + " AND ".join([*equal, f"{name} > %s"]) + ")")
    return " OR ".join(terms)


def keyset_params(last: Sequence[Any]) -> list[Any]:
    """Parameters for keyset_predicate: term i binds last[0..i]."""
    params: list[Any] = []
    for i in range(len(last)):
        params.extend(last[: i + 1])
    return params


def stream_rows(conn: pymysql.Connection, sql: str, params: Sequence[Any] | None) -> Iterator[tuple[Any, ...]]:
    """Rows of one SELECT, fetched unbuffered so a big chunk never sits in memory twice."""
    with conn.cursor(pymysql.cursors.SSCursor) as cursor:
        cursor.execute(sql, params)
        while True:
            batch = cursor.fetchmany(FETCH_BATCH)
            if not batch:
                return
            yield from batch


def bindable_key(plan: TablePlan, encoded: Sequence[Any]) -> list[Any]:
    """Turn a key saved in the checkpoint (change-log form) back into values to bind in the keyset query.

    Needed only when a run resumes; within a run the raw values PyMySQL returned are bound.
    """
    return [_bindable(plan.schema.column(name), value) for name, value in zip(plan.key, encoded, strict=False)]


def _bindable(column: Column, value: Any) -> Any:
    kind = column.data_type
    if value is None:
        return None
    if kind in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return base64.b64decode(value)
    if kind == "decimal":
        return Decimal(value)  # a string would be compared as a double
    if kind == "timestamp":
        return value.replace("T", " ").rstrip("Z")
    if kind == "enum":
        # ORDER BY sorts an ENUM by its index, so compare by index too (a label compares as text).
        labels = column.enum_values or ()
        return labels.index(value) + 1 if value in labels else 0
    if kind == "set":
        labels = column.set_values or ()
        return sum(1 << labels.index(label) for label in value if label in labels)
    if kind in ("datetime", "date") and not value.startswith("0000"):
        return dt.datetime.fromisoformat(value) if kind == "datetime" else dt.date.fromisoformat(value)
    return value


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)
