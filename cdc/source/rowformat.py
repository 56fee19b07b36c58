"""Decode the row images of a rows event straight from its bytes, with readers compiled once per table map.

The library reads every value through a chain of ifs and several method calls per byte run; at
binlog rates that is most of tail's time. Here a table map becomes a list of small readers
(struct formats bound once), and a rows event body is parsed in one pass over a memoryview.
Two kinds of readers. reader_for() produces the same Python values as our fixed library readers
(cdc.source.binlog), which cdc.values then encodes. encoded_reader_for() goes straight from the bytes to
the change log's value for the hot types (integers, DECIMAL, DATETIME, DATE, strings, blobs, ENUM),
skipping the intermediate Decimal/datetime objects: tests/capture/test_decode_differential.py holds
both against each other and against the plain library. Tables with a column type not listed here, or
events with partial images (binlog_row_image != FULL), use the library's readers.
"""

from __future__ import annotations

import binascii
import datetime as dt
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from cdc.schema import Column
from cdc.values import INTEGER_TYPES, TEXT_TYPES, codec_for

Reader = Callable[[Any, int], tuple[Any, int]]  # (buffer, offset) -> (value, next offset)

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


class ZeroDate(str):
    """A zero or partial-zero DATE/DATETIME as text ('0000-00-00', '2026-00-00 00:00:00'): not a Python date."""


def _fixed(fmt: str) -> Reader:
    unpack, size = struct.Struct(fmt).unpack_from, struct.calcsize(fmt)

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    return read


def _int24(unsigned: bool) -> Reader:
    def read(buf: Any, pos: int) -> tuple[int, int]:
        return int.from_bytes(buf[pos:pos + 3], "little", signed=not unsigned), pos + 3

    return read


def _string(length_size: int) -> Reader:
    def read(buf: Any, pos: int) -> tuple[bytes, int]:
        end = pos + length_size
        n = int.from_bytes(buf[pos:end], "little")
        return bytes(buf[end:end + n]), end + n

    return read


def _decimal(precision: int, scale: int) -> Reader:
    """MySQL's packed DECIMAL: big-endian groups of 9 digits in 4 bytes, sign in the top bit, negatives inverted."""
    intg = precision - scale
    intg0, intg0x, frac0, frac0x = intg // 9, intg % 9, scale // 9, scale % 9
    widths = ([(_DIG2BYTES[intg0x], intg0x)] if intg0x else []) + [(4, 9)] * intg0
    n_int = len(widths)
    widths += [(4, 9)] * frac0 + ([(_DIG2BYTES[frac0x], frac0x)] if frac0x else [])
    size = sum(width for width, _ in widths)
    top, full = 1 << (8 * size - 1), (1 << (8 * size)) - 1
    groups, shift = [], 8 * size
    for width, digits in widths:
        shift -= 8 * width
        groups.append((shift, (1 << (8 * width)) - 1, f"0{digits}d"))

    def read(buf: Any, pos: int) -> tuple[Decimal, int]:
        raw = int.from_bytes(buf[pos:pos + size], "big")
        negative = not raw & top
        raw ^= full if negative else top
        if negative:
            raw &= ~top & full
        parts = [format((raw >> shift) & mask, spec) for shift, mask, spec in groups]
        text = "".join(parts[:n_int]) + "." + ("".join(parts[n_int:]) or "0")
        return Decimal("-" + text if negative else text), pos + size

    return read


def _fraction_reader(fsp: int) -> tuple[int, int]:
    size = (fsp + 1) // 2
    return size, 10 ** (6 - 2 * size) if size else 0


def _datetime2(fsp: int) -> Reader:
    fsize, scale = _fraction_reader(fsp)

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        data = int.from_bytes(buf[pos:pos + 5], "big")
        micro = int.from_bytes(buf[pos + 5:pos + 5 + fsize], "big") * scale if fsize else 0
        year, month = divmod((data >> 22) & 0x1FFFF, 13)
        day, hour, minute, second = (data >> 17) & 0x1F, (data >> 12) & 0x1F, (data >> 6) & 0x3F, data & 0x3F
        if year and month and day:
            return dt.datetime(year, month, day, hour, minute, second, micro), pos + 5 + fsize
        text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"
        return ZeroDate(text), pos + 5 + fsize

    return read


def _timestamp2(fsp: int) -> Reader:
    fsize, scale = _fraction_reader(fsp)
    utc = dt.timezone.utc

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        seconds = int.from_bytes(buf[pos:pos + 4], "big")
        micro = int.from_bytes(buf[pos + 4:pos + 4 + fsize], "big") * scale if fsize else 0
        if seconds == 0 and micro == 0:
            return "0000-00-00 00:00:00", pos + 4 + fsize
        value = dt.datetime.fromtimestamp(seconds, utc).replace(tzinfo=None, microsecond=micro)
        return value, pos + 4 + fsize

    return read


def _time2(fsp: int) -> Reader:
    fsize = (fsp + 1) // 2
    width = 3 + fsize
    bias = 1 << (8 * width - 1)

    def read(buf: Any, pos: int) -> tuple[dt.timedelta, int]:
        raw = int.from_bytes(buf[pos:pos + width], "big") - bias
        sign, raw = (-1 if raw < 0 else 1), abs(raw)
        intpart, frac = raw >> (8 * fsize), raw & ((1 << (8 * fsize)) - 1)
        micro = frac * 10 ** (6 - 2 * fsize) if fsize else 0
        delta = dt.timedelta(hours=(intpart >> 12) & 0x3FF, minutes=(intpart >> 6) & 0x3F, seconds=intpart & 0x3F,
                             microseconds=micro)
        return sign * delta, pos + width

    return read


def _date(buf: Any, pos: int) -> tuple[Any, int]:
    value = int.from_bytes(buf[pos:pos + 3], "little")
    year, month, day = value >> 9, (value >> 5) & 0xF, value & 0x1F
    if year and month and day:
        return dt.date(year, month, day), pos + 3
    return ZeroDate(f"{year:04d}-{month:02d}-{day:02d}"), pos + 3


def _year(buf: Any, pos: int) -> tuple[int, int]:
    value = buf[pos]
    return (value + 1900 if value else 0), pos + 1


def _enum(size: int, labels: list[str]) -> Reader:
    def read(buf: Any, pos: int) -> tuple[str, int]:
        index = int.from_bytes(buf[pos:pos + size], "little")
        return (labels[index] if index < len(labels) else ""), pos + size

    return read


def _set(size: int, labels: list[str]) -> Reader:
    def read(buf: Any, pos: int) -> tuple[tuple[str, ...], int]:
        mask = int.from_bytes(buf[pos:pos + size], "little")
        return tuple(label for i, label in enumerate(labels) if mask >> i & 1), pos + size

    return read


def _bit(size: int) -> Reader:
    def read(buf: Any, pos: int) -> tuple[bytes, int]:
        return bytes(buf[pos:pos + size]), pos + size

    return read


_INTS = {FIELD_TYPE.TINY: ("<b", "<B"), FIELD_TYPE.SHORT: ("<h", "<H"), FIELD_TYPE.LONG: ("<i", "<I"),
         FIELD_TYPE.LONGLONG: ("<q", "<Q")}


def reader_for(column: Any) -> Reader | None:
    """A reader for one table-map column (library Column), or None if only the library can read it."""
    t = column.type
    if t in _INTS:
        return _fixed(_INTS[t][bool(column.unsigned)])
    simple: dict[int, Callable[[], Reader]] = {
        FIELD_TYPE.INT24: lambda: _int24(bool(column.unsigned)),
        FIELD_TYPE.FLOAT: lambda: _fixed("<f"),
        FIELD_TYPE.DOUBLE: lambda: _fixed("<d"),
        FIELD_TYPE.NEWDECIMAL: lambda: _decimal(column.precision, column.decimals),
        FIELD_TYPE.VARCHAR: lambda: _string(2 if column.max_length > 255 else 1),
        FIELD_TYPE.STRING: lambda: _string(2 if column.max_length > 255 else 1),
        FIELD_TYPE.BLOB: lambda: _string(column.length_size),
        FIELD_TYPE.GEOMETRY: lambda: _string(column.length_size),
        FIELD_TYPE.DATETIME2: lambda: _datetime2(column.fsp or 0),
        FIELD_TYPE.TIMESTAMP2: lambda: _timestamp2(column.fsp or 0),
        FIELD_TYPE.TIME2: lambda: _time2(column.fsp or 0),
        FIELD_TYPE.DATE: lambda: _date,
        FIELD_TYPE.YEAR: lambda: _year,
        FIELD_TYPE.ENUM: lambda: _enum(column.size, list(column.enum_values or [""])),
        FIELD_TYPE.SET: lambda: _set(column.size, list(column.set_values or [])),
        FIELD_TYPE.BIT: lambda: _bit(column.bytes),
    }
    make = simple.get(t)
    return make() if make is not None else None


class ImageReader:
    """Read full row images of one table (all columns present) from a rows-event body."""

    def __init__(self, columns: list[Any]) -> None:
        self.names = [c.name for c in columns]
        readers = [reader_for(c) for c in columns]
        self.complete = all(r is not None for r in readers)
        self.readers: list[Reader] = [r for r in readers if r is not None]
        self.count = len(columns)
        self.bitmap_size = (self.count + 7) // 8
        self.all_present = b"\xff" * (self.count // 8) + (bytes([(1 << (self.count % 8)) - 1]) if self.count % 8 else b"")

    def image(self, buf: Any, pos: int) -> tuple[dict[str, Any], int]:
        nulls = int.from_bytes(buf[pos:pos + self.bitmap_size], "little")
        pos += self.bitmap_size
        values: list[Any] = []
        append = values.append
        for i, read in enumerate(self.readers):
            if nulls >> i & 1:
                append(None)
            else:
                value, pos = read(buf, pos)
                append(value)
        return dict(zip(self.names, values)), pos


# --- readers of change-log values (cdc.values' encoding, fused with the read) ---------------------------------


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


def _string_reader(column: Any, ours: Column) -> Reader | None:
    shape = string_shape(column, ours)
    if shape is None:
        return None
    size, kind, arg = shape
    return _text(size, arg) if kind == "text" else _base64(size, arg)


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
        return _string_reader(column, ours)
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
