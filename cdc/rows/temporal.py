"""DATE, DATETIME, TIMESTAMP, TIME, YEAR: exact, including the zero and partial-zero dates MySQL stores.

Binlog encodings (https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_dt_datetime.html):
DATE is 3 little-endian bytes (year << 9 | month << 5 | day); DATETIME2 5 big-endian bytes (year*13+month,
day, hour, minute, second bit fields under a set sign bit) and 0-3 fraction bytes; TIMESTAMP2 4 big-endian
bytes of epoch seconds and the fraction; TIME2 one big-endian integer of 3 + fraction bytes offset by
2^(n-1); YEAR one byte past 1900. Zero and partial-zero dates are no Python date: they stay text (ZeroDate).
The library's own readers return None for those, 1900 for YEAR 0, 1970-01-01 for a zero TIMESTAMP and flip
a negative TIME's fraction: the overrides and fixes below put the exact value back.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from cdc.rows.readers import ColumnType, Fix, Inline, Reader, fraction
from cdc.schema import Column

_EPOCH = dt.datetime(1970, 1, 1)
_NAMES = {FIELD_TYPE.DATETIME2: "datetime", FIELD_TYPE.DATETIME: "datetime", FIELD_TYPE.TIME2: "time",
          FIELD_TYPE.TIME: "time", FIELD_TYPE.TIMESTAMP2: "timestamp", FIELD_TYPE.TIMESTAMP: "timestamp"}


class ZeroDate(str):
    """A zero or partial-zero DATE/DATETIME as text ('0000-00-00', '2026-00-00 00:00:00'): not a Python date."""


# --- DATE ------------------------------------------------------------------------------------------------

def read_date(buf: Any, pos: int) -> tuple[Any, int]:
    value = int.from_bytes(buf[pos:pos + 3], "little")
    year, month, day = value >> 9, (value >> 5) & 0xF, value & 0x1F
    if year and month and day:
        return dt.date(year, month, day), pos + 3
    return ZeroDate(f"{year:04d}-{month:02d}-{day:02d}"), pos + 3


def read_date_text(buf: bytes, pos: int) -> tuple[str, int]:
    value = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
    return f"{value >> 9:04d}-{(value >> 5) & 0xF:02d}-{value & 0x1F:02d}", pos + 3


_DATE = Inline(("d = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16",
                "$v = '%04d-%02d-%02d' % (d >> 9, d >> 5 & 15, d & 31)", "p += 3"))


def date_reader(column: Any) -> Reader:
    return read_date


def date_encoded_reader(column: Any, ours: Column) -> Reader:
    return read_date_text


def date_inline(column: Any, ours: Column) -> Inline:
    return _DATE


def library_read_date(event: Any) -> dt.date | ZeroDate:
    """The library's DATE reader (a method of its rows event), keeping zero and partial-zero dates."""
    value = event.packet.read_uint24()
    year, month, day = value >> 9, (value >> 5) & 0xF, value & 0x1F
    if year and month and day:
        return dt.date(year, month, day)
    return ZeroDate(f"{year:04d}-{month:02d}-{day:02d}")


# --- DATETIME --------------------------------------------------------------------------------------------

def datetime2_reader(column: Any) -> Reader:
    fsize, scale = fraction(column.fsp or 0)

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


def datetime2_text_reader(fsp: int) -> Reader:
    """DATETIME(fsp) as 'YYYY-MM-DD hh:mm:ss[.ffffff]'; zero and partial-zero dates come out the same way."""
    fsize, scale = fraction(fsp)
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


def datetime2_encoded_reader(column: Any, ours: Column) -> Reader:
    return datetime2_text_reader(column.fsp or 0)


def datetime2_inline(column: Any, ours: Column) -> Inline:
    """DATETIME2: 5 big-endian bytes (read as a byte and an int, under 32 bits each) and 0-3 fraction bytes."""
    fsize, scale = fraction(column.fsp or 0)
    fraction_fields = {0: "", 1: "B", 2: "H", 3: "BH"}[fsize]
    spec = "%04d-%02d-%02d %02d:%02d:%02d" + (".%06d" if fsize else "")
    names = ["h", "d"] + [f"f{i}" for i in range(len(fraction_fields))]
    micro = {0: "", 1: ", f0", 2: ", f0", 3: ", (f0 << 16 | f1)"}[fsize] + (f" * {scale}" if fsize and scale != 1 else "")
    return Inline((f"{', '.join(names)}, = unpack_dt$k(buf, p)",
                   "y, m = divmod((h << 10 | d >> 22) & 131071, 13)",
                   f"$v = {spec!r} % (y, m, d >> 17 & 31, d >> 12 & 31, d >> 6 & 63, d & 63{micro})",
                   f"p += {5 + fsize}"),
                  consts={"unpack_dt$k": struct.Struct(">BI" + fraction_fields).unpack_from})


def library_read_datetime(event: Any) -> dt.datetime | ZeroDate:
    """The library's reader of the old DATETIME (8 bytes, YYYYMMDDhhmmss as a number), keeping zero dates."""
    value = event.packet.read_uint64()
    date, time = divmod(value, 1_000_000)
    year, month, day = date // 10000, date // 100 % 100, date % 100
    hour, minute, second = time // 10000, time // 100 % 100, time % 100
    if year and month and day:
        return dt.datetime(year, month, day, hour, minute, second)
    return ZeroDate(f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}")


def library_read_datetime2(event: Any, column: Any) -> dt.datetime | ZeroDate:
    """The library's DATETIME2 reader, keeping zero and partial-zero dates."""
    data = event.packet.read_int_be_by_size(5)
    micro = _read_fraction(event.packet, column.fsp)
    year_month = (data >> 22) & 0x1FFFF
    year, month = divmod(year_month, 13)
    day, hour = (data >> 17) & 0x1F, (data >> 12) & 0x1F
    minute, second = (data >> 6) & 0x3F, data & 0x3F
    if year and month and day:
        return dt.datetime(year, month, day, hour, minute, second, micro)
    return ZeroDate(f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micro:06d}")


def _read_fraction(packet: Any, fsp: int | None) -> int:
    size = ((fsp or 0) + 1) // 2
    if not size:
        return 0
    value: int = packet.read_int_be_by_size(size)
    scale: int = 10 ** (6 - 2 * size)  # int ** int is Any to mypy (a negative exponent gives a float)
    return value * scale


# --- TIMESTAMP -------------------------------------------------------------------------------------------

def timestamp2_reader(column: Any) -> Reader:
    fsize, scale = fraction(column.fsp or 0)
    utc = dt.UTC

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        seconds = int.from_bytes(buf[pos:pos + 4], "big")
        micro = int.from_bytes(buf[pos + 4:pos + 4 + fsize], "big") * scale if fsize else 0
        if seconds == 0 and micro == 0:
            return "0000-00-00 00:00:00", pos + 4 + fsize
        value = dt.datetime.fromtimestamp(seconds, utc).replace(tzinfo=None, microsecond=micro)
        return value, pos + 4 + fsize

    return read


def _fix_timestamp(value: Any, source: str | None) -> Any:
    if value == _EPOCH:  # TIMESTAMP's range starts at 1970-01-01 00:00:01 UTC: epoch 0 is the zero value
        return "0000-00-00 00:00:00"
    return value


def timestamp_fix(column: Column) -> Fix:
    return _fix_timestamp


# --- TIME ------------------------------------------------------------------------------------------------

def time2_reader(column: Any) -> Reader:
    fsize = ((column.fsp or 0) + 1) // 2
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


def library_read_time2(event: Any, column: Any) -> dt.timedelta:
    """The library's TIME2 reader, read whole as the server packs it.

    TIME2 is one big-endian integer (3 bytes + fraction bytes) offset by 2^(n-1); the library negates the
    integer part alone, so -01:30:00.25 came out as -01:30:00.75.
    """
    fsp = column.fsp or 0
    frac_bytes = (fsp + 1) // 2
    width = 3 + frac_bytes
    raw = int.from_bytes(event.packet.read(width), "big") - (1 << (8 * width - 1))
    sign = -1 if raw < 0 else 1
    raw = abs(raw)
    intpart, frac = raw >> (8 * frac_bytes), raw & ((1 << (8 * frac_bytes)) - 1)
    micro = frac * (10 ** (6 - 2 * frac_bytes)) if frac_bytes else 0
    hours, minutes, seconds = (intpart >> 12) & 0x3FF, (intpart >> 6) & 0x3F, intpart & 0x3F
    return sign * dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micro)


# --- YEAR ------------------------------------------------------------------------------------------------

def read_year(buf: Any, pos: int) -> tuple[int, int]:
    value = buf[pos]
    return (value + 1900 if value else 0), pos + 1


def year_reader(column: Any) -> Reader:
    return read_year


def _fix_year(value: Any, source: str | None) -> Any:
    return 0 if value == 1900 else value  # the library adds 1900 to the stored 0; 1900 is no valid YEAR


def year_fix(column: Column) -> Fix:
    return _fix_year


# --- the table map's spelling ----------------------------------------------------------------------------

def describe_clock(column: Any, charset: str | None) -> ColumnType:
    """DATETIME, TIMESTAMP, TIME (old and fractional encodings): the type with its fsp."""
    data_type, fsp = _NAMES[column.type], getattr(column, "fsp", 0) or 0
    return ColumnType(data_type, data_type + (f"({fsp})" if fsp else ""), extra={"fsp": fsp})


def describe_date(column: Any, charset: str | None) -> ColumnType:
    return ColumnType("date", "date")


def describe_year(column: Any, charset: str | None) -> ColumnType:
    return ColumnType("year", "year(4)")
