"""Tail's row decoder in C (cdc/rows/_native*.c, built by `pip install -e .`) and its column program per table map.

The C decoder turns a full-image rows-event body straight into change lines (issue 28). Per column it runs
one action, all in C: integers, DECIMAL, DATETIME2, TIMESTAMP2, TIME2, DATE, YEAR, ENUM, FLOAT (the shortest
decimal that round-trips its 4 bytes), DOUBLE, BIT, SET, UTF-8 text (CHAR, VARCHAR, TEXT, MariaDB's JSON),
text in a single-byte charset (latin1 as MySQL means it, ascii, cp1250...: a table of each byte's JSON),
text in any other charset (ucs2, utf16, utf32, sjis...: CPython's codec, called from C), binary and GEOMETRY
in base64, MySQL 8's binary JSON as the text MySQL's SELECT shows (_native_json.c). Only hashed columns, and a
column whose schema and table map disagree, call their Python fast-path reader, whose value orjson writes. So
every table with a Python fast path has a C one too, and its lines are the Python path's.

The Python fast path (cdc.rows.compiled + cdc.capture.rowblock) stays the reference and the fallback: it
decodes an event whenever the extension is not built (no C compiler: the build is optional), is stale
(its ABI_VERSION is not this file's), CDC_NATIVE=0 is set, or the C decoder raised on the event's bytes
(invalid text, bytes a charset refuses, a truncated body...).
"""

from __future__ import annotations

import codecs
import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
from pymysqlreplication.constants import FIELD_TYPE as F

from cdc.native_build import stale_source
from cdc.native_floats import orjson_writes_exponents_as_c
from cdc.rows.readers import Reader, fraction
from cdc.rows.strings import by_shape
from cdc.schema import Column, TableSchema
from cdc.values import INTEGER_TYPES, SPATIAL_TYPES

ABI_VERSION = 6  # must match _native.c's: what compile(), rows() and finish() take
_ACTIONS = ("PYTHON", "INT", "DECIMAL", "TEXT", "BASE64", "DATETIME2", "DATE", "ENUM", "YEAR", "TIMESTAMP2", "TIME2",
            "FLOAT", "DOUBLE", "BIT", "SET", "CHARMAP", "CODEC", "JSON")
(PYTHON, INT, DECIMAL, TEXT, BASE64, DATETIME2, DATE, ENUM, YEAR, TIMESTAMP2, TIME2,
 FLOAT, DOUBLE, BIT, SET, CHARMAP, CODEC, JSON) = range(len(_ACTIONS))
_CLOCKS = {F.TIMESTAMP2: ("timestamp", TIMESTAMP2), F.TIME2: ("time", TIME2)}
_INT_SIZES = {F.TINY: 1, F.SHORT: 2, F.INT24: 3, F.LONG: 4, F.LONGLONG: 8}
_STRINGS = (F.VARCHAR, F.STRING, F.BLOB)

# The extension's sources (pyproject.toml), from this directory; cdc/_native_floats.c is the snapshot's too.
SOURCES = ("_native.c", "_native_image.c", "_native_numbers.c", "_native_types.c", "_native_json.c", "_native.h",
           "../_native_floats.c", "../_native_floats.h")
CHARMAP_ENTRY = 8  # _native.h's: bytes per byte of a CHARMAP table (the fragment's length, the fragment)
# orjson writes exponents as C does (cdc.native_floats): else FLOAT and DOUBLE keep their Python readers.
_FLOATS_IN_C = orjson_writes_exponents_as_c()
Spec = tuple[int, int, int, Any]  # (action, a, b, extra): _native.c's Column


def _load() -> tuple[ModuleType | None, str | None]:
    try:
        from cdc.rows import _native as module  # type: ignore[attr-defined]
    except ImportError as exc:
        return None, f"the C row decoder is not built ({exc}): run `pip install -e .`"
    if getattr(module, "ABI_VERSION", None) != ABI_VERSION or [getattr(module, n, None) for n in _ACTIONS] != list(
            range(len(_ACTIONS))):
        return None, "the built C row decoder is stale: run `pip install -e .` again"
    # In a checkout, a source edited after the build means the build is out of date.
    stale = stale_source(module, (Path(__file__).parent / name for name in SOURCES))
    return (None, stale) if stale else (module, None)


_MODULE, PROBLEM = _load()


def native_module() -> ModuleType | None:
    """The C decoder's module when it is built, current and not disabled (CDC_NATIVE=0); else None."""
    return None if os.environ.get("CDC_NATIVE", "1").strip() == "0" else _MODULE


Blocks = bytes | bytearray | list[bytes | bytearray]


def marker_filler() -> Callable[[Blocks, bytes, bytes], bytes] | None:
    """The C `finish(blocks, xid, end)`: blocks joined, their commit markers replaced in one pass (cdc.capture.txn)."""
    module = native_module()
    return None if module is None else module.finish


def column_spec(lib_column: Any, ours: Column, read: Reader, hashed: bool) -> Spec:
    """The C action of one table-map column; PYTHON (call `read`, the fast path's reader) for what C does not do."""
    kind = lib_column.type
    if hashed:
        return PYTHON, 0, 0, read
    if kind in _INT_SIZES and ours.data_type in INTEGER_TYPES:
        return INT, _INT_SIZES[kind], int(bool(lib_column.unsigned)), None
    if kind == F.NEWDECIMAL and ours.data_type == "decimal":
        return DECIMAL, lib_column.precision, lib_column.decimals, None
    if kind == F.DATETIME2 and ours.data_type == "datetime":
        size, scale = fraction(lib_column.fsp or 0)
        return DATETIME2, size, scale, None
    if kind == F.DATE and ours.data_type == "date":
        return DATE, 0, 0, None
    if kind == F.YEAR and ours.data_type == "year":
        return YEAR, 0, 0, None
    if kind in _CLOCKS and ours.data_type == _CLOCKS[kind][0]:
        return _CLOCKS[kind][1], fraction(lib_column.fsp or 0)[0], int((ours.fsp or 0) > 0), None
    if kind == F.ENUM and ours.data_type == "enum":
        labels = [orjson.dumps(label) for label in lib_column.enum_values or [""]]
        return ENUM, lib_column.size, 0, (*labels, b'""')  # the last: any index past the labels
    if kind in (F.FLOAT, F.DOUBLE) and ours.data_type == ("float" if kind == F.FLOAT else "double") and _FLOATS_IN_C:
        return FLOAT if kind == F.FLOAT else DOUBLE, 0, 0, None
    if kind == F.BIT and ours.data_type == "bit" and 1 <= lib_column.bytes <= 8:
        return BIT, lib_column.bytes, 0, None
    if kind == F.SET and ours.data_type == "set" and 1 <= lib_column.size <= 8:
        members = tuple(lib_column.set_values or ())
        # cdc.values orders the members by our column's labels: the same labels, each once, is definition order.
        if members == tuple(ours.set_values or ()) and len(set(members)) == len(members) <= 64:
            return SET, lib_column.size, 0, tuple(orjson.dumps(member) for member in members)
    if kind == F.GEOMETRY and ours.data_type in SPATIAL_TYPES and 1 <= lib_column.length_size <= 4:
        return BASE64, lib_column.length_size, 0, None  # cdc.values: the SRID and WKB bytes in base64
    if kind == F.JSON and ours.data_type == "json":
        return JSON, lib_column.length_size, 0, None
    if kind in _STRINGS:
        shape = by_shape(lib_column, ours, _text, lambda size, pad: (BASE64, size, pad, None))
        if shape is not None:
            return shape
    return PYTHON, 0, 0, read


def _text(size: int, codec: str) -> Spec | None:
    """A text column's action: TEXT for UTF-8, CHARMAP for a single-byte charset, CODEC for any other codec."""
    if codec == "utf-8":
        return TEXT, size, 0, None
    try:
        codecs.lookup(codec)
    except LookupError:
        return None
    table = charmap(codec)
    return (CHARMAP, size, 0, table) if table is not None else (CODEC, size, 0, codec)


@functools.cache
def charmap(codec: str) -> bytes | None:
    """The CHARMAP table of a single-byte codec (each byte's JSON fragment), or None if bytes do not decode alone.

    Single-byte: every byte decodes alone to one character or not at all (at least the 128 of ASCII do), and
    every pair of bytes decodes to the two characters, or fails when one of them does. The charmap codecs of
    cdc.values (latin1, ascii, cp1250, koi8r...) pass, and decode byte by byte by construction; sjis, gbk,
    utf16 and the other multi-byte ones fail (tests/capture/test_nativeblock.py pins which is which).
    """
    chars: list[str | None] = []
    for byte in range(256):
        try:
            chars.append(bytes([byte]).decode(codec))
        except ValueError:
            chars.append(None)
    if sum(char is not None for char in chars) < 128 or any(char is not None and len(char) != 1 for char in chars):
        return None
    for first in range(256):
        for second in range(256):
            try:
                got: str | None = bytes([first, second]).decode(codec)
            except ValueError:
                got = None
            one, two = chars[first], chars[second]
            if got != (None if one is None or two is None else one + two):
                return None
    table = bytearray()
    for char in chars:
        fragment = b"" if char is None else orjson.dumps(char)[1:-1]
        table += bytes([len(fragment)]) + fragment.ljust(CHARMAP_ENTRY - 1, b"\0")
    return bytes(table)


class NativeRows:
    """One table's C decoder: rows(body, op, first, pieces) gives the lines rowblock.rows_block would."""

    def __init__(self, module: ModuleType, specs: Sequence[Spec], names: Sequence[str | None],
                 key_names: Sequence[str]) -> None:
        index = {name: i for i, name in enumerate(names) if name is not None}
        entries = tuple((index[name], orjson.dumps(name) + b":") for name in sorted(index))
        keys = tuple((index[name], orjson.dumps(name) + b":") for name in sorted(key_names))
        self._rows = module.rows
        self._plan = module.compile(tuple(specs), entries, keys, orjson.dumps)

    def rows(self, body: bytes, op: str, first: int, pieces: tuple[bytes, bytes, bytes, bytes]) -> tuple[bytes, int]:
        return self._rows(self._plan, body, op, first, *pieces)  # type: ignore[no-any-return]


def native_rows(lib_columns: list[Any], schema: TableSchema, plan: Sequence[tuple[str | None, Reader]],
                hashed: frozenset[str], key_names: Sequence[str]) -> NativeRows | None:
    """The C decoder of a table whose fast path reads with `plan` (one (name or None, reader) per column), or None.

    None when the extension is not there, or the lines would not be the fast path's by construction: no kept
    column (the key then comes from the other image), or a key column that is not in the image.
    """
    module = native_module()
    names = [None if name is None or name.startswith("\x00") else name for name, _ in plan]  # EncodedImageReader's
    if module is None or not any(n is not None for n in names) or not set(key_names) <= set(names):
        return None
    specs = [column_spec(lib, ours, read, ours.name in hashed)
             for lib, ours, (_, read) in zip(lib_columns, schema.columns, plan, strict=True)]
    return NativeRows(module, specs, names, key_names)
