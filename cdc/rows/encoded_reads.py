"""Readers of change-log values: from a row image's bytes straight to what the change log holds (issue 8).

cdc.rows.images' readers produce the same Python values as our fixed library readers, which
cdc.values then encodes; these fuse the two for the hot types (integers, DOUBLE, DECIMAL, DATETIME, DATE,
strings, blobs, ENUM), skipping the intermediate Decimal/datetime objects. tests/rows/
test_decode_fast_readers.py holds each against cdc.rows.images' reader + cdc.values for any input, and
test_decode_differential.py the whole path against the plain library on a real binlog. cdc.rows.compiled
compiles a table's sequence of them into one function.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from typing import Any, TypeVar

from pymysqlreplication.constants import FIELD_TYPE

from cdc.schema import Column
from cdc.rows.images import _DIG2BYTES, _INTS, Reader, _enum, _fixed, _fraction_reader, _int24
from cdc.values import INTEGER_TYPES, TEXT_TYPES, codec_for

T = TypeVar("T")


def _length(length_size: int) -> Callable[[bytes, int], int]:
    if length_size == 1:
        return lambda buf, pos: buf[pos]
    return lambda buf, pos: int.from_bytes(buf[pos:pos + length_size], "little")


def _text(length_size: int, codec: str) -> Reader:
    """A string column as text, decoded with its MySQL charset (cdc.values._encode_text of the raw bytes)."""
    length = _length(length_size)

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        end = pos + length_size
        stop = end + length(buf, pos)
        return buf[end:stop].decode(codec), stop

    return read


def _base64(length_size: int, pad_to: int) -> Reader:
    """A binary column as base64; BINARY(n) padded back to n bytes (the binlog strips trailing 0x00)."""
    length, b2a = _length(length_size), binascii.b2a_base64

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        end = pos + length_size
        stop = end + length(buf, pos)
        data = buf[end:stop]
        if pad_to:
            data = data.ljust(pad_to, b"\x00")
        return b2a(data, newline=False).decode("ascii"), stop

    return read


def _decimal_text(precision: int, scale: int) -> Reader:
    """DECIMAL as the exact text cdc.values writes (format(Decimal, f".{scale}f")), without a Decimal."""
    intg = precision - scale
    intg0, intg0x, frac0, frac0x = intg // 9, intg % 9, scale // 9, scale % 9
    int_groups = ([(_DIG2BYTES[intg0x], intg0x)] if intg0x else []) + [(4, 9)] * intg0
    frac_groups = [(4, 9)] * frac0 + ([(_DIG2BYTES[frac0x], frac0x)] if frac0x else [])
    size = sum(width for width, _ in int_groups + frac_groups)
    top, full = 1 << (8 * size - 1), (1 << (8 * size)) - 1
    frac_bits = 8 * sum(width for width, _ in frac_groups)
    fractions, shift = [], frac_bits
    for width, digits in frac_groups:
        shift -= 8 * width
        fractions.append((shift, (1 << (8 * width)) - 1, f"0{digits}d"))
    units, shift = [], frac_bits + 8 * sum(width for width, _ in int_groups)
    for width, digits in int_groups:
        shift -= 8 * width
        units.append((shift, (1 << (8 * width)) - 1, 10 ** digits))

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        raw = int.from_bytes(buf[pos:pos + size], "big")
        sign = "" if raw & top else "-"
        raw = raw ^ top if sign == "" else (raw ^ full) & ~top
        whole = 0
        for shift, mask, unit in units:
            whole = whole * unit + ((raw >> shift) & mask)
        if not scale:
            return f"{sign}{whole}", pos + size
        frac = "".join([format((raw >> shift) & mask, spec) for shift, mask, spec in fractions])
        return f"{sign}{whole}.{frac}", pos + size

    return read


def _datetime2_text(fsp: int) -> Reader:
    """DATETIME(fsp) as 'YYYY-MM-DD hh:mm:ss[.ffffff]'; zero and partial-zero dates come out the same way."""
    fsize, scale = _fraction_reader(fsp)
    width = 5 + fsize

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        data = int.from_bytes(buf[pos:pos + 5], "big")
        year, month = divmod((data >> 22) & 0x1FFFF, 13)
        text = (f"{year:04d}-{month:02d}-{(data >> 17) & 0x1F:02d} "
                f"{(data >> 12) & 0x1F:02d}:{(data >> 6) & 0x3F:02d}:{data & 0x3F:02d}")
        if fsize:
            return f"{text}.{int.from_bytes(buf[pos + 5:pos + width], 'big') * scale:06d}", pos + width
        return text, pos + width

    return read


def _date_text(buf: bytes, pos: int) -> tuple[str, int]:
    value = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
    return f"{value >> 9:04d}-{(value >> 5) & 0xF:02d}-{value & 0x1F:02d}", pos + 3


_BYTE_TYPES = frozenset({"varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def string_shape(column: Any, ours: Column) -> tuple[int, str, Any] | None:
    """(length size, "text" with its codec or "base64" with its pad width) of a string column, or None."""
    size = column.length_size if column.type == FIELD_TYPE.BLOB else (2 if column.max_length > 255 else 1)
    kind = ours.data_type
    if kind == "json":
        return size, "text", "utf-8"
    if kind in TEXT_TYPES:
        return size, "text", codec_for(ours.charset)
    if kind in _BYTE_TYPES:
        return size, "base64", 0
    if kind == "binary" and column.type == FIELD_TYPE.STRING:
        return size, "base64", column.max_length
    return None


def by_string_shape(column: Any, ours: Column, text: Callable[[int, str], T],
                    base64: Callable[[int, int], T]) -> T | None:
    """text(length size, codec) or base64(length size, pad width) for a string column, None for others.

    The one dispatch of string columns, for these readers and for cdc.rows.compiled's inlined ones.
    """
    shape = string_shape(column, ours)
    if shape is None:
        return None
    size, kind, arg = shape
    return text(size, arg) if kind == "text" else base64(size, arg)


def encoded_reader_for(column: Any, ours: Column) -> Reader | None:
    """A reader of the change-log value of one column (library table-map Column + our Column), or None.

    None for the types cdc.values encodes from a Python value (FLOAT, TIME, TIMESTAMP, SET, BIT, YEAR...):
    the caller composes reader_for() with the encoder for those.
    """
    t, kind = column.type, ours.data_type
    if t in _INTS and kind in INTEGER_TYPES:
        return _fixed(_INTS[t][bool(column.unsigned)])
    if t == FIELD_TYPE.INT24 and kind in INTEGER_TYPES:
        return _int24(bool(column.unsigned))
    if t == FIELD_TYPE.DOUBLE and kind == "double":
        return _fixed("<d")
    if t == FIELD_TYPE.NEWDECIMAL and kind == "decimal":
        return _decimal_text(column.precision, column.decimals)
    if t == FIELD_TYPE.DATETIME2 and kind == "datetime":
        return _datetime2_text(column.fsp or 0)
    if t == FIELD_TYPE.DATE and kind == "date":
        return _date_text
    if t == FIELD_TYPE.ENUM and kind == "enum":
        return _enum(column.size, list(column.enum_values or [""]))  # the label is its change-log value
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        return by_string_shape(column, ours, _text, _base64)
    return None


class EncodedImageReader:
    """Read full row images of one table straight into change-log values: {column name: value}.

    `plan` holds one (name, reader) per table-map column in order; a name of None marks an excluded
    column, which is still read (to find the next column) and then dropped.
    """

    def __init__(self, plan: list[tuple[str | None, Reader]]) -> None:
        self.plan = [(name if name is not None else f"\x00excluded{i}", read) for i, (name, read) in enumerate(plan)]
        self.dropped = [name for name, _ in self.plan if name.startswith("\x00")]
        self.bitmap_size = (len(plan) + 7) // 8

    def image(self, buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        end = pos + self.bitmap_size
        nulls = buf[pos] if end - pos == 1 else int.from_bytes(buf[pos:end], "little")
        pos, out = end, {}
        if not nulls:  # the common case: one test per row instead of one per column
            for name, read in self.plan:
                out[name], pos = read(buf, pos)
        else:
            bit = 1
            for name, read in self.plan:
                if nulls & bit:
                    out[name] = None
                else:
                    out[name], pos = read(buf, pos)
                bit <<= 1
        for name in self.dropped:
            del out[name]
        return out, pos
