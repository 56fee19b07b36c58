"""The value MySQL gives existing rows in a column an ALTER adds, in its change-log encoding (docs/formats.md).

From the ADD clause (cdc.capture.alter) and the column as the server defines it: a constant DEFAULT converted
to the column's type, the type's implicit value under NOT NULL without DEFAULT (0, '', the zero date, the first
ENUM member, the empty SET; https://mariadb.com/kb/en/null-values/#default-values), or NULL. A value MySQL
computes when the ALTER runs (CURRENT_TIMESTAMP, (uuid()), AUTO_INCREMENT, a generated column) cannot be known
from the binlog: that is reported as a reason to re-snapshot the table, never guessed.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from cdc.capture.alter import AddedColumn, AlterColumns, parse_alter_columns
from cdc.errors import DataError
from cdc.schema import Column, TableSchema
from cdc.schema.retype import LOSSIEST, Session, unreproduced
from cdc.values import BINARY_TYPES, SPATIAL_TYPES, ZERO_DATE, ZERO_DATETIME, encode_value

_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_TEXTS = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?$")
_TIME = re.compile(r"^-?\d{2,3}:\d{2}:\d{2}(?:\.(\d{1,6}))?$")


class Unknowable(Exception):
    """The fill cannot be reproduced from the statement: the table needs a re-snapshot."""


def fill_value(added: AddedColumn, column: Column) -> tuple[Any, str | None]:
    """(encoded fill, None), or (None, why it needs a re-snapshot)."""
    try:
        return _fill(added, column), None
    except Unknowable as exc:
        return None, str(exc)


def _fill(added: AddedColumn, column: Column) -> Any:
    kind, *rest = added.default
    if kind == "computed":
        raise Unknowable(f"column {rest[0]} is evaluated when the ALTER runs")
    if kind == "null":
        return None
    if kind == "none":
        return _implicit(column) if added.not_null or not column.nullable else None
    if column.data_type in SPATIAL_TYPES:
        raise Unknowable(f"column {column.name}: a spatial DEFAULT")
    try:
        return _literal(column, kind, rest[0])
    except (ValueError, InvalidOperation, DataError) as exc:
        raise Unknowable(f"column {column.name}: DEFAULT {rest[0]!r} as {column.type} ({exc})") from None


def _implicit(column: Column) -> Any:
    """The type's implicit default (what INSERT () stores in a NOT NULL column without DEFAULT)."""
    kind = column.data_type
    if kind in _INTEGERS or kind in ("float", "double", "real", "bit", "year", "decimal"):
        return encode_value(column, 0)
    if kind in _TEXTS or kind == "json":
        return ""
    if kind in BINARY_TYPES:
        return encode_value(column, b"\0" * _length(column) if kind == "binary" else b"")
    if kind == "enum":
        return (column.enum_values or ("",))[0]
    if kind == "set":
        return []
    if kind == "date":
        return ZERO_DATE
    if kind == "datetime":
        return ZERO_DATETIME + (".000000" if (column.fsp or 0) > 0 else "")
    if kind == "time":
        return "00:00:00" + (".000000" if (column.fsp or 0) > 0 else "")
    # TIMESTAMP NOT NULL without DEFAULT may get CURRENT_TIMESTAMP (explicit_defaults_for_timestamp=OFF).
    raise Unknowable(f"column {column.name}: the implicit value of {column.type} depends on server settings")


def _literal(column: Column, kind: str, text: str) -> Any:
    data_type = column.data_type
    raw: bytes | None = None
    if kind == "hex":
        raw = bytes.fromhex(text)
    elif kind == "bits":
        raw = int(text or "0", 2).to_bytes(max(1, (len(text) + 7) // 8), "big")
    if data_type in _INTEGERS or data_type in ("year", "bit"):
        if raw is not None:
            return encode_value(column, int.from_bytes(raw, "big"))
        return encode_value(column, int(Decimal(text).quantize(Decimal(1), ROUND_HALF_UP)))
    if data_type == "decimal":
        scale = Decimal(1).scaleb(-(column.scale or 0))
        return encode_value(column, Decimal(text).quantize(scale, ROUND_HALF_UP))
    if data_type in ("float", "double", "real"):
        return encode_value(column, float(text))
    value = raw.decode("utf-8") if raw is not None and data_type not in BINARY_TYPES else text
    if data_type in _TEXTS:
        return value.rstrip(" ") if data_type == "char" else value  # CHAR drops trailing spaces on read
    if data_type in BINARY_TYPES:
        data = raw if raw is not None else text.encode("utf-8")
        return base64.b64encode(data.ljust(_length(column), b"\0") if data_type == "binary" else data).decode()
    if data_type == "enum":
        return _label(column, value)
    if data_type == "set":
        return encode_value(column, [_label(column, part) for part in value.split(",") if part])
    if data_type == "json":
        return value
    return _temporal(column, value)


def _label(column: Column, value: str) -> str:
    labels = column.enum_values or column.set_values or ()
    if value.isdigit() and column.enum_values:
        return labels[int(value) - 1]
    for label in labels:  # ENUM/SET compare by the column's (usually case-insensitive) collation
        if label == value:
            return label
    matches = [label for label in labels if label.lower() == value.rstrip(" ").lower()]
    if len(matches) != 1:
        raise ValueError(f"{value!r} is not one member")
    return matches[0]


def _temporal(column: Column, value: str) -> str:
    fraction = ".000000" if (column.fsp or 0) > 0 else ""
    if column.data_type == "date" and _DATE.match(value):
        return value
    if column.data_type == "datetime" and (_DATETIME.match(value) or _DATE.match(value)):
        match = _DATETIME.match(value)
        if match is None:
            return f"{value} 00:00:00{fraction}"
        digits = match[3] or ""
        if len(digits) > (column.fsp or 0):
            raise ValueError("more fraction digits than the column keeps")
        return f"{match[1]} {match[2]}" + (f".{digits.ljust(6, '0')}" if fraction else "")
    if column.data_type == "time" and (match := _TIME.match(value)):
        digits = match[1] or ""
        if len(digits) > (column.fsp or 0):
            raise ValueError("more fraction digits than the column keeps")
        return value.split(".")[0] + (f".{digits.ljust(6, '0')}" if fraction else "")
    # TIMESTAMP literals are read in the ALTER session's time zone, which the statement does not carry.
    raise ValueError(f"no exact reading of {column.data_type} literals here")


def _length(column: Column) -> int:
    match = re.search(r"\((\d+)\)", column.type)
    return int(match[1]) if match else 1


@dataclass(frozen=True)
class AlterEffects:
    schema: TableSchema | None  # the shape after the ALTER, with its fills; None if it could not be read
    fills: dict[str, Any]
    renamed: dict[str, str]  # new name -> old name
    resnapshot: str | None


def alter_effects(before: TableSchema, now: TableSchema | None, clauses: str,
                  session: Session | None = None) -> AlterEffects:
    """What an ALTER did, from the statement (cdc.capture.alter) cross-checked with information_schema now.

    information_schema read at the ALTER's position shows the ALTER's result only if no later DDL ran since
    (tail may lag): it is trusted when its column names are exactly the ones the statement leads to. Then a
    column whose type changed in a way the targets' cast does not reproduce is a reason to re-snapshot
    (cdc.schema.retype; session: the ALTER's sql_mode and server; None: not known, taken as the most lossy).
    """
    change = parse_alter_columns(clauses)
    current = {c.name: c for c in now.columns} if now is not None else {}
    fills: dict[str, Any] = {}
    reasons = []
    for added in change.added:
        column = current.get(added.name)
        if column is None:
            reasons.append(f"column {added.name} was changed again before tail read the ALTER")
            continue
        value, why = fill_value(added, column)
        if why is not None:
            reasons.append(why)
        elif value is not None:
            fills[added.name] = value
    reasons += [f"generated column {name} (re)defined: MySQL computed it again in every row"
                for name in change.regenerated]
    renames = dict(change.renamed)
    renamed = {new: old for old, new in change.renamed if old in before.column_names}
    trusted = now is not None and _trusted(before, now, change, renames)
    if trusted and now is not None:
        reasons += _retyped(before, now, change, renamed, session or LOSSIEST)
    resnapshot = "; ".join(reasons) or None
    if now is None or not trusted:
        if not change.added and not change.retyped and (change.dropped or change.renamed):
            # Only drops and renames: the shape follows from the one before, whatever ran since.
            columns = tuple(replace(c, name=renames.get(c.name, c.name)) for c in before.columns
                            if c.name not in change.dropped)
            key = tuple(renames.get(k, k) for k in before.primary_key)
            return AlterEffects(replace(before, columns=columns, primary_key=key, fills={}, renamed=renamed,
                                        resnapshot=None), {}, renamed, None)
        return AlterEffects(None, fills, renamed, resnapshot)
    return AlterEffects(replace(now, fills=fills, renamed=renamed, resnapshot=resnapshot), fills, renamed, resnapshot)


def _trusted(before: TableSchema, now: TableSchema, change: AlterColumns, renames: dict[str, str]) -> bool:
    """information_schema's columns are exactly the ones this ALTER leads to (no later DDL ran since)."""
    expected = [renames.get(n, n) for n in before.column_names if n not in change.dropped]
    expected += [a.name for a in change.added if a.name not in expected]
    return sorted(expected) == sorted(now.column_names)


def _retyped(before: TableSchema, now: TableSchema, change: AlterColumns, renamed: dict[str, str],
             session: Session) -> list[str]:
    """Reasons to re-snapshot for the columns whose stored values MySQL converted in a way no cast reproduces."""
    added = {a.name for a in change.added}
    reasons = []
    for column in now.columns:
        old = renamed.get(column.name, column.name)
        if column.name in added or old not in before.column_names:
            continue
        why = unreproduced(before.column(old), column, session)
        if why is not None:
            reasons.append(why)
    return reasons
