"""The parts a MySQL type's handling is made of (cdc.rows.mysql_types lists them per type), and byte helpers they share.

A row image is the columns' values back to back, each in its type's binlog encoding, after a NULL bitmap
(https://dev.mysql.com/doc/dev/mysql-server/latest/classbinary__log_1_1Rows__event.html). Every type
brings readers that take (buffer, offset) and return (value, next offset): one to the Python value our
fixed library readers return, one straight to the change-log value, and the latter's work as source text
(Inline) for the reader compiled per table map (cdc.rows.compiled).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Reader = Callable[[Any, int], tuple[Any, int]]  # (buffer, offset) -> (value, next offset)
Fix = Callable[[Any, str | None], Any]  # (the library's value, its none_source) -> the value cdc.values encodes


@dataclass(frozen=True)
class Inline:
    """Source of one column's read: `$v` is its variable, `$k` its suffix for temporaries and constants.

    Either `lines` (statements reading from `buf` at `p` and advancing `p`) or `fmt`, a fixed-width
    struct format that neighbouring fixed columns share one unpack call with.
    """

    lines: tuple[str, ...] = ()
    fmt: str = ""
    consts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ColumnType:
    """A table-map column's type as information_schema spells it: what our Column holds besides name and nullability."""

    data_type: str
    type: str
    charset: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # precision/scale, fsp, enum_values/set_values


def fixed(fmt: str) -> Reader:
    """A reader of one fixed-width little-endian struct field."""
    unpack, size = struct.Struct(fmt).unpack_from, struct.calcsize(fmt)

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    return read


def length_of(length_size: int) -> Callable[[bytes, int], int]:
    """The value of a little-endian length prefix of `length_size` bytes at `pos`."""
    if length_size == 1:
        return lambda buf, pos: buf[pos]
    return lambda buf, pos: int.from_bytes(buf[pos:pos + length_size], "little")


def length_source(size: int) -> str:
    """length_of() as an expression of the compiled reader (`buf` at `p`)."""
    if size == 1:
        return "buf[p]"
    if size == 2:
        return "buf[p] | buf[p + 1] << 8"
    return f"int.from_bytes(buf[p:p + {size}], 'little')"


def fraction(fsp: int) -> tuple[int, int]:
    """(bytes, scale to microseconds) of the fractional seconds of a DATETIME2/TIMESTAMP2 with `fsp` digits."""
    size = (fsp + 1) // 2
    return size, 10 ** (6 - 2 * size) if size else 0
