"""TINYINT, SMALLINT, MEDIUMINT, INT, BIGINT: little-endian two's complement (or unsigned) of 1, 2, 3, 4, 8 bytes.

The Python int is already the change-log value (BIGINT UNSIGNED keeps its range), so the encoded reader is
the plain one; the compiled reader reads runs of them with one struct call.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from cdc.rows.readers import ColumnType, Inline, Reader, fixed
from cdc.schema import Column

FORMATS = {FIELD_TYPE.TINY: ("<b", "<B"), FIELD_TYPE.SHORT: ("<h", "<H"), FIELD_TYPE.LONG: ("<i", "<I"),
           FIELD_TYPE.LONGLONG: ("<q", "<Q")}  # struct format by binlog type, (signed, unsigned)
NAMES = {FIELD_TYPE.TINY: "tinyint", FIELD_TYPE.SHORT: "smallint", FIELD_TYPE.INT24: "mediumint",
         FIELD_TYPE.LONG: "int", FIELD_TYPE.LONGLONG: "bigint"}
# Display widths information_schema shows (signed, unsigned): the binlog does not carry int(5) vs int(11).
DISPLAY_WIDTHS = {"tinyint": (4, 3), "smallint": (6, 5), "mediumint": (9, 8), "int": (11, 10), "bigint": (20, 20)}


def int_reader(column: Any) -> Reader:
    return fixed(FORMATS[column.type][bool(column.unsigned)])


def int_encoded_reader(column: Any, ours: Column) -> Reader:
    return int_reader(column)


def int_inline(column: Any, ours: Column) -> Inline:
    return Inline(fmt=FORMATS[column.type][bool(column.unsigned)][1])


def int24_reader(column: Any) -> Reader:
    signed = not column.unsigned

    def read(buf: Any, pos: int) -> tuple[int, int]:
        return int.from_bytes(buf[pos:pos + 3], "little", signed=signed), pos + 3

    return read


def int24_encoded_reader(column: Any, ours: Column) -> Reader:
    return int24_reader(column)


def int24_inline(column: Any, ours: Column) -> Inline:
    signed = "" if column.unsigned else ", signed=True"
    return Inline((f"$v = int.from_bytes(buf[p:p + 3], 'little'{signed})", "p += 3"))


def describe_int(column: Any, charset: str | None) -> ColumnType:
    data_type, unsigned = NAMES[column.type], bool(column.unsigned)
    return ColumnType(data_type, f"{data_type}({DISPLAY_WIDTHS[data_type][unsigned]})" + (" unsigned" if unsigned else ""))
