"""MySQL column -> Snowflake column type (docs/guide.md, "snowflake-bootstrap": type map).

The map follows what the change log and the lake hold (docs/formats.md, cdc/spark/types.py), so a
value keeps its exact meaning from binlog to Snowflake:

- integers: NUMBER(d,0) with d = the digits of the type's largest value (BIGINT UNSIGNED ->
  NUMBER(20,0)), so every MySQL value fits and nothing wider is promised;
- DECIMAL(p,s) -> NUMBER(p,s); p > 38 (Snowflake's maximum) -> VARCHAR holding the exact decimal
  text (the lake keeps it as a string too), or a refusal with `--decimal-overflow refuse`;
- DATETIME(n) -> TIMESTAMP_NTZ(n); TIMESTAMP(n) -> TIMESTAMP_TZ(n) holding UTC (+00:00);
- TIME -> VARCHAR ("-01:30:00.250000"): MySQL TIME spans -838:59:59..838:59:59, a duration that
  Snowflake's TIME (a time of day) cannot hold;
- YEAR -> NUMBER(4,0); BIT(n) -> NUMBER(d,0);
- CHAR/VARCHAR/TEXT/ENUM -> VARCHAR (unbounded: Snowflake stores by length, and a widened MySQL
  column then needs no ALTER); BINARY/VARBINARY/BLOB -> BINARY;
- JSON -> VARIANT; SET -> ARRAY of labels;
- spatial -> BINARY holding the value as MySQL stores it (4-byte SRID + WKB); convert with
  TO_GEOGRAPHY(SUBSTR(...)) where needed: the SRID decides GEOGRAPHY vs GEOMETRY, not us.
"""

from __future__ import annotations

import re

from cdc.errors import PreconditionError
from cdc.schema import Column
from cdc.values import ADDRESS_TYPES, BINARY_TYPES, SPATIAL_TYPES, TEXT_TYPES

SNOWFLAKE_MAX_PRECISION = 38
MAX_FRACTION = 9
DECIMAL_OVERFLOW = ("varchar", "refuse")

# Largest value of each integer type (signed, unsigned).
_INTEGER_MAX = {
    "tinyint": (127, 255),
    "smallint": (32767, 65535),
    "mediumint": (8388607, 16777215),
    "int": (2147483647, 4294967295),
    "integer": (2147483647, 4294967295),
    "bigint": (9223372036854775807, 18446744073709551615),
}


_ALIASES = {"TEXT": "VARCHAR", "STRING": "VARCHAR", "ARRAY": "VARIANT", "OBJECT": "VARIANT", "REAL": "FLOAT",
            "FIXED": "NUMBER", "DECIMAL": "NUMBER"}


def type_base(kind: str) -> str:
    """A Snowflake type's name without its precision, as Snowflake reports it or we write it (TEXT is VARCHAR, a
    NUMBER(10,2) is NUMBER, ARRAY and OBJECT are VARIANT): for loose comparisons."""
    name = kind.split("(")[0].strip().upper()
    return _ALIASES.get(name, name)


def snowflake_type(column: Column, *, table: str = "?", decimal_overflow: str = "varchar") -> str:
    """The Snowflake type of one MySQL column."""
    kind = column.data_type
    if kind in _INTEGER_MAX:
        signed, unsigned = _INTEGER_MAX[kind]
        return f"NUMBER({len(str(unsigned if column.unsigned else signed))},0)"
    if kind == "decimal":
        return _decimal(column, table, decimal_overflow)
    if kind in ("float", "double", "real"):
        return "FLOAT"  # Snowflake FLOAT is an IEEE double: holds every FLOAT and DOUBLE exactly
    if kind == "bit":
        return f"NUMBER({len(str(2 ** _width(column, 1) - 1))},0)"
    if kind == "year":
        return "NUMBER(4,0)"
    if kind == "date":
        return "DATE"
    if kind == "datetime":
        return f"TIMESTAMP_NTZ({_fsp(column)})"
    if kind == "timestamp":
        return f"TIMESTAMP_TZ({_fsp(column)})"
    if kind in BINARY_TYPES or kind in SPATIAL_TYPES:
        return "BINARY"
    if kind == "json":
        return "VARIANT"
    if kind == "set":
        return "ARRAY"
    if kind in TEXT_TYPES or kind in ADDRESS_TYPES or kind in ("enum", "time"):
        return "VARCHAR"
    raise PreconditionError(
        f"table {table}: column {column.name!r} has MySQL type {column.type!r}, which cdc has no Snowflake type for",
        hint="exclude the table, or open an issue with the column definition",
    )


def _decimal(column: Column, table: str, decimal_overflow: str) -> str:
    precision, scale = column.precision, column.scale
    if precision is None:
        match = re.search(r"\((\d+)(?:,(\d+))?\)", column.type)
        precision, scale = (int(match[1]), int(match[2] or 0)) if match else (10, 0)
    if precision <= SNOWFLAKE_MAX_PRECISION:
        return f"NUMBER({precision},{scale or 0})"
    if decimal_overflow == "varchar":
        return "VARCHAR"
    raise PreconditionError(
        f"table {table}: column {column.name!r} is {column.type}, wider than Snowflake's NUMBER(38,s)",
        hint="pass --decimal-overflow varchar to keep the exact decimal text in a VARCHAR column",
    )


def _fsp(column: Column) -> int:
    if column.fsp is not None:
        return min(column.fsp, MAX_FRACTION)
    return _width(column, 0)


def _width(column: Column, default: int) -> int:
    match = re.search(r"\((\d+)\)", column.type)
    return int(match[1]) if match else default
