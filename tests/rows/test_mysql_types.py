"""The table of MySQL types (cdc.rows.mysql_types): each type's reader of change-log values equals its reader of
Python values + cdc.values, for any input; its overrides still override the library.

The end-to-end comparison on a real binlog is test_decode_differential.py; these cover the value space
(every DECIMAL precision and scale, every date and fraction) that a workload only samples.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pymysqlreplication import row_event as lib_rows

from cdc.rows.decimals import DIG2BYTES, decimal_reader, decimal_text_reader
from cdc.rows.mysql_types import MYSQL_TYPES, fix_for, library_reads
from cdc.rows.strings import base64_reader, text_reader
from cdc.rows.temporal import datetime2_reader, datetime2_text_reader, read_date, read_date_text
from cdc.schema import Column
from cdc.values import encode_value


def _column(data_type: str, **extra: Any) -> Column:
    return Column(name="c", type=data_type, data_type=data_type, **extra)


def pack_decimal(negative: bool, groups: list[tuple[int, int]]) -> bytes:
    """MySQL's packed DECIMAL from (width in bytes, value) groups, most significant first."""
    raw, size = 0, 0
    for width, value in groups:
        raw, size = (raw << (8 * width)) | value, size + width
    top, full = 1 << (8 * size - 1), (1 << (8 * size)) - 1
    return ((raw | top) ^ full if negative else raw | top).to_bytes(size, "big")


@st.composite
def decimals(draw: st.DrawFn) -> tuple[int, int, bytes]:
    precision = draw(st.integers(1, 65))
    scale = draw(st.integers(0, min(30, precision)))
    intg, groups = precision - scale, []
    for digits in ([intg % 9] if intg % 9 else []) + [9] * (intg // 9) + [9] * (scale // 9) + (
            [scale % 9] if scale % 9 else []):
        groups.append((DIG2BYTES[digits], draw(st.integers(0, 10 ** digits - 1))))
    return precision, scale, pack_decimal(draw(st.booleans()), groups)


@given(decimals())
def test_decimal_text_is_the_encoded_decimal(case: tuple[int, int, bytes]) -> None:
    precision, scale, data = case
    column = _column("decimal", precision=precision, scale=scale)
    plain = decimal_reader(SimpleNamespace(precision=precision, decimals=scale))
    assert decimal_text_reader(precision, scale)(data, 0) == (encode_value(column, plain(data, 0)[0]), len(data))


@given(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 23), st.integers(0, 59),
       st.integers(0, 59), st.integers(0, 999_999), st.integers(0, 6))
def test_datetime2_text_is_the_encoded_datetime(year: int, month: int, day: int, hour: int, minute: int, second: int,
                                               micro: int, fsp: int) -> None:
    size = (fsp + 1) // 2
    try:
        dt.datetime(year or 1, month or 1, day or 1)
    except ValueError:
        return  # Feb 31 and friends: rejected before they reach a binlog
    packed = (1 << 39) | ((year * 13 + month) << 22) | (day << 17) | (hour << 12) | (minute << 6) | second
    data = packed.to_bytes(5, "big") + (micro // 10 ** (6 - 2 * size)).to_bytes(size, "big") + b"tail"
    column = _column("datetime", fsp=fsp)
    plain = datetime2_reader(SimpleNamespace(fsp=fsp))
    assert datetime2_text_reader(fsp)(data, 0) == (encode_value(column, plain(data, 0)[0]), 5 + size)


@given(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31))
def test_date_text_is_the_encoded_date(year: int, month: int, day: int) -> None:
    try:
        dt.date(year or 1, month or 1, day or 1)
    except ValueError:
        return
    data = ((year << 9) | (month << 5) | day).to_bytes(3, "little")
    assert read_date_text(data, 0) == (encode_value(_column("date"), read_date(data, 0)[0]), 3)


@given(st.text(max_size=300), st.sampled_from([("utf8mb4", "utf-8"), ("latin1", "cp1252")]), st.sampled_from([1, 2, 4]))
def test_text_is_the_encoded_string(text: str, charset: tuple[str, str], length_size: int) -> None:
    try:
        raw = text.encode(charset[1])
    except UnicodeEncodeError:
        return
    data = len(raw).to_bytes(length_size, "little") + raw + b"\xff"
    expected = encode_value(_column("varchar", charset=charset[0]), raw)
    assert text_reader(length_size, charset[1])(data, 0) == (expected, length_size + len(raw))


@given(st.binary(max_size=300), st.sampled_from([1, 2, 3]), st.integers(0, 8))
def test_base64_is_the_encoded_binary(raw: bytes, length_size: int, pad_to: int) -> None:
    data = len(raw).to_bytes(length_size, "little") + raw
    padded = raw.ljust(pad_to, b"\x00")
    kind = "binary" if pad_to else "varbinary"
    assert base64_reader(length_size, pad_to)(data, 0) == (encode_value(_column(kind), padded), length_size + len(raw))


def test_every_override_names_a_reader_of_the_library() -> None:
    """A renamed private reader in a new library release would silently stop being overridden."""
    for name in library_reads():
        assert callable(getattr(lib_rows.RowsEvent, name, None)), f"the library has no {name} any more"


def test_fast_readers_say_which_data_types_they_encode() -> None:
    for mysql_type in MYSQL_TYPES.values():
        fast = mysql_type.read_encoded is not None or mysql_type.inline is not None
        assert fast == bool(mysql_type.encodes), mysql_type.name


def test_the_library_values_fixed_by_data_type() -> None:
    fixed = {data_type for data_type in ("year", "timestamp", "set", "binary", "int", "date", "enum")
             if fix_for(_column(data_type)) is not None}
    assert fixed == {"year", "timestamp", "set", "binary"}
    assert fix_for(Column(name="c", type="binary(4)", data_type="binary"))(b"ab", None) == b"ab\x00\x00"
