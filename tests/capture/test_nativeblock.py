"""The C row decoder (cdc.rows._native through cdc.capture.nativeblock) against the Python fast path (issue 28).

Random tables of every type the fast path reads (tests/rows/test_compiled.py's strategy: DECIMAL of any
precision and scale, DATETIME of any fsp, 1-4 byte lengths, hostile text; then FLOAT and DOUBLE of any
bits (subnormals, -0.0, nan, inf), BIT(1-64), SETs of up to 64 labels, text in latin1, ascii, ucs2, utf32
and sjis, GEOMETRY), random NULL masks, excluded, hashed and key columns, every op, skipped first rows:
  - on valid bodies the C lines are rows_block's over the Python images, byte for byte;
  - fuzz: on truncated and corrupted bodies the C decoder raises a clear error or, when it returns lines,
    they are exactly what the Python path returns (it never decides differently from the oracle), and it
    never crashes or reads past the body (tests/capture/test_native_asan.py runs this file under ASan).
"""

from __future__ import annotations

import os
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymysqlreplication.constants import FIELD_TYPE as F

from cdc.capture.nativeblock import IS_CURRENT, KNOWN_FIELDS, native_block
from cdc.capture.rowblock import RowsMeta, rows_block
from cdc.rows import native
from cdc.rows.decode import FAST_PATH_ERRORS, RowDecoder
from cdc.schema import Column, TableSchema
from tests.hash_key import KEY
from tests.rows.test_compiled import tables


@pytest.fixture(autouse=True)
def _native_decoder_built() -> None:
    """The C decoder is built by `pip install -e .` (scripts/setup.sh): missing or stale fails, unless CDC_NATIVE=0."""
    if os.environ.get("CDC_NATIVE", "1").strip() == "0":
        pytest.skip("CDC_NATIVE=0: the C row decoder is switched off")
    assert native.native_module() is not None, native.PROBLEM


def _clocks(data: st.DataObject) -> list[tuple[tuple[Any, Column], Any]]:
    """TIMESTAMP(fsp), TIME(fsp) and YEAR columns (read in C too) with values of their whole binlog range."""
    fsp = data.draw(st.integers(0, 6))
    size = (fsp + 1) // 2
    fractions = st.integers(0, 10 ** (2 * size) - 1) if size else st.just(0)
    return [
        ((SimpleNamespace(type=F.TIMESTAMP2, fsp=fsp), Column(name="ts", type="timestamp", data_type="timestamp", fsp=fsp)),
         st.tuples(st.integers(0, 2 ** 32 - 1), fractions).map(lambda t: t[0].to_bytes(4, "big") + t[1].to_bytes(size, "big"))),
        ((SimpleNamespace(type=F.TIME2, fsp=fsp), Column(name="tm", type="time", data_type="time", fsp=fsp)),
         st.integers(0, 256 ** (3 + size) - 1).map(lambda v: v.to_bytes(3 + size, "big"))),
        ((SimpleNamespace(type=F.YEAR), Column(name="yr", type="year(4)", data_type="year")),
         st.integers(0, 255).map(lambda v: bytes([v]))),
    ]


def _length(size: int) -> Any:
    return lambda raw: len(raw).to_bytes(size, "little") + raw


_CHARSETS = {  # charset -> its valid text as bytes (the codec's own encoding of any text it holds)
    "latin1": st.binary(max_size=30), "ascii": st.binary(max_size=30).map(lambda b: bytes(c & 0x7F for c in b)),
    "ucs2": st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=10).map(
        lambda t: t.encode("utf-16-be")),
    "utf32": st.text(max_size=8).map(lambda t: t.encode("utf-32-be")),
    "sjis": st.text("aZ\\\"\n\uff76\uff80\u65e5\u672c\u3042", max_size=10).map(lambda t: t.encode("shift_jis")),
}


def _types(data: st.DataObject) -> list[tuple[tuple[Any, Column], Any]]:
    """FLOAT, DOUBLE, BIT, SET, other charsets and GEOMETRY (read in C since issue 28), with hostile values."""
    bits = data.draw(st.integers(1, 64))
    labels = data.draw(st.lists(st.text(max_size=4).filter(lambda t: "," not in t), unique=True, max_size=64))
    set_size = {1: 1, 2: 2, 3: 3, 4: 4}.get((len(labels) + 7) // 8 or 1, 8)
    charset = data.draw(st.sampled_from(sorted(_CHARSETS)))
    text_size = data.draw(st.sampled_from([1, 2]))
    length_size = data.draw(st.sampled_from([1, 2, 3, 4]))
    floats = st.binary(min_size=4, max_size=4) | st.sampled_from([1.4e-45, 1.17549435e-38, 3.4028235e38, -0.0, 5.5e-5,
                                                                   1e-10, 16777217.0]).map(lambda v: struct.pack("<f", v))
    doubles = st.binary(min_size=8, max_size=8) | st.sampled_from([5e-324, 2.2250738585072014e-308, -0.0, 1e16, 1e-05,
                                                                    9.12829e-05, 1.5e-07]).map(lambda v: struct.pack("<d", v))
    return [
        ((SimpleNamespace(type=F.FLOAT), Column(name="f32", type="float", data_type="float")), floats),
        ((SimpleNamespace(type=F.DOUBLE), Column(name="f64", type="double", data_type="double")), doubles),
        ((SimpleNamespace(type=F.BIT, bits=bits, bytes=(bits + 7) // 8), Column(name="bits", type=f"bit({bits})",
                                                                                data_type="bit")),
         st.binary(min_size=(bits + 7) // 8, max_size=(bits + 7) // 8)),
        ((SimpleNamespace(type=F.SET, size=set_size, set_values=labels),
          Column(name="tags", type="set", data_type="set", set_values=tuple(labels), charset="utf8mb4")),
         st.binary(min_size=set_size, max_size=set_size)),
        ((SimpleNamespace(type=F.VARCHAR, max_length=300 if text_size == 2 else 40),
          Column(name="other", type="varchar(10)", data_type="varchar", charset=charset)),
         _CHARSETS[charset].map(_length(text_size))),
        ((SimpleNamespace(type=F.GEOMETRY, length_size=length_size), Column(name="geo", type="geometry",
                                                                            data_type="geometry")),
         st.binary(max_size=40).map(_length(length_size))),
    ]


def _table(data: st.DataObject) -> tuple[RowDecoder, list[Any]]:
    specs, values = data.draw(tables())
    for spec, value in _clocks(data) + _types(data):
        specs.append(spec)
        values.append(value)
    names = [ours.name for _, ours in specs]
    key = data.draw(st.sampled_from([(), ("id",), ("name", "id")]))
    exclude = frozenset(data.draw(st.sets(st.sampled_from(names), max_size=2))) - set(key)  # tail keeps key columns
    hashed = frozenset(data.draw(st.sets(st.sampled_from(names), max_size=2))) - exclude
    schema = TableSchema("db", "t", tuple(ours for _, ours in specs), key, "p")
    decoder = RowDecoder(schema, exclude, hashed, [lib for lib, _ in specs], KEY if hashed else None)
    return decoder, values


def _body(data: st.DataObject, decoder: RowDecoder, values: list[Any], images: int) -> bytes:
    count = len(values)
    body = b""
    for _ in range(images):
        nulls = data.draw(st.sampled_from([0, 2 ** count - 1]) | st.integers(0, 2 ** count - 1))
        body += nulls.to_bytes((count + 7) // 8, "little")
        body += b"".join(data.draw(value) for i, value in enumerate(values) if not nulls >> i & 1)
    return body


def _meta(data: st.DataObject, op: str) -> RowsMeta:
    meta = RowsMeta("shop \"db\"", "t\u00e9\n", "mariadb-bin.000007", data.draw(st.integers(4, 2 ** 40)),
                    data.draw(st.sampled_from([None, "0-1-42"])), data.draw(st.sampled_from([None, 1, 2 ** 32 - 1])),
                    op, first=data.draw(st.sampled_from([0, 0, 1, 3])), seq_offset=data.draw(st.sampled_from([0, 5])))
    if "fk_checks" in RowsMeta._fields:  # issue 24's flag: rendered by both paths
        meta = meta._replace(fk_checks=data.draw(st.booleans()))
    return meta


def test_the_c_pieces_know_every_field_of_rows_meta() -> None:
    """A field added to RowsMeta may change the lines: cdc.capture.nativeblock.pieces must render it too."""
    assert set(RowsMeta._fields) <= KNOWN_FIELDS, "teach nativeblock.pieces the new RowsMeta fields, then KNOWN_FIELDS"
    assert IS_CURRENT


def _python(decoder: RowDecoder, body: bytes, meta: RowsMeta) -> tuple[bytes, int] | None:
    try:
        images = decoder.fast_images(body, meta.op)
    except (*FAST_PATH_ERRORS, struct.error):
        return None
    return rows_block(images, decoder.key_names, meta)


def _c(decoder: RowDecoder, body: bytes, meta: RowsMeta) -> tuple[bytes, int] | None:
    assert decoder.native is not None, "every table with a Python fast path has a C one"
    return native_block(decoder.native, body, meta)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_c_lines_equal_the_python_fast_path(data: st.DataObject) -> None:
    decoder, values = _table(data)
    op = data.draw(st.sampled_from("cud"))
    rows = data.draw(st.integers(0, 4))
    body = _body(data, decoder, values, rows * (2 if op == "u" else 1))
    meta = _meta(data, op)
    expected = _python(decoder, body, meta)
    assert expected is not None
    assert _c(decoder, body, meta) == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_c_decoder_on_truncated_and_corrupted_events(data: st.DataObject) -> None:
    decoder, values = _table(data)
    op = data.draw(st.sampled_from("cud"))
    body = bytearray(_body(data, decoder, values, data.draw(st.integers(1, 4))))
    how = data.draw(st.sampled_from(["truncate", "flip", "garbage", "append"]))
    if how == "truncate":
        del body[data.draw(st.integers(0, len(body) - 1)):]
    elif how == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            body[data.draw(st.integers(0, len(body) - 1))] ^= data.draw(st.integers(1, 255))
    elif how == "garbage":
        body = bytearray(data.draw(st.binary(min_size=1, max_size=300)))
    else:
        body += data.draw(st.binary(min_size=1, max_size=8))
    meta = _meta(data, op)
    got = _c(decoder, bytes(body), meta)
    if got is not None:  # the C decoder was sure: the oracle must say the same
        assert got == _python(decoder, bytes(body), meta)


def test_c_decoder_raises_a_clear_error_on_a_truncated_value() -> None:
    lib = SimpleNamespace(type=F.VARCHAR, max_length=60, name="name")
    schema = TableSchema("db", "t", (Column(name="name", type="varchar(15)", data_type="varchar", charset="utf8mb4"),), (), "p")
    decoder = RowDecoder(schema, columns=[lib])
    assert decoder.native is not None
    with pytest.raises(ValueError, match="truncated: a value runs past byte 12 of 5"):
        decoder.native.rows(b"\x00\x0aabc", "c", 0, (b"", b"", b"", b""))
    with pytest.raises(ValueError, match="invalid UTF-8"):
        decoder.native.rows(b"\x00\x02\xc3\x28", "c", 0, (b"", b"", b"", b""))


def test_without_the_extension_the_python_path_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """No C compiler at install (or CDC_NATIVE=0): no C decoder, and the Python fast path gives the lines."""
    schema = TableSchema("db", "t", (Column(name="id", type="int", data_type="int"),), ("id",), "p")
    monkeypatch.setattr(native, "_MODULE", None)
    decoder = RowDecoder(schema, columns=[SimpleNamespace(type=F.LONG, unsigned=False, name="id")])
    assert decoder.has_fast_path and decoder.native is None
    monkeypatch.undo()
    monkeypatch.setenv("CDC_NATIVE", "0")
    assert RowDecoder(schema, columns=[SimpleNamespace(type=F.LONG, unsigned=False, name="id")]).native is None


# Runs around the C decoder's eight-byte steps: plain ASCII mixed with every byte it must look at on its own
# (quote, backslash, controls, DEL, multi-byte UTF-8, invalid UTF-8), and binary of every length mod 3.
_RUN_TEXT = st.lists(st.sampled_from(["abcdefgh", "x", "\"", "\\", "\x00", "\x1f", " ", "\x7f", "é", "🎉", "\u2028"]),
                     max_size=12).map(lambda parts: "".join(parts).encode())
_RUN_BYTES = _RUN_TEXT | st.binary(max_size=40) | st.just(b"ok\xc3(")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_c_text_and_base64_runs_equal_the_python_fast_path(data: st.DataObject) -> None:
    text, blob = data.draw(_RUN_BYTES), data.draw(st.binary(max_size=20))
    pad = data.draw(st.sampled_from([0, 0, 1, 5, 16]))
    specs = [(SimpleNamespace(type=F.LONG, unsigned=False), Column(name="id", type="int", data_type="int")),
             (SimpleNamespace(type=F.VARCHAR, max_length=400),
              Column(name="s", type="varchar(100)", data_type="varchar", charset="utf8mb4")),
             (SimpleNamespace(type=F.STRING, max_length=pad or 255, real_type=F.STRING),
              Column(name="b", type=f"binary({pad})" if pad else "varbinary(255)",
                     data_type="binary" if pad else "varbinary"))]
    schema = TableSchema("db", "t", tuple(ours for _, ours in specs), ("id",), "p")
    decoder = RowDecoder(schema, frozenset(), frozenset(), [lib for lib, _ in specs])
    blob = blob[:pad] if pad else blob
    body = b"\x00" + struct.pack("<i", 7) + struct.pack("<H", len(text)) + text + bytes([len(blob)]) + blob
    meta = RowsMeta("db", "t", "mariadb-bin.000001", 4, None, 1, "c")
    assert decoder.native is not None
    assert _c(decoder, body, meta) == _python(decoder, body, meta)


def _one_column(lib: Any, ours: Column) -> RowDecoder:
    schema = TableSchema("db", "t", (ours,), (), "p")
    return RowDecoder(schema, columns=[lib])


@pytest.mark.parametrize("charset", ["latin1", "ascii", "ucs2", "utf16", "utf16le", "utf32", "sjis", "gbk", "cp1250",
                                     "koi8r", "big5"])
@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=12))
def test_c_text_in_other_charsets_equals_the_python_fast_path(charset: str, raw: bytes) -> None:
    """Any bytes in a text column of each charset: the same line, or both paths refuse them (C then Python)."""
    decoder = _one_column(SimpleNamespace(type=F.VARCHAR, max_length=40),
                          Column(name="v", type="varchar(10)", data_type="varchar", charset=charset))
    assert decoder.native is not None
    meta = RowsMeta("db", "t", "mariadb-bin.000001", 4, None, 1, "c")
    body = b"\x00" + bytes([len(raw)]) + raw
    assert _c(decoder, body, meta) == _python(decoder, body, meta)


def test_single_byte_charsets_are_read_through_a_table() -> None:
    """latin1 (MySQL's cp1252, every byte a character), ascii and the other single-byte charsets go through a
    table of each byte's JSON; multi-byte ones through CPython's codec; hashed columns still call Python."""
    from cdc.values import CHARSET_CODECS

    multi = {"utf8mb4", "utf8mb3", "utf8", "ucs2", "utf16", "utf16le", "utf32", "gbk", "gb2312", "gb18030", "big5", "sjis",
             "cp932", "ujis", "eucjpms", "euckr"}
    for charset, codec in CHARSET_CODECS.items():
        assert (native.charmap(codec) is None) == (charset in multi), charset
    table = native.charmap(CHARSET_CODECS["latin1"])
    assert table is not None and table[0x80 * 8:0x80 * 8 + 4] == b"\x03\xe2\x82\xac"  # 0x80 is the euro sign
    assert table[0x81 * 8:0x81 * 8 + 3] == b"\x02\xc2\x81" and table[ord('"') * 8:ord('"') * 8 + 3] == b'\x02\\"'
    ascii_table = native.charmap("ascii")
    assert ascii_table is not None and ascii_table[0xFF * 8] == 0
    lib = SimpleNamespace(type=F.VARCHAR, max_length=40)
    ours = Column(name="v", type="varchar(10)", data_type="varchar", charset="latin1")
    assert native.column_spec(lib, ours, lambda buf, pos: (None, pos), False)[0] == native.CHARMAP
    assert native.column_spec(lib, ours, lambda buf, pos: (None, pos), True)[0] == native.PYTHON
    ucs2 = Column(name="v", type="varchar(10)", data_type="varchar", charset="ucs2")
    assert native.column_spec(lib, ucs2, lambda buf, pos: (None, pos), False)[:1] == (native.CODEC,)


def test_c_decoder_raises_on_bytes_a_charset_refuses() -> None:
    """The exactness rule for the new text actions: a byte outside ascii, or invalid utf16, raises ValueError."""
    for charset, raw, message in [("ascii", b"ok\x80", "byte 0x80 at 2 of a text value is not in its charset"),
                                  ("ucs2", b"\xd8\x00", "utf-16")]:
        decoder = _one_column(SimpleNamespace(type=F.VARCHAR, max_length=40),
                              Column(name="v", type="varchar(10)", data_type="varchar", charset=charset))
        assert decoder.native is not None
        with pytest.raises(ValueError, match=message):
            decoder.native.rows(b"\x00" + bytes([len(raw)]) + raw, "c", 0, (b"", b"", b"", b""))
