"""FLOAT and DOUBLE: little-endian IEEE 754 of 4 and 8 bytes.

A DOUBLE is its change-log value. A FLOAT is not: cdc.values writes the shortest decimal that round-trips
the 4-byte float (1.1, as SELECT shows it, not 1.100000023841858), so it has no encoded reader.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from cdc.rows.readers import ColumnType, Inline, Reader, fixed
from cdc.schema import Column


def float_reader(column: Any) -> Reader:
    return fixed("<f")


def double_reader(column: Any) -> Reader:
    return fixed("<d")


def double_encoded_reader(column: Any, ours: Column) -> Reader:
    return fixed("<d")


def double_inline(column: Any, ours: Column) -> Inline:
    return Inline(fmt="d")


def describe_float(column: Any, charset: str | None) -> ColumnType:
    data_type = "float" if column.type == FIELD_TYPE.FLOAT else "double"
    return ColumnType(data_type, data_type + (" unsigned" if column.unsigned else ""))
