"""The two decode paths agree: our fixes of the library's readers (used for partial images) and the fast
per-table readers (used for full images, checked value by value against SELECT in test_decode.py)."""

from __future__ import annotations

import datetime as dt
import io
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cdc.rows.exact_reads import ExactReads
from cdc.rows.temporal import ZeroDate, datetime2_reader, read_date, time2_reader


class _Packet:
    """The library's packet interface over plain bytes (the part its readers use)."""

    def __init__(self, data: bytes) -> None:
        self._io = io.BytesIO(data)

    def read(self, size: int) -> bytes:
        return self._io.read(size)

    def read_uint24(self) -> int:
        return int.from_bytes(self.read(3), "little")

    def read_uint64(self) -> int:
        return int.from_bytes(self.read(8), "little")

    def read_int_be_by_size(self, size: int) -> int:
        return int.from_bytes(self.read(size), "big", signed=True)


def _library_read(method: str, data: bytes, *args: Any) -> Any:
    reader = SimpleNamespace(packet=_Packet(data))
    return getattr(ExactReads, f"_RowsEvent__{method}")(reader, *args)


@given(st.binary(min_size=6, max_size=6), st.integers(0, 6))
def test_time2_paths_agree(data: bytes, fsp: int) -> None:
    width = 3 + (fsp + 1) // 2
    column = SimpleNamespace(fsp=fsp)
    assert _library_read("read_time2", data[:width], column) == time2_reader(column)(data, 0)[0]


@given(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 23), st.integers(0, 59),
       st.integers(0, 59), st.integers(0, 999_999), st.sampled_from([0, 2, 3, 6]))
def test_datetime2_paths_agree(year: int, month: int, day: int, hour: int, minute: int, second: int, micro: int,
                               fsp: int) -> None:
    size = (fsp + 1) // 2
    micro = micro // 10 ** (6 - 2 * size) * 10 ** (6 - 2 * size) if size else 0
    packed = (1 << 39) | ((year * 13 + month) << 22) | (day << 17) | (hour << 12) | (minute << 6) | second
    data = packed.to_bytes(5, "big") + (micro // 10 ** (6 - 2 * size)).to_bytes(size, "big")
    try:
        dt.datetime(year, month, day)
    except ValueError:
        if year and month and day:
            return  # impossible dates (Feb 31) are rejected by the server before they reach a binlog
    expected = datetime2_reader(SimpleNamespace(fsp=fsp))(data, 0)[0]
    assert _library_read("read_datetime2", data, SimpleNamespace(fsp=fsp)) == expected
    if not (year and month and day):
        assert isinstance(expected, ZeroDate) and expected.startswith(f"{year:04d}-{month:02d}-{day:02d} ")


def test_date_paths_agree_on_zero_and_partial_dates() -> None:
    for year, month, day in [(0, 0, 0), (2026, 0, 0), (2026, 5, 0), (2026, 11, 22)]:
        data = ((year << 9) | (month << 5) | day).to_bytes(3, "little")
        assert _library_read("read_date", data) == read_date(data, 0)[0]
    assert read_date((2026 << 9 | 0 << 5 | 0).to_bytes(3, "little"), 0)[0] == "2026-00-00"


def test_negative_time_fraction_is_exact() -> None:
    # -01:30:00.25 as TIME(2): the whole value negated in two's complement, then offset by 2^31.
    magnitude = ((1 << 12 | 30 << 6) << 8) | 25
    data = ((1 << 31) - magnitude).to_bytes(4, "big")
    assert time2_reader(SimpleNamespace(fsp=2))(data, 0)[0] == -dt.timedelta(hours=1, minutes=30, microseconds=250_000)
    assert _library_read("read_time2", data, SimpleNamespace(fsp=2)) == -dt.timedelta(hours=1, minutes=30,
                                                                                        microseconds=250_000)
