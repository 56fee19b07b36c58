"""Read a table's current schema from the server's information_schema (cdc.schema is the model it fills).

Today's schema is consulted where the binlog says nothing: the snapshot's tables, bootstrap's DDL, and the
hints tail borrows for what a table map does not carry (MariaDB's JSON flag, the exact COLUMN_TYPE).
"""

from __future__ import annotations

import re
from typing import Any

import pymysql

from cdc.schema import Column, ForeignKey, TableSchema, parse_labels
from cdc.source.connect import query

# The server's own databases: never captured, never scanned for keys.
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


def read_table_schema(conn: pymysql.Connection, db: str, table: str, position: str = "", *,
                      foreign_keys: bool = True) -> TableSchema | None:
    """The current schema of one table from information_schema, or None if it does not exist.

    foreign_keys=False leaves the keys between tables out (own and referencing both empty): reading the ones
    that reference the table opens every table of every user database (select_foreign_keys), which a caller
    that only needs the columns and the table's key (the snapshot's pass before its consistent point) skips.
    """
    rows = query(
        conn,
        "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, "
        "CHARACTER_SET_NAME, DATETIME_PRECISION, COLUMN_KEY FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (db, table),
    )
    if not rows:
        return None
    json_columns = _mariadb_json_columns(conn, db, table)
    columns = tuple(_column_from_row(r, json_columns) for r in rows)
    pk_rows = query(
        conn,
        "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
        "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
        (db, table),
    )
    key = tuple(_text(r["COLUMN_NAME"]) for r in pk_rows) or _unique_not_null_key(conn, db, table, columns)
    own, referencing = read_foreign_keys(conn, db, table) if foreign_keys else ((), ())
    return TableSchema(db, table, columns, key, position, own, referencing)


def _unique_not_null_key(conn: pymysql.Connection, db: str, table: str, columns: tuple[Column, ...]) -> tuple[str, ...]:
    """The key of a table without a primary key: its first UNIQUE index whose columns are all NOT NULL, or ().

    The server itself promotes that index to the table's primary key (InnoDB clusters by it, and the
    binlog's table map flags its columns as the primary key), so snapshot and tail agree on it. Its
    columns in table order, as the table map lists them. A prefix index (`UNIQUE (name(10))`) is not a
    key of the full values and is skipped, as the server skips it.
    """
    quoted = ".".join("`" + name.replace("`", "``") + "`" for name in (db, table))
    rows = query(conn, f"SHOW INDEX FROM {quoted}")  # in the server's key order
    indexes: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        indexes.setdefault(_text(r["Key_name"]), []).append(r)
    for parts in indexes.values():
        if all(int(p["Non_unique"]) == 0 and _text(p["Null"] or "") != "YES" and p["Sub_part"] is None
               and p["Column_name"] is not None for p in parts):  # MySQL 8 functional key parts have no column
            names = {_text(p["Column_name"]) for p in parts}
            return tuple(c.name for c in columns if c.name in names)
    return ()


def read_foreign_keys(conn: pymysql.Connection, db: str, table: str) -> tuple[tuple[ForeignKey, ...], tuple[ForeignKey, ...]]:
    """The table's own foreign keys and the other tables' keys that reference it, each in a stable order.

    Columns and their order from KEY_COLUMN_USAGE, ON DELETE / ON UPDATE from REFERENTIAL_CONSTRAINTS
    (https://dev.mysql.com/doc/refman/8.0/en/information-schema-referential-constraints-table.html).
    A referencing key may sit in any database, so each database is read on its own (see select_foreign_keys).
    """
    own = select_foreign_keys(conn, db, table=table)
    referencing = [key for schema in user_databases(conn)
                   for key in select_foreign_keys(conn, schema, references=(db, table))]
    return tuple(own), tuple(referencing)


def user_databases(conn: pymysql.Connection) -> list[str]:
    """The server's databases but its own system ones, in name order (SCHEMATA opens no table)."""
    marks = ", ".join(["%s"] * len(SYSTEM_SCHEMAS))
    rows = query(conn, f"SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN ({marks}) "
                 "ORDER BY SCHEMA_NAME", SYSTEM_SCHEMAS)
    return [_text(r["SCHEMA_NAME"]) for r in rows]


def select_foreign_keys(conn: pymysql.Connection, schema: str, *, table: str | None = None,
                        references: tuple[str, str] | None = None) -> list[ForeignKey]:
    """The foreign keys of the tables of `schema` (of one `table` of it), optionally only those that reference
    the table `references` = (db, table).

    Both information_schema tables are pinned to constants of their own: MariaDB fills an information_schema
    table by opening every table of the databases it cannot rule out, and it rules a database out only by an
    equality with a constant on that table's own columns (EXPLAIN: "Scanned 1 database" against "Scanned all
    databases"; an IN list or a join column does not count). The old single query with an OR and a plain join
    opened every table of the server on each read, and MariaDB 10.11 crashed in it when a temporary table failed
    under concurrent DDL.
    """
    where, params = "k.TABLE_SCHEMA = %s", [schema]
    on, on_params = "r.CONSTRAINT_SCHEMA = %s", [schema]
    if table is not None:
        where, params = where + " AND k.TABLE_NAME = %s", params + [table]
        on, on_params = on + " AND r.TABLE_NAME = %s", on_params + [table]
    if references is not None:
        where, params = where + " AND k.REFERENCED_TABLE_SCHEMA = %s AND k.REFERENCED_TABLE_NAME = %s", [
            *params, *references]
    rows = query(
        conn,
        "SELECT k.CONSTRAINT_NAME, k.TABLE_SCHEMA, k.TABLE_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA, "
        "k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.UPDATE_RULE, r.DELETE_RULE "
        "FROM information_schema.KEY_COLUMN_USAGE k STRAIGHT_JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
        f"ON {on} AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME "
        f"WHERE k.REFERENCED_TABLE_NAME IS NOT NULL AND {where} "
        "ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION",
        on_params + params,
    )
    return foreign_keys_from_rows(rows)


def foreign_keys_from_rows(rows: list[dict[str, Any]]) -> list[ForeignKey]:
    """KEY_COLUMN_USAGE x REFERENTIAL_CONSTRAINTS rows (one per column, in ORDINAL_POSITION order) -> keys."""
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault((_text(r["TABLE_SCHEMA"]), _text(r["TABLE_NAME"]), _text(r["CONSTRAINT_NAME"])), []).append(r)
    keys = []
    for (db, table, name), parts in grouped.items():
        first = parts[0]
        keys.append(ForeignKey(
            name=name, db=db, table=table, columns=tuple(_text(p["COLUMN_NAME"]) for p in parts),
            ref_db=_text(first["REFERENCED_TABLE_SCHEMA"]), ref_table=_text(first["REFERENCED_TABLE_NAME"]),
            ref_columns=tuple(_text(p["REFERENCED_COLUMN_NAME"]) for p in parts),
            on_delete=_text(first["DELETE_RULE"]).upper(), on_update=_text(first["UPDATE_RULE"]).upper()))
    return keys


def _mariadb_json_columns(conn: pymysql.Connection, db: str, table: str) -> set[str]:
    """MariaDB stores JSON as LONGTEXT with a json_valid() check: find those columns."""
    try:
        rows = query(
            conn,
            "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
            (db, table),
        )
    except pymysql.err.MySQLError:  # MySQL 8's CHECK_CONSTRAINTS has no TABLE_NAME; it has a real JSON type
        return set()
    found = set()
    for r in rows:
        match = re.fullmatch(r"json_valid\(`((?:[^`]|``)+)`\)", _text(r["CHECK_CLAUSE"]).strip(), re.IGNORECASE)
        if match:
            found.add(match[1].replace("``", "`"))
    return found


def _column_from_row(r: dict[str, Any], json_columns: set[str]) -> Column:
    column_type = _text(r["COLUMN_TYPE"])
    data_type = _text(r["DATA_TYPE"]).lower()
    if _text(r["COLUMN_NAME"]) in json_columns and data_type == "longtext":
        data_type = column_type = "json"
    labels = parse_labels(column_type)
    return Column(
        name=_text(r["COLUMN_NAME"]),
        type=column_type,
        data_type=data_type,
        unsigned="unsigned" in column_type.lower(),
        nullable=_text(r["IS_NULLABLE"]) == "YES",
        precision=_int(r["NUMERIC_PRECISION"]) if data_type == "decimal" else None,
        scale=_int(r["NUMERIC_SCALE"]) if data_type == "decimal" else None,
        charset=_text(r["CHARACTER_SET_NAME"]) if r["CHARACTER_SET_NAME"] else None,
        fsp=_int(r["DATETIME_PRECISION"]) if data_type in ("datetime", "timestamp", "time") else None,
        enum_values=labels if data_type == "enum" else None,
        set_values=labels if data_type == "set" else None,
    )


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
