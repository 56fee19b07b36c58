"""Column rules (exclude / hash a column) as every stage must see them.

Capture (snapshot, tail) applies the rules to values before anything reaches disk. The schema
history keeps the source's real column types, because tail needs them to decode binlog rows;
every stage downstream (spark-merge, Snowflake, verify) reads the history through `mask`, so an
excluded column does not exist for them and a hashed one is the 64-character hex string it holds
in the change log, whatever its type in MySQL.

The rules are fixed per state directory (`column-rules.json`, written by the first capture):
a restart that forgot a flag must not write clear values beside hashed ones.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from cdc.config import MySQLSettings
from cdc.errors import UsageError
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.state import StateDir, read_json, write_json_atomic

RULES_FILE = "column-rules.json"
RULES_VERSION = 1
HASHED_TYPE = "char(64)"  # sha256 as lower-case hex


def split_column(spec: str, option: str) -> tuple[str, str, str]:
    parts = spec.split(".")
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"{option} {spec!r} is not DB.TABLE.COLUMN", hint=f"e.g. {option} shop.customers.email")
    return parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class ColumnRules:
    """DB.TABLE.COLUMN globs (fnmatch, case-sensitive) of columns never written / written as sha256 hex."""

    exclude_columns: tuple[str, ...] = ()
    hash_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        excluded = {split_column(s, "--exclude-columns") for s in self.exclude_columns}
        hashed = {split_column(s, "--hash-columns") for s in self.hash_columns}
        if excluded & hashed:
            raise UsageError(f"columns both excluded and hashed: {sorted('.'.join(c) for c in excluded & hashed)}")

    @classmethod
    def from_settings(cls, mysql: MySQLSettings) -> ColumnRules:
        return cls(mysql.exclude_columns, mysql.hash_columns)

    def check_key(self, schema: TableSchema) -> None:
        """Refuse rules that touch the key (the primary key, or every column of a table without one).

        Rows are identified, paginated and merged by their key, so it must stay as the source has it.
        Snapshot and tail both call this, so a table is refused by both or by neither.
        """
        excluded, hashed = self.columns(schema.db, schema.table)
        touched = (excluded | hashed) & set(schema.primary_key or schema.column_names)
        if touched:
            raise UsageError(
                f"{schema.db}.{schema.table}: exclude_columns/hash_columns name key column(s) {sorted(touched)} "
                "(the primary key, or every column without one); rows are identified, paginated and merged "
                "by their key, so it must stay as the source has it",
                hint=f"drop those columns from the rules, or leave {schema.db}.{schema.table} out (exclude_tables)")

    def columns(self, db: str, table: str) -> tuple[frozenset[str], frozenset[str]]:
        """(excluded, hashed) column names of one table."""
        return _matching(self.exclude_columns, "--exclude-columns", db, table), \
            _matching(self.hash_columns, "--hash-columns", db, table)

    def mask(self, schema: TableSchema) -> TableSchema:
        """The table as the change log holds it: excluded columns gone, hashed ones char(64) text."""
        excluded, hashed = self.columns(schema.db, schema.table)
        if not excluded and not hashed:
            return schema
        columns = tuple(_hashed(c) if c.name in hashed else c for c in schema.columns if c.name not in excluded)
        # Fills (values older rows hold in an added column) are values too: masked like the change lines.
        fills = {k: hash_value(v) if k in hashed and v is not None else v for k, v in schema.fills.items()
                 if k not in excluded}
        return replace(schema, columns=columns, fills=fills)

    def row_masker(self, schema: TableSchema) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """Rows in change-log form (column -> value) of `schema` -> as capture writes them under the rules."""
        excluded, hashed = self.columns(schema.db, schema.table)
        if not excluded and not hashed:
            return lambda row: row

        def masked(row: dict[str, Any]) -> dict[str, Any]:
            return {k: hash_value(v) if k in hashed else v for k, v in row.items() if k not in excluded}
        return masked

    def to_dict(self) -> dict[str, object]:
        return {"version": RULES_VERSION, "exclude_columns": sorted(set(self.exclude_columns)),
                "hash_columns": sorted(set(self.hash_columns))}


def _matching(specs: tuple[str, ...], option: str, db: str, table: str) -> frozenset[str]:
    found = set()
    for spec in specs:
        d, t, c = split_column(spec, option)
        if fnmatch.fnmatchcase(db, d) and fnmatch.fnmatchcase(table, t):
            found.add(c)
    return frozenset(found)


def hash_value(value: Any) -> str | None:
    """sha256 hex of a value as the change log would hold it (strings: their UTF-8; else their JSON)."""
    if value is None:
        return None
    data = value.encode("utf-8") if isinstance(value, str) else orjson.dumps(value)
    return hashlib.sha256(data).hexdigest()


def _hashed(column: Column) -> Column:
    return Column(name=column.name, type=HASHED_TYPE, data_type="char", nullable=column.nullable, charset="ascii")


def read_rules(state: StateDir) -> ColumnRules:
    """The rules the state directory's change log was written with (none if nothing was captured yet)."""
    path = state.root / RULES_FILE
    document = read_json(path) or {}
    try:
        return ColumnRules(tuple(document.get("exclude_columns", ())), tuple(document.get("hash_columns", ())))
    except (TypeError, UsageError) as exc:
        raise UsageError(f"{path} is corrupt ({exc})", hint="restore it: it records which columns are masked") from exc


def bind_rules(state: StateDir, rules: ColumnRules) -> None:
    """Record the rules a capture writes with, or refuse rules other than the recorded ones."""
    path = state.root / RULES_FILE
    known = read_json(path)
    wanted = rules.to_dict()
    if known is None:
        write_json_atomic(path, wanted)
        return
    if known != wanted:
        raise UsageError(
            f"state directory {state.root} was captured with exclude_columns={known.get('exclude_columns')} "
            f"hash_columns={known.get('hash_columns')}, but this run asks for "
            f"exclude_columns={wanted['exclude_columns']} hash_columns={wanted['hash_columns']}; "
            "the change log would mix clear and masked values of the same columns",
            hint="set the rules once in cdc.toml ([mysql] exclude_columns / hash_columns) so every command uses "
            f"them; to change them on purpose, start a new --state-dir and snapshot again (or remove {path} "
            "if lines already written may keep their old form)",
        )


def masked_history(state: StateDir) -> SchemaHistory:
    """The schema history as stages downstream of capture must read it (see the module docstring)."""
    return SchemaHistory(state.schema, mask=read_rules(state).mask)
