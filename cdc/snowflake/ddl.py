"""Target descriptions built from MySQL schemas, and every Snowflake statement rendered from them.

The templates (templates/snowflake/*.sql.j2) hold the SQL; this module decides names and types
and hands the templates pre-quoted identifiers, so no template ever quotes anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc import sql
from cdc.schema import TableSchema
from cdc.snowflake import names
from cdc.snowflake.typemap import snowflake_type

T = "snowflake/"
CDC_COLUMNS = (("_CDC_POSITION", "VARCHAR", True), ("_CDC_COMMIT_TS", "TIMESTAMP_TZ(6)", False),
               ("_CDC_OP", "VARCHAR(1)", True))
SOFT_DELETE_COLUMNS = (("_CDC_DELETED", "BOOLEAN", False), ("_CDC_DELETED_AT", "TIMESTAMP_TZ(6)", False))
HISTORY_COLUMNS = CDC_COLUMNS + (("_CDC_VALID_FROM", "TIMESTAMP_TZ(6)", False),
                                 ("_CDC_VALID_TO", "TIMESTAMP_TZ(6)", False), ("_CDC_IS_CURRENT", "BOOLEAN", True))


@dataclass(frozen=True)
class TargetColumn:
    mysql: str
    name: str  # Snowflake spelling, unquoted
    type: str
    nullable: bool


@dataclass(frozen=True)
class Target:
    """One replicated table: where it comes from and what it is called and typed as in Snowflake."""

    db: str
    table: str
    name: str
    columns: tuple[TargetColumn, ...]
    key: tuple[str, ...]  # Snowflake column names of the primary key; empty for a table without one

    @property
    def keyless(self) -> bool:
        """No key: a multiset of full rows, applied by `replace_rows` instead of a MERGE."""
        return not self.key

    @property
    def source(self) -> str:
        return f"{self.db}.{self.table}"

    @property
    def history(self) -> str:
        return names.derived_name(self.name, "_HISTORY")

    def column_types(self, *, soft_delete: bool) -> dict[str, str]:
        """Snowflake column -> type, cdc's columns included (what the table should have)."""
        found = {c.name: c.type for c in self.columns}
        extra = CDC_COLUMNS + (SOFT_DELETE_COLUMNS if soft_delete else ())
        return found | {name: kind for name, kind, _ in extra}


def build_target(schema: TableSchema, name: str, *, decimal_overflow: str = "varchar") -> Target:
    """Describe the Snowflake table for one MySQL table (no key: a multiset of rows, see `replace_rows`)."""
    where = f"{schema.db}.{schema.table}"
    mapped = names.column_names(where, schema.column_names)
    columns = tuple(
        TargetColumn(c.name, mapped[c.name], snowflake_type(c, table=where, decimal_overflow=decimal_overflow),
                     c.nullable and c.name not in schema.primary_key)
        for c in schema.columns
    )
    return Target(schema.db, schema.table, name, columns, tuple(mapped[k] for k in schema.primary_key))


def _q(name: str) -> str:
    return sql.quote_ident(name)


def from_json(column: TargetColumn, image: str = '"IMG"') -> str:
    """Expression turning the change-log JSON value (docs/formats.md, Values) into the column's type."""
    value = f'{image}:{_q(column.mysql)}'
    kind = column.type.split("(")[0]
    text = f"{value}::VARCHAR"
    if kind in ("DATE", "TIMESTAMP_NTZ", "TIMESTAMP_TZ"):
        # Zero dates ("0000-00-00") have no calendar value: NULL, or 0001-01-01 in a NOT NULL column
        # (the same rule as the lake, cdc/spark/types.py).
        parsed = f"TRY_TO_{kind}({text})" if kind == "DATE" else f"TRY_TO_{kind}({text})::{column.type}"
        return parsed if column.nullable else f"COALESCE({parsed}, '0001-01-01'::{column.type})"
    if kind == "BINARY":
        return f"BASE64_DECODE_BINARY({text})"
    if kind == "VARIANT":
        return f"PARSE_JSON({text})"  # JSON travels as the text of the document
    if kind == "ARRAY":
        return f"{value}::ARRAY"
    return f"{value}::{column.type}"


def table_context(target: Target, *, stage_path: str = "") -> dict[str, Any]:
    """Everything the templates need about one table, identifiers already quoted."""
    key = [_q(k) for k in target.key]
    by_name = {c.name: c for c in target.columns}
    key_json = [from_json(by_name[k], '"R":"before"') for k in target.key]
    key_after = [from_json(by_name[k], '"R":"after"') for k in target.key]
    return {
        "name": _q(target.name),
        "history": _q(target.history),
        "landing": _q(names.derived_name(target.name, "_LANDING")),
        "pipe": _q(names.derived_name(target.name, "_PIPE")),
        "stream": _q(names.derived_name(target.name, "_STREAM")),
        "task": _q(names.derived_name(target.name, "_APPLY")),
        "stage_path": stage_path,
        "comment": sql.quote_literal(f"cdc: replica of MySQL {target.source}"),
        # NOT NULL only on the key. MySQL's NOT NULL holds for one schema version; the Snowflake table follows
        # the history batch by batch (a bootstrap after `ADD COLUMN x INT NOT NULL DEFAULT 1` meets batches from
        # before it, a renamed column leaves the old name behind until the batch that renames it), and the MERGE
        # is its only writer: a constraint there can only turn a correct apply into a stuck one (issue #30).
        "columns": [{"name": _q(c.name), "type": c.type, "not_null": c.name in target.key, "from_json": from_json(c)}
                    for c in target.columns],
        "cdc_columns": _columns(CDC_COLUMNS),
        "soft_delete_columns": _columns(SOFT_DELETE_COLUMNS),
        "history_columns": _columns(HISTORY_COLUMNS),
        "key": key,
        "key_match": [f'"T".{k} = "S".{k}' for k in key],
        "key_match_history": [f'"H".{k} = "S".{k}' for k in key],
        "key_from_json": [from_json(by_name[k]) for k in target.key],
        "key_unchanged": " AND ".join(f"{b} = {a}" for b, a in zip(key_json, key_after, strict=False)),
    }


def _columns(spec: tuple[tuple[str, str, bool], ...]) -> list[dict[str, Any]]:
    return [{"name": _q(name), "type": kind, "not_null": not_null} for name, kind, not_null in spec]


def render(template: str, **context: Any) -> str:
    return sql.render(T + template, **context)


def create_table(target: Target, *, soft_delete: bool, replace: bool = False) -> str:
    context = table_context(target)
    if soft_delete:
        context["cdc_columns"] = context["cdc_columns"] + context["soft_delete_columns"]
    return render("target_table.sql.j2", table=context, replace=replace)


def add_column(table: str, column: str, kind: str) -> str:
    return render("add_column.sql.j2", table=_q(table), column={"name": _q(column), "type": kind})


def merge(target: Target, source: str, *, soft_delete: bool) -> str:
    return render("merge.sql.j2", table=table_context(target), source=source, soft_delete=soft_delete)


def replace_rows(target: Target, source: str, *, soft_delete: bool = False) -> list[str]:
    """A keyless table's batch: delete every copy of each row it names, then insert its copies."""
    context = table_context(target)
    return [render("replace_rows.sql.j2", table=context, source=source, step=step, soft_delete=soft_delete)
            for step in ("delete", "insert")]


def history_statements(target: Target, source: str) -> list[str]:
    """SCD2 maintenance from the same per-key source as the MERGE: close, then open versions."""
    context = table_context(target)
    return [render("history_close.sql.j2", table=context, source=source),
            render("history_insert.sql.j2", table=context, source=source)]
