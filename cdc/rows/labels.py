"""ENUM and SET: an index (ENUM, from 1) or a bit mask (SET) of 1-8 little-endian bytes over the column's labels.

The labels come from the table map (binlog_row_metadata=FULL). An ENUM's label is its change-log value;
a SET becomes the list of its labels in definition order (cdc.values), and an empty SET stays [] where
the library returns None.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE

from cdc.rows.readers import ColumnType, Fix, Inline, Reader, length_source
from cdc.schema import Column


def _enum_labels(column: Any) -> list[str]:
    return list(column.enum_values or [""])  # index 0 is the '' of an invalid value


def enum_reader(column: Any) -> Reader:
    size, labels = column.size, _enum_labels(column)

    def read(buf: Any, pos: int) -> tuple[str, int]:
        index = int.from_bytes(buf[pos:pos + size], "little")
        return (labels[index] if index < len(labels) else ""), pos + size

    return read


def enum_encoded_reader(column: Any, ours: Column) -> Reader:
    return enum_reader(column)


def enum_inline(column: Any, ours: Column) -> Inline:
    size, labels = column.size, _enum_labels(column)
    return Inline((f"q = {length_source(size)}", f"$v = labels$k[q] if q < {len(labels)} else ''", f"p += {size}"),
                  consts={"labels$k": tuple(labels)})


def set_reader(column: Any) -> Reader:
    size, labels = column.size, list(column.set_values or [])

    def read(buf: Any, pos: int) -> tuple[tuple[str, ...], int]:
        mask = int.from_bytes(buf[pos:pos + size], "little")
        return tuple(label for i, label in enumerate(labels) if mask >> i & 1), pos + size

    return read


def _fix_set(value: Any, source: str | None) -> Any:
    if value is None and source == NONE_SOURCE.EMPTY_SET:
        return ()
    return value


def set_fix(column: Column) -> Fix:
    return _fix_set


def describe_labels(column: Any, charset: str | None) -> ColumnType:
    """enum('a','b''c') / set(...) as information_schema spells them, labels quoted SQL-style."""
    is_enum = column.type == FIELD_TYPE.ENUM
    data_type = "enum" if is_enum else "set"
    labels = tuple(column.enum_values[1:] if is_enum else column.set_values or ())
    quoted = ",".join("'" + label.replace("'", "''") + "'" for label in labels)
    extra = {"enum_values": labels} if is_enum else {"set_values": labels}
    return ColumnType(data_type, f"{data_type}({quoted})", charset, extra)
