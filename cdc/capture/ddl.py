"""Recognise the DDL statements downstream stages must act on: ALTER, RENAME, TRUNCATE, DROP, CREATE TABLE, and
DROP DATABASE (a DROP of each of its tables).

The binlog carries DDL as query text. We only need the kind and the table names it touches, not
a full parse: the new column list arrives with the next table map (binlog_row_metadata=FULL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+)"
_NAME = rf"({_IDENT}(?:\s*\.\s*{_IDENT})?)"
_COMMENT = re.compile(r"/\*(?!!).*?\*/|--[^\n]*|#[^\n]*", re.DOTALL)
_VERSIONED = re.compile(r"/\*!\d*\s*(.*?)\*/", re.DOTALL)
_IF = r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"

_ALTER = re.compile(rf"^ALTER\s+((?:ONLINE\s+|IGNORE\s+)*)TABLE\s+{_IF}{_NAME}(.*)$", re.I | re.S)
# ALTER IGNORE (MariaDB) adding a unique key deletes the rows that duplicate it, with no row event; over-counted: any
# UNIQUE or PRIMARY in its clauses (a column added UNIQUE NOT NULL DEFAULT 0 keeps one row).
_UNIQUE = re.compile(r"\b(?:UNIQUE|PRIMARY)\b", re.I)
IGNORE_DEDUPE = "ALTER IGNORE TABLE added a unique key: the rows duplicating it were deleted with no row event"
_RENAME = re.compile(r"^RENAME\s+TABLES?\s+(.*)$", re.I | re.S)
_RENAME_PAIR = re.compile(rf"\s*{_NAME}\s+TO\s+{_NAME}\s*", re.I | re.S)
_TRUNCATE = re.compile(rf"^TRUNCATE\s+(?:TABLE\s+)?{_NAME}\s*$", re.I | re.S)
_DROP = re.compile(rf"^DROP\s+(?:TEMPORARY\s+)?TABLES?\s+{_IF}(.*?)(?:\s+(?:RESTRICT|CASCADE))?\s*$", re.I | re.S)
_DROP_DATABASE = re.compile(rf"^DROP\s+(?:DATABASE|SCHEMA)\s+{_IF}({_IDENT})\s*$", re.I | re.S)
_CREATE = re.compile(rf"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+{_IF}{_NAME}", re.I | re.S)


@dataclass(frozen=True)
class TableDdl:
    """One table touched by a DDL statement."""

    kind: str  # alter | rename | truncate | drop | create
    db: str
    table: str
    new_db: str | None = None
    new_table: str | None = None
    # An ALTER's text after the table name (cdc.capture.alter reads its column changes); not part of its identity.
    clauses: str = field(default="", compare=False)
    # Why the statement left the table's rows other than its row events say (cdc.capture.partitions); "" if not.
    rows_changed: str = field(default="", compare=False)
    # ALTER IGNORE: conversion errors became warnings, as in a non-strict session (cdc.schema.retype).
    ignore: bool = field(default=False, compare=False)


def _unquote(ident: str) -> str:
    ident = ident.strip()
    if ident.startswith("`") and ident.endswith("`"):
        return ident[1:-1].replace("``", "`")
    return ident


def _split_name(name: str, default_db: str) -> tuple[str, str]:
    parts = re.findall(_IDENT, name)
    if len(parts) == 2:
        return _unquote(parts[0]), _unquote(parts[1])
    return default_db, _unquote(parts[0])


def clean_statement(sql: str) -> str:
    """The statement without its comments (versioned comments' text kept), trimmed of spaces and a final ';'."""
    text = _VERSIONED.sub(r"\1", sql)
    return _COMMENT.sub(" ", text).strip().rstrip(";").strip()


def parse_ddl(sql: str, default_db: str) -> list[TableDdl]:
    """The tables a statement changes, in statement order; [] for anything that is not table DDL."""
    text = clean_statement(sql)
    if match := _ALTER.match(text):
        db, table = _split_name(match[2], default_db)
        ignore = "IGNORE" in match[1].upper()
        renamed, others = _rename_clause(match[3])
        if renamed is not None:
            db, table = new_db, new_table = _split_name(renamed, db)
        # The other clauses act on the renamed table: after the move (their fills read under the new name).
        rest = _partition_ddl(TableDdl("alter", db, table, clauses=match[3], ignore=ignore), default_db) \
            if renamed is None or others else []
        if ignore and rest and _UNIQUE.search(match[3]) and not rest[0].rows_changed:
            rest[0] = replace(rest[0], rows_changed=IGNORE_DEDUPE)
        if renamed is None:
            return rest
        old_db, old_table = _split_name(match[2], default_db)
        return [TableDdl("rename", old_db, old_table, new_db, new_table), *rest]
    if match := _RENAME.match(text):
        found = []
        for pair in _split_top_level(match[1]):
            if m := _RENAME_PAIR.fullmatch(pair):
                db, table = _split_name(m[1], default_db)
                new_db, new_table = _split_name(m[2], default_db)
                found.append(TableDdl("rename", db, table, new_db, new_table))
        return found
    if match := _TRUNCATE.match(text):
        return [TableDdl("truncate", *_split_name(match[1], default_db))]
    if match := _DROP.match(text):
        return [TableDdl("drop", *_split_name(name, default_db)) for name in _split_top_level(match[1])]
    if match := _CREATE.match(text):
        created = TableDdl("create", *_split_name(match[1], default_db))
        # MariaDB's CREATE OR REPLACE drops the table it replaces first (a temporary one replaces no base table).
        replaces = re.match(r"CREATE\s+OR\s+REPLACE\s+TABLE\b", text, re.I) is not None
        return [replace(created, kind="drop"), created] if replaces else [created]
    return []


def dropped_database(sql: str) -> str | None:
    """The database a `DROP DATABASE` / `DROP SCHEMA` removes, or None. Its tables go with no row event and no DROP
    TABLE of their own (a database reloaded from a dump: DROP DATABASE, CREATE DATABASE, the dump): tail writes a
    drop line for each table of it that it knows (cdc.capture.schemas.SchemaRecorder.tables_of)."""
    match = _DROP_DATABASE.match(clean_statement(sql))
    return _unquote(match[1]) if match else None


def _partition_ddl(alter: TableDdl, default_db: str) -> list[TableDdl]:
    """An ALTER with what its partition clauses did to rows: the altered table's reason, and the other table of
    an EXCHANGE or CONVERT as a line of its own (its rows changed, were made or are gone)."""
    from cdc.capture.partitions import partition_effects

    effects = partition_effects(alter.clauses, alter.table)
    if effects.truncated:
        return [replace(alter, kind="truncate", clauses="")]
    found = [replace(alter, rows_changed=effects.reason)]
    for other in effects.others:  # unqualified: the session's default database, as the server reads it
        found.append(TableDdl(other.kind, other.db or default_db, other.table, rows_changed=other.reason))
    return found


def _rename_clause(clauses: str) -> tuple[str | None, bool]:
    """An ALTER's `RENAME [TO|AS] name` clause (the new name as written), and whether other clauses come with it."""
    from cdc.capture.alter import split_clauses

    parts = split_clauses(clauses)
    for part in parts:
        words = part.split(None, 1)
        if len(words) == 2 and words[0].upper() == "RENAME":
            name = re.sub(r"^(?:TO|AS)\s+", "", words[1].strip(), flags=re.I)
            if re.fullmatch(_NAME, name) and not re.match(r"(?:COLUMN|INDEX|KEY)\b", name, re.I):
                return name, len(parts) > 1
    return None, False


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside backquotes."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == "`":
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def opens_transaction(sql: str) -> bool:
    """MySQL 8.0.21+ logs CREATE TABLE ... SELECT as one transaction, its CREATE ending in START TRANSACTION
    (https://dev.mysql.com/doc/refman/8.0/en/create-table-select.html): rows and an Xid follow."""
    return sql.rstrip().rstrip(";").upper().endswith("START TRANSACTION")
