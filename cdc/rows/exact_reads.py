"""Overrides of python-mysql-replication's value readers that decode some values lossily.

Mixed into our rows events (cdc.source.binlog): zero and partial-zero dates come back as ZeroDate
instead of None, negative TIME fractions keep their sign, and strings stay raw bytes so cdc.values
decodes them with the column's MySQL charset (latin1 is cp1252, not ISO-8859-1).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from cdc.rows.images import ZeroDate


class ExactReads:
    """Overrides of the library's private readers (name-mangled as _RowsEvent__*), mixed into its rows events."""

    packet: Any
    table_map: Any
    table_id: int

    def _RowsEvent__read_string(self, size: int, column: Any) -> bytes:
        # Raw bytes: cdc.values decodes with the column's MySQL charset (latin1 is cp1252, not ISO-8859-1).
        return bytes(self.packet.read_length_coded_pascal_string(size))

    def _RowsEvent__read_date(self) -> dt.date | ZeroDate:
        value = self.packet.read_uint24()
        year, month, day = value >> 9, (value >> 5) & 0xF, value & 0x1F
        if year and month and day:
            return dt.date(year, month, day)
        return ZeroDate(f"{year:04d}-{month:02d}-{day:02d}")

    def _RowsEvent__read_datetime(self) -> dt.datetime | ZeroDate:
        value = self.packet.read_uint64()
        date, time = divmod(value, 1_000_000)
        year, month, day = date // 10000, date // 100 % 100, date % 100
        hour, minute, second = time // 10000, time // 100 % 100, time % 100
        if year and month and day:
            return dt.datetime(year, month, day, hour, minute, second)
        return ZeroDate(f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}")

    def _RowsEvent__read_datetime2(self, column: Any) -> dt.datetime | ZeroDate:
        # https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_dt_datetime.html (DATETIME2)
        data = self.packet.read_int_be_by_size(5)
        micro = _read_fraction(self.packet, column.fsp)
        year_month = (data >> 22) & 0x1FFFF
        year, month = divmod(year_month, 13)
        day, hour = (data >> 17) & 0x1F, (data >> 12) & 0x1F
        minute, second = (data >> 6) & 0x3F, data & 0x3F
        if year and month and day:
            return dt.datetime(year, month, day, hour, minute, second, micro)
        return ZeroDate(f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micro:06d}")

    def _RowsEvent__read_time2(self, column: Any) -> dt.timedelta:
        # TIME2 is one big-endian integer (3 bytes + fraction bytes) offset by 2^(n-1); the library negates the
        # integer part alone, so -01:30:00.25 came out as -01:30:00.75. Read it whole, as the server packs it.
        fsp = column.fsp or 0
        frac_bytes = (fsp + 1) // 2
        width = 3 + frac_bytes
        raw = int.from_bytes(self.packet.read(width), "big") - (1 << (8 * width - 1))
        sign = -1 if raw < 0 else 1
        raw = abs(raw)
        intpart, frac = raw >> (8 * frac_bytes), raw & ((1 << (8 * frac_bytes)) - 1)
        micro = frac * (10 ** (6 - 2 * frac_bytes)) if frac_bytes else 0
        hours, minutes, seconds = (intpart >> 12) & 0x3FF, (intpart >> 6) & 0x3F, intpart & 0x3F
        return sign * dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micro)


def _read_fraction(packet: Any, fsp: int | None) -> int:
    size = ((fsp or 0) + 1) // 2
    if not size:
        return 0
    return packet.read_int_be_by_size(size) * (10 ** (6 - 2 * size))
