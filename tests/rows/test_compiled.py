"""The compiled image reader (cdc.rows.compiled) returns what the interpreted one (images.EncodedImageReader) does.

Same values and same end offset, for random rows of every inlined type (DECIMAL of any precision and
scale, DATETIME of any fsp, 1-4 byte lengths), random NULL masks, excluded, hashed and non-inlined
(FLOAT, TIME) columns. The real-binlog comparison with the library is test_decode_differential.py.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pymysqlreplication.constants import FIELD_TYPE as F

from cdc.rows.compiled import CompiledImageReader
from cdc.rows.decimals import DIG2BYTES
from cdc.rows.decode import fast_reader
from cdc.rows.images import EncodedImageReader
from cdc.schema import Column, TableSchema
from tests.rows.test_mysql_types import pack_decimal


def _spec(name: str, lib: dict[str, Any], ours: dict[str, Any]) -> tuple[SimpleNamespace, Column]:
    return SimpleNamespace(**lib), Column(name=name, **ours)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[tuple[Any, Column]], list[Any]]:
    """Column specs and one value strategy (value -> bytes) per column."""
    precision = draw(st.integers(1, 65))
    scale = draw(st.integers(0, min(30, precision)))
    fsp, blob_size, varchar_len = draw(st.integers(0, 6)), draw(st.sampled_from([1, 2, 3, 4])), draw(st.sampled_from([60, 300]))
    intg = precision - scale
    digits = ([intg % 9] if intg % 9 else []) + [9] * (intg // 9) + [9] * (scale // 9) + ([scale % 9] if scale % 9 else [])
    decimal = st.tuples(st.booleans(), st.tuples(*[st.integers(0, 10 ** d - 1) for d in digits])).map(
        lambda case: pack_decimal(case[0], [(DIG2BYTES[d], v) for d, v in zip(digits, case[1])]))
    fsize = (fsp + 1) // 2
    datetime = st.tuples(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 86399),
                         st.integers(0, 256 ** fsize - 1)).map(lambda t: (
        ((1 << 39) | ((t[0] * 13 + t[1]) << 22) | (t[2] << 17) | (t[3] // 3600 << 12) | (t[3] // 60 % 60 << 6) | t[3] % 60)
        .to_bytes(5, "big") + (t[4] % 10 ** (2 * fsize) if fsize else 0).to_bytes(fsize, "big")))
    length = 2 if varchar_len > 255 else 1
    text = st.text(max_size=40).map(lambda s: len(s.encode()).to_bytes(length, "little") + s.encode())
    json = st.text(max_size=40).map(lambda s: len(s.encode()).to_bytes(blob_size, "little") + s.encode())
    blob = st.binary(max_size=40).map(lambda b: len(b).to_bytes(blob_size, "little") + b)
    columns = [
        (_spec("id", {"type": F.LONG, "unsigned": False}, {"type": "int", "data_type": "int"}),
         st.integers(-2 ** 31, 2 ** 31 - 1).map(lambda v: struct.pack("<i", v))),
        (_spec("acct", {"type": F.LONGLONG, "unsigned": True}, {"type": "bigint", "data_type": "bigint", "unsigned": True}),
         st.integers(0, 2 ** 64 - 1).map(lambda v: struct.pack("<Q", v))),
        (_spec("tiny", {"type": F.TINY, "unsigned": False}, {"type": "tinyint", "data_type": "tinyint"}),
         st.integers(-128, 127).map(lambda v: struct.pack("<b", v))),
        (_spec("mid", {"type": F.INT24, "unsigned": False}, {"type": "mediumint", "data_type": "mediumint"}),
         st.integers(-2 ** 23, 2 ** 23 - 1).map(lambda v: v.to_bytes(3, "little", signed=True))),
        (_spec("dbl", {"type": F.DOUBLE}, {"type": "double", "data_type": "double"}),
         st.floats(allow_nan=False).map(lambda v: struct.pack("<d", v))),
        (_spec("flt", {"type": F.FLOAT}, {"type": "float", "data_type": "float"}),  # not inlined: calls its reader
         st.floats(width=32, allow_nan=False, allow_infinity=False).map(lambda v: struct.pack("<f", v))),
        (_spec("amt", {"type": F.NEWDECIMAL, "precision": precision, "decimals": scale},
               {"type": "decimal", "data_type": "decimal", "precision": precision, "scale": scale}), decimal),
        (_spec("at", {"type": F.DATETIME2, "fsp": fsp}, {"type": "datetime", "data_type": "datetime", "fsp": fsp}),
         datetime),
        (_spec("day", {"type": F.DATE}, {"type": "date", "data_type": "date"}),
         st.integers(0, 2 ** 24 - 1).map(lambda v: v.to_bytes(3, "little"))),
        (_spec("name", {"type": F.VARCHAR, "max_length": varchar_len},
               {"type": "varchar", "data_type": "varchar", "charset": "utf8mb4"}), text),
        (_spec("doc", {"type": F.BLOB, "length_size": blob_size}, {"type": "json", "data_type": "json"}), json),
        (_spec("raw", {"type": F.BLOB, "length_size": blob_size}, {"type": "blob", "data_type": "blob"}), blob),
        (_spec("bin", {"type": F.STRING, "max_length": 8}, {"type": "binary(8)", "data_type": "binary"}),
         st.binary(max_size=8).map(lambda b: bytes([len(b)]) + b)),
        (_spec("st", {"type": F.ENUM, "size": 1, "enum_values": ["", "a", "b"]},
               {"type": "enum('a','b')", "data_type": "enum", "enum_values": ("a", "b")}),
         st.integers(0, 5).map(lambda v: bytes([v]))),
    ]
    order = draw(st.permutations(range(len(columns))))
    return [columns[i][0] for i in order], [columns[i][1] for i in order]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_compiled_reader_equals_the_interpreted_one(data: st.DataObject) -> None:
    specs, values = data.draw(tables())
    names = [ours.name for _, ours in specs]
    exclude = frozenset(data.draw(st.sets(st.sampled_from(names), max_size=2)))
    hashed = frozenset(data.draw(st.sets(st.sampled_from(names), max_size=2))) - exclude
    schema = TableSchema("db", "t", tuple(ours for _, ours in specs), (), "p")
    compiled = fast_reader([lib for lib, _ in specs], schema, exclude, hashed)
    assert isinstance(compiled, CompiledImageReader)
    interpreted = EncodedImageReader([(None if n.startswith("\x00") else n, r) for n, r in compiled.plan])
    body = b""
    for _ in range(data.draw(st.integers(1, 4))):
        nulls = data.draw(st.sampled_from([0, 2 ** len(specs) - 1]) | st.integers(0, 2 ** len(specs) - 1))
        body += nulls.to_bytes(compiled.bitmap_size, "little")
        body += b"".join(data.draw(value) for i, value in enumerate(values) if not nulls >> i & 1)
    pos, expected = 0, []
    while pos < len(body):
        image, pos = interpreted.image(body, pos)
        expected.append((image, pos))
    pos, got = 0, []
    while pos < len(body):
        image, pos = compiled.image(body, pos)
        got.append((image, pos))
    assert got == expected
