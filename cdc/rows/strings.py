"""CHAR, VARCHAR, TEXT, BINARY, VARBINARY, BLOB, JSON, GEOMETRY: a length prefix and the bytes.

The prefix is 1 or 2 bytes for CHAR/VARCHAR (2 past 255 bytes of column), 1-4 for the BLOB/TEXT sizes.
MariaDB's JSON is a LONGTEXT; MySQL 8's JSON is its binary document (cdc.rows.json_binary).
Text is decoded with the column's MySQL charset (latin1 is cp1252 with every byte a character, not
ISO-8859-1: cdc.values), binary becomes base64, and BINARY(n) gets back the trailing 0x00 the binlog strips.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from typing import Any, TypeVar

from pymysqlreplication.constants import FIELD_TYPE

from cdc.rows.readers import ColumnType, Fix, Inline, Reader, length_of, length_source
from cdc.schema import Column
from cdc.values import TEXT_TYPES, codec_for

T = TypeVar("T")

BYTE_TYPES = frozenset({"varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
# Our data types whose change-log value the encoded readers produce: BINARY(n) comes only as a STRING column.
ENCODED = TEXT_TYPES | BYTE_TYPES | {"json"}
ENCODED_FIXED = ENCODED | {"binary"}
_BLOB_NAMES = {1: ("tinyblob", "tinytext"), 2: ("blob", "text"), 3: ("mediumblob", "mediumtext"),
               4: ("longblob", "longtext")}
# Bytes per character: a table map gives a CHAR/VARCHAR's length in bytes, information_schema in characters.
_MBMAXLEN = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "big5": 2,
             "gbk": 2, "gb2312": 2, "gb18030": 4, "sjis": 2, "cp932": 2, "ujis": 3, "eucjpms": 3, "euckr": 2}


def _length_size(column: Any) -> int:
    return column.length_size if column.type in (FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY) else (
        2 if column.max_length > 255 else 1)


def bytes_reader(column: Any) -> Reader:
    """A reader of the raw bytes (the Python value: cdc.values decodes it with the column's charset)."""
    length_size = _length_size(column)

    def read(buf: Any, pos: int) -> tuple[bytes, int]:
        end = pos + length_size
        n = int.from_bytes(buf[pos:end], "little")
        return bytes(buf[end:end + n]), end + n

    return read


def text_reader(length_size: int, codec: str) -> Reader:
    """A string column as text, decoded with its MySQL charset (cdc.values' encoding of the raw bytes)."""
    length = length_of(length_size)

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        end = pos + length_size
        stop = end + length(buf, pos)
        return buf[end:stop].decode(codec), stop

    return read


def base64_reader(length_size: int, pad_to: int) -> Reader:
    """A binary column as base64; BINARY(n) padded back to n bytes (the binlog strips trailing 0x00)."""
    length, b2a = length_of(length_size), binascii.b2a_base64

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        end = pos + length_size
        stop = end + length(buf, pos)
        data = buf[end:stop]
        if pad_to:
            data = data.ljust(pad_to, b"\x00")
        return b2a(data, newline=False).decode("ascii"), stop

    return read


def text_inline(size: int, codec: str) -> Inline:
    return Inline((f"q = p + {size} + ({length_source(size)})", f"$v = buf[p + {size}:q].decode({codec!r})", "p = q"))


def base64_inline(size: int, pad_to: int) -> Inline:
    data = f"buf[p + {size}:q]" + (f".ljust({pad_to}, b'\\x00')" if pad_to else "")
    return Inline((f"q = p + {size} + ({length_source(size)})", f"$v = b2a({data}, newline=False).decode('ascii')",
                   "p = q"))


def by_shape(column: Any, ours: Column, text: Callable[[int, str], T], base64: Callable[[int, int], T]) -> T | None:
    """text(length size, codec) or base64(length size, pad width) for a string column of an ENCODED type."""
    size, kind = _length_size(column), ours.data_type
    if kind == "json":
        return text(size, "utf-8")
    if kind in TEXT_TYPES:
        return text(size, codec_for(ours.charset))
    if kind in BYTE_TYPES:
        return base64(size, 0)
    if kind == "binary":
        return base64(size, column.max_length)
    return None


def string_encoded_reader(column: Any, ours: Column) -> Reader | None:
    return by_shape(column, ours, text_reader, base64_reader)


def string_inline(column: Any, ours: Column) -> Inline | None:
    return by_shape(column, ours, text_inline, base64_inline)


def binary_fix(column: Column) -> Fix:
    """BINARY(n) as a SELECT shows it: the library returns the bytes without the trailing 0x00 padding."""
    length = int(column.type.split("(")[1].rstrip(")")) if "(" in column.type else 1

    def fix(value: Any, source: str | None) -> Any:
        return value.ljust(length, b"\x00") if isinstance(value, bytes) else value

    return fix


def library_read_string(event: Any, size: int, column: Any) -> bytes:
    """The library's string reader, returning raw bytes: cdc.values decodes them with the column's MySQL charset."""
    return bytes(event.packet.read_length_coded_pascal_string(size))


def describe_string(column: Any, charset: str | None) -> ColumnType:
    """CHAR/VARCHAR or BINARY/VARBINARY, with information_schema's length in characters."""
    is_binary = charset in (None, "binary")
    base = ("var" if column.type != FIELD_TYPE.STRING else "") + ("binary" if is_binary else "char")
    length = column.max_length // (1 if is_binary else _MBMAXLEN.get(charset or "", 1))
    return ColumnType(base, f"{base}({length})", None if is_binary else charset)


def describe_blob(column: Any, charset: str | None) -> ColumnType:
    is_binary = charset in (None, "binary")
    data_type = _BLOB_NAMES[column.length_size][0 if is_binary else 1]
    return ColumnType(data_type, data_type, None if is_binary else charset)


def describe_json(column: Any, charset: str | None) -> ColumnType:
    return ColumnType("json", "json")


def describe_geometry(column: Any, charset: str | None) -> ColumnType:
    return ColumnType("geometry", "geometry")
