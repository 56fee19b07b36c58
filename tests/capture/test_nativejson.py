"""MySQL 8's binary JSON (a JSON column, type 245) in the C row decoder against the Python paths (issue 28).

The test rig runs MariaDB, whose JSON is a LONGTEXT, so the binary documents are written here by a small
encoder of MySQL's format of its own (https://dev.mysql.com/doc/dev/mysql-server/latest/json__binary_8h.html):
small and large objects and arrays, inlined literals and 16-bit (and, in the large format, 32-bit) integers,
int64/uint64, doubles, strings with their variable-length lengths, opaque DECIMAL, DATE, TIME, DATETIME and
other opaque types. Three decoders give the lines of the same rows events and must agree byte for byte: the
plain library path (the library's rows read a document through our packet wrapper's read_binary_json, then
cdc.values' encoder), our Python fast path (cdc.rows.json_binary's json_reader, compiled per table) and the C
decoder (cdc/rows/_native_json.c). Their text is MySQL's own (what its SELECT shows, compact with keys sorted):
literal MySQL texts pin it, and the library's parse_json checks the structure of documents without opaque
values (it loses those, and shows a top-level string unquoted). Damaged documents make the C
decoder raise a clear error (the event then goes to the Python path), never crash or read past the document
(tests/capture/test_native_asan.py runs this file under AddressSanitizer).
"""

from __future__ import annotations

import datetime as dt
import os
import struct
from dataclasses import dataclass
from decimal import Context, Decimal
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymysqlreplication.constants import FIELD_TYPE as F
from pymysqlreplication.json_binary import parse_json

from cdc.capture.nativeblock import native_block
from cdc.capture.rowblock import RowsMeta, rows_block
from cdc.rows import native
from cdc.rows.decode import FAST_PATH_ERRORS, RowDecoder
from cdc.rows.json_binary import library_read_binary_json
from cdc.schema import Column, TableSchema
from cdc.source import binlog_rows
from cdc.values import MySQLJsonText, encoder_for
from tests.hash_key import KEY

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY, LITERAL = 0, 1, 2, 3, 4
INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 5, 6, 7, 8, 9, 10, 11, 12, 15
_INTS = [(INT16, "<h", -2 ** 15, 2 ** 15 - 1), (UINT16, "<H", 0, 2 ** 16 - 1), (INT32, "<i", -2 ** 31, 2 ** 31 - 1),
         (UINT32, "<I", 0, 2 ** 32 - 1), (INT64, "<q", -2 ** 63, 2 ** 63 - 1), (UINT64, "<Q", 0, 2 ** 64 - 1)]
_DIG2BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]


@pytest.fixture(autouse=True)
def _native_decoder_built() -> None:
    if os.environ.get("CDC_NATIVE", "1").strip() == "0":
        pytest.skip("CDC_NATIVE=0: the C row decoder is switched off")
    assert native.native_module() is not None, native.PROBLEM


# --- an encoder of MySQL's binary JSON -------------------------------------------------------------------


@dataclass(frozen=True)
class Opaque:
    """An opaque value: a MySQL column type and its bytes."""

    mysql_type: int
    data: bytes


@dataclass(frozen=True)
class As:
    """A value with its encoding chosen: an int's type, or a container in the large format."""

    value: Any
    kind: int = -1
    large: bool = False


def var_length(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def decimal_opaque(value: Decimal, precision: int, scale: int) -> Opaque:
    """MySQL's binary DECIMAL(precision, scale) of value, with precision and scale in front (an opaque DECIMAL)."""
    sign, digits, exponent = Context(prec=100).quantize(value, Decimal(1).scaleb(-scale)).as_tuple()
    text = "".join(map(str, digits)).rjust(precision, "0")
    assert isinstance(exponent, int) and len(text) == precision, "value does not fit"
    intg, frac = text[:precision - scale], text[precision - scale:]
    groups = ([intg[:len(intg) % 9]] if len(intg) % 9 else []) + [intg[i:i + 9] for i in range(len(intg) % 9, len(intg), 9)]
    groups += [frac[i:i + 9] for i in range(0, len(frac), 9)]
    raw = bytearray(b"".join(int(g).to_bytes(_DIG2BYTES[len(g)], "big") for g in groups))
    raw[0] |= 0x80
    if sign:
        raw = bytearray(b ^ 0xFF for b in raw)
    return Opaque(F.NEWDECIMAL, bytes([precision, scale]) + bytes(raw))


def datetime_opaque(value: dt.datetime | dt.date, mysql_type: int = F.DATETIME) -> Opaque:
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    ymd = ((value.year * 13 + value.month) << 5) | value.day
    hms = (value.hour << 12) | (value.minute << 6) | value.second
    return Opaque(mysql_type, struct.pack("<q", ((ymd << 17 | hms) << 24) + value.microsecond))


def time_opaque(value: dt.time, negative: bool = False) -> Opaque:
    return time_packed(value.hour, value.minute, value.second, value.microsecond, negative)


def time_packed(hours: int, minutes: int, seconds: int, micro: int = 0, negative: bool = False) -> Opaque:
    """An opaque TIME as MySQL packs it (TIME_to_longlong_time_packed): hours up to 838, the sign on the whole."""
    packed = ((hours << 12 | minutes << 6 | seconds) << 24) + micro
    return Opaque(F.TIME, struct.pack("<q", -packed if negative else packed))


def _int_kind(value: int, kind: int) -> tuple[int, str]:
    for each, fmt, low, high in _INTS:
        if (kind == -1 or each == kind) and low <= value <= high:
            return each, fmt
    raise AssertionError(f"no JSON integer type holds {value}")


def scalar(value: Any) -> tuple[int, bytes]:
    """(type, bytes) of a value that is not a container."""
    kind = -1
    if isinstance(value, As):
        value, kind = value.value, value.kind
    if value is None or isinstance(value, bool):
        return LITERAL, bytes([{None: 0, True: 1, False: 2}[value]])
    if isinstance(value, int):
        kind, fmt = _int_kind(value, kind)
        return kind, struct.pack(fmt, value)
    if isinstance(value, float):
        return DOUBLE, struct.pack("<d", value)
    if isinstance(value, str):
        return STRING, var_length(len(value.encode())) + value.encode()
    if isinstance(value, Opaque):
        return OPAQUE, bytes([value.mysql_type]) + var_length(len(value.data)) + value.data
    raise AssertionError(f"not a JSON scalar: {value!r}")


def encode(value: Any) -> tuple[int, bytes]:
    """(type, bytes) of any value: a container's bytes start with its count and size."""
    large = isinstance(value, As) and value.large
    inner = value.value if isinstance(value, As) else value
    if isinstance(inner, dict):
        return container(sorted(inner.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode())), True, large)
    if isinstance(inner, list):
        return container(list(enumerate(inner)), False, large)
    return scalar(value)


def container(items: list[tuple[Any, Any]], is_object: bool, large: bool) -> tuple[int, bytes]:
    """An object (items: (key, value)) or array; in the large format when asked or when the small one overflows."""
    if not large:
        try:
            return _container(items, is_object, False)
        except struct.error:  # an offset past 0xFFFF
            pass
    return _container(items, is_object, True)


def _container(items: list[tuple[Any, Any]], is_object: bool, large: bool) -> tuple[int, bytes]:
    slot = 4 if large else 2
    fmt = "<I" if large else "<H"
    kind = (LARGE_OBJECT if large else SMALL_OBJECT) if is_object else (LARGE_ARRAY if large else SMALL_ARRAY)
    header = 2 * slot + len(items) * ((slot + 2 if is_object else 0) + 1 + slot)
    keys = [k.encode() for k, _ in items] if is_object else []
    tail = bytearray(b"".join(keys))
    key_entries, value_entries, at = b"", b"", header
    for key in keys:
        key_entries += struct.pack(fmt, at) + struct.pack("<H", len(key))
        at += len(key)
    for _, value in items:
        type_, data = encode(value)
        if type_ in (LITERAL, INT16, UINT16) or (large and type_ in (INT32, UINT32)):
            value_entries += bytes([type_]) + data.ljust(slot, b"\x00")
        else:
            value_entries += bytes([type_]) + struct.pack(fmt, header + len(tail))
            tail += data
    size = header + len(tail)
    return kind, struct.pack(fmt, len(items)) + struct.pack(fmt, size) + key_entries + value_entries + bytes(tail)


def document(value: Any) -> bytes:
    type_, data = encode(value)
    return bytes([type_]) + data


# --- the three decoders ----------------------------------------------------------------------------------

_LIB_COLUMNS = [SimpleNamespace(type=F.LONG, unsigned=False, name="id"), SimpleNamespace(type=F.JSON, length_size=4, name="doc")]
_SCHEMA = TableSchema("db", "t", (Column(name="id", type="int", data_type="int"),
                                  Column(name="doc", type="json", data_type="json")), ("id",), "p")
_META = RowsMeta("db", "t", "mysql-bin.000001", 4, "3e11fa47-71ca-11e1-9e33-c80aa9429562:7", 1, "c")


def _decoder() -> RowDecoder:
    return RowDecoder(_SCHEMA, columns=list(_LIB_COLUMNS))


def _body(docs: list[bytes | None]) -> bytes:
    return b"".join((b"\x02" + struct.pack("<i", i) if doc is None else
                     b"\x00" + struct.pack("<i", i) + struct.pack("<I", len(doc)) + doc) for i, doc in enumerate(docs))


class _Packet:
    """The two reads of the library's packet wrapper that read_binary_json makes, over one column's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read(self, n: int) -> bytes:
        self.at += n
        return self.data[self.at - n:self.at]

    def read_uint_by_size(self, size: int) -> int:
        return int.from_bytes(self.read(size), "little")


def library_lines(docs: list[bytes | None]) -> tuple[bytes, int]:
    """The plain library's path: its rows event reads each document through our packet wrapper's
    read_binary_json (cdc.source.binlog_rows), then cdc.values' encoder."""
    encode_json = encoder_for(_SCHEMA.columns[1])
    images = [(None, {"id": i, "doc": None if doc is None else encode_json(
        library_read_binary_json(_Packet(struct.pack("<I", len(doc)) + doc), 4, False))}) for i, doc in enumerate(docs)]
    return rows_block(images, ["id"], _META)


def _has_opaque(value: Any) -> bool:
    inner = value.value if isinstance(value, As) else value
    if isinstance(inner, dict):
        return any(_has_opaque(v) for v in inner.values())
    if isinstance(inner, list):
        return any(_has_opaque(v) for v in inner)
    return isinstance(inner, Opaque)


def _ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {k.decode(): _ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ready(v) for v in value]
    return value.decode() if isinstance(value, bytes) else value


def library_text(value: Any) -> bytes | None:
    """The library's parse_json of a container without opaque values, written compact and sorted: the structure
    oracle of the three decoders (the library loses opaque values, and shows a top-level scalar differently)."""
    inner = value.value if isinstance(value, As) else value
    if not isinstance(inner, (dict, list)) or _has_opaque(value):
        return None
    doc = document(value)
    return orjson.dumps(_ready(parse_json(doc[0], doc[1:])), option=orjson.OPT_SORT_KEYS)


def python_lines(decoder: RowDecoder, body: bytes) -> tuple[bytes, int] | None:
    try:
        images = decoder.fast_images(body, "c")
    except (*FAST_PATH_ERRORS, struct.error):
        return None
    return rows_block(images, decoder.key_names, _META)


def c_lines(decoder: RowDecoder, body: bytes) -> tuple[bytes, int] | None:
    assert decoder.native is not None
    return native_block(decoder.native, body, _META)


def three_way(docs: list[bytes | None]) -> bytes:
    decoder, body = _decoder(), _body(docs)
    expected = library_lines(docs)
    assert python_lines(decoder, body) == expected
    assert c_lines(decoder, body) == expected
    return expected[0]


def text_of(value: Any) -> str:
    """The change-log value of a document holding value, the same in the three decoders."""
    three_way([document(value)])
    doc = _decoder().fast_images(_body([document(value)]), "c")[0][1]["doc"]  # type: ignore[index]
    assert isinstance(doc, str)
    oracle = library_text(value)
    assert oracle is None or doc.encode() == oracle
    return doc


# --- tests -----------------------------------------------------------------------------------------------


def test_a_json_column_compiles_to_the_c_json_action() -> None:
    spec = native.column_spec(_LIB_COLUMNS[1], _SCHEMA.columns[1], lambda buf, pos: (None, pos), False)
    assert spec == (native.JSON, 4, 0, None)
    assert _decoder().native is not None, "a table with a MySQL 8 JSON column has a fast path and a C decoder"


_EXAMPLES = [
    {}, [], {"a": {}}, [[]], {"b": 1, "a": [True, False, None], "": "empty key"},
    {"é": "ü", "😀": "🎉", "\uffff": 1, "Z": 2, "z": 3, "a\"b": "c\\d", "tab\t": "nl\n\r\b\f\x00\x1f\u2028"},
    [0, -1, 2 ** 15 - 1, -2 ** 15, 2 ** 16 - 1, 2 ** 31 - 1, -2 ** 31, 2 ** 32 - 1, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1],
    [As(5, INT64), As(5, UINT64), As(-5, INT32), As(7, UINT32), As(7, INT16)],
    As({"k": [As(1, INT32), As(2, UINT32), As(-3, INT16), True]}, large=True),
    As([As({"x": As(2 ** 31, UINT32)}, large=True), As([-7, None], large=True)], large=True),
    [0.0, -0.0, 1.5, -2.25, 1e16, 1e-7, 1e-5, 0.1, 1.7976931348623157e308, 5e-324, 123456789.125, 1e22, 2.5e-300],
    [float("nan"), float("inf"), float("-inf")],
    ["", "plain", "x" * 200, "é" * 300],
    {"n": [{"m": [{"o": [1, {"p": "deep"}]}]}]},
    [decimal_opaque(Decimal("123.45"), 10, 2), decimal_opaque(Decimal("-0.5"), 5, 3), decimal_opaque(Decimal("42"), 5, 0),
     decimal_opaque(Decimal("-42.000"), 8, 3), decimal_opaque(Decimal("0"), 1, 0), decimal_opaque(Decimal("-0.00"), 4, 2),
     decimal_opaque(Decimal("18446744073709551615"), 20, 0), decimal_opaque(Decimal("-9223372036854775808"), 19, 0),
     decimal_opaque(Decimal("0.000000000000000000000000000001"), 31, 30),
     decimal_opaque(Decimal("12345678901234567890123456789012345.123456789012345678901234567891"), 65, 30)],
    [datetime_opaque(dt.datetime(2024, 2, 29, 23, 59, 58, 123456)), datetime_opaque(dt.datetime(1, 1, 1)),
     datetime_opaque(dt.date(2020, 1, 2), F.DATE), datetime_opaque(dt.datetime(9999, 12, 31, 1, 2, 3, 5), F.DATETIME2),
     Opaque(F.DATETIME, bytes(8)), Opaque(F.DATE, bytes(8))],
    [time_opaque(dt.time(12, 34, 56)), time_opaque(dt.time(0, 0, 0, 1)), time_opaque(dt.time(23, 59, 59, 999999), True),
     Opaque(F.TIME2, bytes(8)), time_opaque(dt.time(1, 2, 3, 4))],
    [Opaque(F.VARCHAR, "hé\"llo".encode()), Opaque(F.BLOB, b""), Opaque(F.GEOMETRY, b"\x01\x02\x7f")],
]
_TOP = [None, True, False, 0, -1, 2 ** 64 - 1, 1.5, -0.0, 1e100, float("nan"), "", "a \"quoted\" top\n", "é😀",
        decimal_opaque(Decimal("1.25"), 4, 2), decimal_opaque(Decimal("7"), 3, 0),
        datetime_opaque(dt.datetime(2001, 2, 3, 4, 5, 6)),
        Opaque(F.DATETIME, bytes(8)), time_opaque(dt.time(3, 4, 5, 6)), Opaque(F.VARCHAR, b"opaque text"), Opaque(F.VARCHAR, b""),
        Opaque(F.TIME, struct.pack("<q", ((1 << 37) | (5 << 12) | (7 << 6) | 9) << 24))]  # bits the library ignores


@pytest.mark.parametrize("value", _EXAMPLES + _TOP, ids=range(len(_EXAMPLES) + len(_TOP)))
def test_c_json_equals_the_library_and_the_python_fast_path(value: Any) -> None:
    text_of(value)


def _timestamp(value: dt.datetime) -> Opaque:
    return Opaque(F.TIMESTAMP, datetime_opaque(value).data)  # MySQL packs a TIMESTAMP as a DATETIME


# What MySQL's SELECT shows for each document (json_dom.cc's wrapper_to_string: temporal values through
# my_TIME_to_str with 6 fraction digits, DECIMAL through decimal2string, other opaque values as
# "base64:type<N>:<base64>"), compact and with keys sorted.
_MYSQL_TEXTS = [
    (time_opaque(dt.time(0, 0, 0, 10000)), '"00:00:00.010000"'),
    (time_opaque(dt.time(12, 34, 56)), '"12:34:56.000000"'),
    (time_opaque(dt.time(0, 0, 0, 1)), '"00:00:00.000001"'),
    (time_opaque(dt.time(23, 59, 59, 999999), negative=True), '"-23:59:59.999999"'),
    (time_packed(0, 0, 0, 500000, negative=True), '"-00:00:00.500000"'),
    (time_packed(838, 59, 59), '"838:59:59.000000"'),
    (time_packed(838, 59, 59, 0, negative=True), '"-838:59:59.000000"'),
    (time_packed(100, 0, 1, 10), '"100:00:01.000010"'),
    (Opaque(F.TIME, bytes(8)), '"00:00:00.000000"'),
    (datetime_opaque(dt.datetime(2024, 2, 29, 23, 59, 58)), '"2024-02-29 23:59:58.000000"'),
    (datetime_opaque(dt.datetime(2024, 2, 29, 23, 59, 58, 123456)), '"2024-02-29 23:59:58.123456"'),
    (datetime_opaque(dt.datetime(1, 1, 1, 0, 0, 0, 10000)), '"0001-01-01 00:00:00.010000"'),
    (_timestamp(dt.datetime(2001, 2, 3, 4, 5, 6, 7)), '"2001-02-03 04:05:06.000007"'),
    (Opaque(F.DATETIME, bytes(8)), '"0000-00-00 00:00:00.000000"'),
    (datetime_opaque(dt.date(2020, 1, 2), F.DATE), '"2020-01-02"'),
    (Opaque(F.DATE, bytes(8)), '"0000-00-00"'),
    (Opaque(F.DATE, struct.pack("<q", (2020 * 13 << 5) << 17 << 24)), '"2020-00-00"'),  # a zero month and day
    (Opaque(F.DATETIME, struct.pack("<q", ((2020 * 13 + 2) << 5 | 30) << 17 << 24)), '"2020-02-30 00:00:00.000000"'),
    (decimal_opaque(Decimal("12345678901234567890.123456789"), 29, 9), "12345678901234567890.123456789"),
    (decimal_opaque(Decimal("123.45"), 10, 2), "123.45"),
    (decimal_opaque(Decimal("-0.5"), 5, 3), "-0.500"),
    (decimal_opaque(Decimal("42"), 5, 0), "42"),
    (decimal_opaque(Decimal("-42.000"), 8, 3), "-42.000"),
    (decimal_opaque(Decimal("0.1"), 2, 1), "0.1"),
    (decimal_opaque(Decimal("12345678901234567890123456789012345.123456789012345678901234567891"), 65, 30),
     "12345678901234567890123456789012345.123456789012345678901234567891"),
    ("abc", '"abc"'),
    ("", '""'),
    ('a "quoted" top\n', '"a \\"quoted\\" top\\n"'),
    (None, "null"),
    (True, "true"),
    (7, "7"),
    ({"t": [time_opaque(dt.time(1, 2, 3, 40000)), decimal_opaque(Decimal("1.50"), 3, 2)],
      "d": datetime_opaque(dt.datetime(2020, 1, 2, 3, 4, 5)), "day": datetime_opaque(dt.date(2020, 1, 2), F.DATE)},
     '{"d":"2020-01-02 03:04:05.000000","day":"2020-01-02","t":["01:02:03.040000",1.50]}'),
    ([Opaque(F.VARCHAR, b"hi")], '["base64:type15:aGk="]'),
    (Opaque(F.BLOB, b""), '"base64:type252:"'),
    (Opaque(F.YEAR, b"\xe4\x07"), '"base64:type13:5Ac="'),
    (Opaque(F.BLOB, bytes(range(60))),  # MySQL's base64 breaks its lines at 76 characters
     '"base64:type252:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4\\nOTo7"'),
    (Opaque(F.VAR_STRING, "hé".encode()), '"hé"'),  # a string MySQL kept as opaque: shown as the string
    (Opaque(F.DATETIME2, bytes(8)), '"base64:type18:AAAAAAAAAAA="'),  # MySQL writes DATETIME (12), never 18
]


@pytest.mark.parametrize(("value", "text"), _MYSQL_TEXTS, ids=range(len(_MYSQL_TEXTS)))
def test_json_text_is_what_mysql_shows(value: Any, text: str) -> None:
    assert text_of(value) == text


def test_an_empty_document_is_json_null_as_mysql_reads_it() -> None:
    """MySQL reads a document of 0 bytes (an IGNOREd insert of NULL into NOT NULL) as JSON null
    (json_binary.cc's parse_binary): the text null, not the column's NULL."""
    three_way([b""])
    assert _decoder().fast_images(_body([b""]), "c")[0][1]["doc"] == "null"  # type: ignore[index]


def test_c_json_text_is_the_sorted_compact_document_as_a_string() -> None:
    docs = [document({"b": 1, "a": [True, None, 1.5, "é\n"], "aa": {}}), None, b"", document("top string"),
            document(None)]
    three_way(docs)
    images = _decoder().fast_images(_body(docs), "c")
    assert [after["doc"] for _, after in images] == ['{"a":[true,null,1.5,"é\\n"],"aa":{},"b":1}', None, "null",
                                                     '"top string"', "null"]


_KEYS = st.text(max_size=8) | st.sampled_from(["", "a", "é", "😀", "\uffff", "\x00", "\"", "\\"])
_SCALARS = (st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 64 - 1)
            | st.tuples(st.integers(-2 ** 63, 2 ** 63 - 1), st.sampled_from([INT64, UINT64])).filter(
                lambda t: t[0] >= 0 or t[1] == INT64).map(lambda t: As(*t))
            | st.floats() | st.text(max_size=20)
            | st.decimals(min_value=-10 ** 12, max_value=10 ** 12, places=4, allow_nan=False).map(
                lambda d: decimal_opaque(d, 17, 4))
            | st.datetimes(min_value=dt.datetime(1, 1, 1)).map(datetime_opaque)
            | st.dates().map(lambda d: datetime_opaque(d, F.DATE))
            | st.tuples(st.times(), st.booleans()).map(lambda t: time_opaque(*t))
            | st.tuples(st.integers(0, 838), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999999),
                        st.booleans()).map(lambda t: time_packed(*t))
            | st.datetimes(min_value=dt.datetime(1, 1, 1)).map(_timestamp)
            | st.text(max_size=10).map(lambda s: Opaque(F.VARCHAR, s.encode()))
            | st.text(max_size=10).map(lambda s: Opaque(F.VAR_STRING, s.encode()))
            | st.tuples(st.sampled_from([F.BLOB, F.BIT, F.YEAR, F.GEOMETRY, F.DATETIME2, F.TIME2, F.DECIMAL]),
                        st.binary(max_size=120)).map(lambda t: Opaque(*t)))
_VALUES = st.recursive(_SCALARS, lambda children: st.tuples(
    st.lists(children, max_size=5) | st.dictionaries(_KEYS, children, max_size=5), st.booleans()).map(
        lambda t: As(t[0], large=t[1])), max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.none() | _VALUES.map(document), min_size=1, max_size=4))
def test_random_documents_decode_alike_in_c_python_and_the_library(docs: list[bytes | None]) -> None:
    three_way(docs)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALUES)
def test_random_documents_have_the_librarys_structure(value: Any) -> None:
    text_of(value)


def test_a_large_container_past_64k_and_nesting_at_mysqls_limit() -> None:
    big = {f"key{i:05}": "v" * 20 for i in range(2500)}  # past 0xFFFF bytes: the encoder switches to the large format
    assert document(big)[0] == LARGE_OBJECT
    three_way([document(big)])
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    three_way([document(deep)])


def _raises(doc: bytes, match: str) -> None:
    decoder = _decoder()
    assert decoder.native is not None
    with pytest.raises(ValueError, match=match):
        decoder.native.rows(_body([doc]), "c", 0, (b"", b"", b"", b""))
    assert c_lines(decoder, _body([doc])) is None  # the event goes to the Python path


def test_c_json_raises_a_clear_error_on_damaged_documents() -> None:
    _raises(bytes([0x0D]) + b"\x00", "unknown value type")
    _raises(bytes([STRING, 5]) + b"ab", "a string runs past")
    _raises(document({"a": 1})[:6], "size runs past the document's end")
    _raises(document({"a": 1})[:3] + struct.pack("<H", 4) + document({"a": 1})[5:], "entries run past its size")
    _raises(document([1.5])[:6] + struct.pack("<H", 12) + document([1.5])[8:], "number past the document's end")
    off = bytearray(document(["abc"]))
    off[6:8] = struct.pack("<H", 0x7FFF)
    _raises(bytes(off), "offset past the document's end")
    key = bytearray(document({"k": "v"}))
    key[5:7] = struct.pack("<H", 0x7FFF)
    _raises(bytes(key), "a key past")
    _raises(bytes([LITERAL, 7]), "unknown literal")
    _raises(bytes([STRING, 0x80, 0x80, 0x80, 0x80, 0x80]), "length is cut or too long")
    _raises(document({"a": 1, "b": 2}).replace(b"b", b"a"), "duplicate key")
    _raises(document([Opaque(F.NEWDECIMAL, b"")]), "DECIMAL without")
    _raises(bytes([STRING, 2]) + b"\xc3\x28", "invalid UTF-8")
    _raises(document([time_packed(839, 0, 0)]), "a TIME out of range")  # MySQL's TIME ends at 838:59:59
    _raises(document([time_packed(1, 60, 0)]), "a TIME out of range")
    _raises(document([time_packed(1, 0, 0, 1000000)]), "a TIME out of range")
    _raises(document([Opaque(F.DATETIME, struct.pack("<q", ((2020 * 13 + 2) << 5 | 3) << 17 << 24 | 24 << 12 << 24))]),
            "a DATETIME out of range")
    _raises(document([Opaque(F.DATE, struct.pack("<q", (10000 * 13 << 5) << 17 << 24))]), "a DATETIME out of range")
    _raises(document([Opaque(F.TIMESTAMP, struct.pack("<q", 1000000))]), "a DATETIME out of range")
    _raises(document([Opaque(F.TIME, bytes(7))]), "shorter than 8 bytes")
    _raises(document([Opaque(F.NEWDECIMAL, bytes([2, 0, 0x80 | 0x7F]))]), "DECIMAL group out of range")
    _raises(document([Opaque(F.VAR_STRING, b"\xff")]), "invalid UTF-8")
    deep: Any = 1
    for _ in range(101):
        deep = [deep]
    _raises(document(deep), "nested deeper than 100")
    decoder = _decoder()
    assert decoder.native is not None
    with pytest.raises(ValueError, match="rows event truncated"):  # the document runs past the body itself
        decoder.native.rows(_body([document([1, 2, 3])])[:-2], "c", 0, (b"", b"", b"", b""))


_DAMAGE = st.sampled_from(["truncate", "flip", "garbage", "offset"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALUES.filter(lambda v: isinstance(v, As)).map(document), _DAMAGE, st.data())
def test_c_json_on_damaged_documents_raises_or_agrees_with_the_python_path(doc: bytes, how: str,
                                                                           data: st.DataObject) -> None:
    damaged = bytearray(doc)
    if how == "truncate":
        del damaged[data.draw(st.integers(1, len(damaged) - 1)) if len(damaged) > 1 else 1:]
    elif how == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            damaged[data.draw(st.integers(0, len(damaged) - 1))] ^= data.draw(st.integers(1, 255))
    elif how == "garbage":
        damaged = bytearray(data.draw(st.binary(min_size=1, max_size=200)))
    elif len(damaged) > 5:  # an offset or count field of the outer container pointed elsewhere
        at = data.draw(st.integers(1, len(damaged) - 2))
        damaged[at:at + 2] = struct.pack("<H", data.draw(st.integers(0, 0xFFFF)))
    decoder, body = _decoder(), _body([bytes(damaged)])
    got = c_lines(decoder, body)
    if got is not None:  # the C decoder was sure: the Python path says the same
        assert got == python_lines(decoder, body)


@pytest.mark.parametrize(("exclude", "hashed"), [({"doc"}, set()), (set(), {"doc"})])
def test_an_excluded_or_hashed_json_column_in_c(exclude: set[str], hashed: set[str]) -> None:
    """Excluded: read to find the row's end, then dropped; hashed: its Python reader and the hash (action PYTHON)."""
    decoder = RowDecoder(_SCHEMA, frozenset(exclude), frozenset(hashed), list(_LIB_COLUMNS), KEY if hashed else None)
    body = _body([document({"a": [1, "x"]}), None, document([1.5, {"é": None}])])
    assert c_lines(decoder, body) == python_lines(decoder, body) is not None


def test_the_librarys_rows_read_json_through_our_packet_wrapper() -> None:
    """The library's own rows (partial images, a type only it reads) call its packet's read_binary_json: ours gives
    MySQL's text (cdc.source.binlog_rows), not parse_json's values, which lose a TIME's sign and DATE from DATETIME."""
    doc = document({"t": time_packed(30, 0, 0, 0, negative=True), "d": datetime_opaque(dt.date(2020, 1, 2), F.DATE)})
    value = binlog_rows._PacketWrapper.read_binary_json(_Packet(struct.pack("<I", len(doc)) + doc), 4, False)
    assert isinstance(value, MySQLJsonText) and value == '{"d":"2020-01-02","t":"-30:00:00.000000"}'
    assert binlog_rows._PacketWrapper.read_binary_json(_Packet(bytes(4)), 4, False) == "null"
