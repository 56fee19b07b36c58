"""JSON (MySQL 8's binary document, type 245): the JSON text MySQL itself shows for it, compact with sorted keys.

A SELECT of a JSON column (what snapshot reads) prints the document through json_dom.cc's wrapper_to_string:
DATE as "YYYY-MM-DD", TIME as "[-]HH:MM:SS.ffffff" (hours up to 838), DATETIME and TIMESTAMP as
"YYYY-MM-DD HH:MM:SS.ffffff" (always 6 fraction digits: my_TIME_to_str(t, 6)), DECIMAL as its exact digits
(decimal2string), a string MySQL kept as an opaque VAR_STRING as that string, any other opaque value as
"base64:type<N>:<base64, a newline every 76 characters>", and a document of 0 bytes as null (json_binary.cc's
parse_binary). https://dev.mysql.com/doc/dev/mysql-server/latest/json__binary_8h.html has the format.
The library's parse_json loses some of that (a TIME's sign and hours past 23, DATE against DATETIME, TIMESTAMP
and other opaque bytes), so the document is read here, for the fast path (json_reader) and for the library's
own rows (library_read_binary_json, our packet wrapper's read_binary_json) alike; the C decoder writes the same
text (cdc/rows/_native_json.c). The text is compact with keys sorted (orjson's OPT_SORT_KEYS) where MySQL
writes ", " and ": " and orders keys by length: Snowflake's PARSE_JSON reads both as the same VARIANT.

What MySQL cannot have written (an offset or length past the document, an unknown type or literal, invalid
UTF-8, a duplicate key, nesting past 100 levels, a temporal field out of its range, a DECIMAL digit group out
of range) raises ValueError, as the C decoder does.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
from pymysqlreplication.constants import FIELD_TYPE as F
from pymysqlreplication.packet import BinLogPacketWrapper

from cdc.rows.decimals import checked_decimal_text
from cdc.rows.readers import Reader
from cdc.values import MySQLJsonText

_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY, _LITERAL = 0, 1, 2, 3, 4
_INTS = {5: (2, True), 6: (2, False), 7: (4, True), 8: (4, False), 9: (8, True), 10: (8, False)}  # size, signed
_DOUBLE, _STRING, _OPAQUE = 11, 12, 15
_LITERALS = (None, True, False)
MAX_DEPTH = 100  # MySQL's JSON_DOCUMENT_MAX_DEPTH
_DATETIMES = (F.DATETIME, F.TIMESTAMP, F.DATE)
_DOUBLE_AT = struct.Struct("<d").unpack_from


def json_text(doc: bytes) -> str:
    """A JSON column's binary document as MySQL's JSON text (compact, keys sorted)."""
    if not doc:
        return "null"  # MySQL reads an empty document (an IGNOREd NULL into NOT NULL) as JSON null
    value = _value(doc, doc[0], 1, len(doc), 1)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")


def json_reader(column: Any) -> Reader:
    """A full image's JSON document as MySQL's text (MySQLJsonText: cdc.values writes it as it is)."""
    length_size = column.length_size

    def read(buf: Any, pos: int) -> tuple[MySQLJsonText, int]:
        end = pos + length_size
        n = int.from_bytes(buf[pos:end], "little")
        data = bytes(buf[end:end + n])
        if len(data) != n:
            raise ValueError(f"a JSON document runs past the rows event's end (byte {end + n} of {len(buf)})")
        return MySQLJsonText(json_text(data)), end + n

    return read


def library_read_binary_json(packet: Any, size: int, is_partial: bool) -> Any:
    """The library's read_binary_json (a method of its packet wrapper) for a full document: MySQL's text.

    A partial document (MySQL's PARTIAL_UPDATE_ROWS) stays the library's: tail stops on those events.
    """
    if is_partial:
        return BinLogPacketWrapper.read_binary_json(packet, size, is_partial)
    return MySQLJsonText(json_text(bytes(packet.read(packet.read_uint_by_size(size)))))


def _value(doc: bytes, kind: int, at: int, end: int, depth: int) -> Any:
    """The value of type `kind` at doc[at:], to the document's end: what orjson writes as MySQL's text."""
    if kind <= _LARGE_ARRAY:
        return _container(doc, at, end, kind in (_LARGE_OBJECT, _LARGE_ARRAY), kind <= _LARGE_OBJECT, depth)
    if kind == _LITERAL:
        _need(at, 1, end)
        if doc[at] > 2:
            raise ValueError("MySQL binary JSON: an unknown literal")
        return _LITERALS[doc[at]]
    if kind in _INTS:
        size, signed = _INTS[kind]
        _need(at, size, end)
        return int.from_bytes(doc[at:at + size], "little", signed=signed)
    if kind == _DOUBLE:
        _need(at, 8, end)
        return _DOUBLE_AT(doc, at)[0]
    if kind == _STRING:
        start, n = _var_length(doc, at, end)
        return doc[start:start + n].decode("utf-8")
    if kind == _OPAQUE:
        return _opaque(doc, at, end)
    raise ValueError("MySQL binary JSON: an unknown value type")


def _need(at: int, size: int, end: int) -> None:
    if size > end - at:
        raise ValueError("MySQL binary JSON: a number past the document's end")


def _var_length(doc: bytes, at: int, end: int) -> tuple[int, int]:
    """(start, length) of a string or opaque value's bytes: a length of 7 bits a byte (at most 5), then the bytes."""
    n = 0
    for i in range(min(5, end - at)):
        n |= (doc[at + i] & 0x7F) << (7 * i)
        if not doc[at + i] & 0x80:
            if n > end - at - i - 1:
                raise ValueError("MySQL binary JSON: a string runs past the document's end")
            return at + i + 1, n
    raise ValueError("MySQL binary JSON: a string's length is cut or too long")


def _container(doc: bytes, at: int, end: int, large: bool, is_object: bool, depth: int) -> Any:
    """An object or array: count, size, key entries (offset, length), value entries (type, offset or inlined)."""
    if depth > MAX_DEPTH:
        raise ValueError("MySQL binary JSON: nested deeper than 100 levels")
    slot = 4 if large else 2
    if end - at < 2 * slot:
        raise ValueError("MySQL binary JSON: a container's header runs past the document's end")
    count = int.from_bytes(doc[at:at + slot], "little")
    size = int.from_bytes(doc[at + slot:at + 2 * slot], "little")
    key_entry, value_entry = (slot + 2 if is_object else 0), 1 + slot
    if size > end - at:
        raise ValueError("MySQL binary JSON: a container's size runs past the document's end")
    if 2 * slot + count * (key_entry + value_entry) > size:
        raise ValueError("MySQL binary JSON: a container's entries run past its size")
    values_at = at + 2 * slot + count * key_entry
    values = [_entry(doc, at, end, values_at + i * value_entry, large, depth + 1) for i in range(count)]
    if not is_object:
        return values
    out: dict[str, Any] = {}
    for i in range(count):
        entry = at + 2 * slot + i * key_entry
        offset = int.from_bytes(doc[entry:entry + slot], "little")
        length = int.from_bytes(doc[entry + slot:entry + slot + 2], "little")
        if offset > end - at or length > end - at - offset:
            raise ValueError("MySQL binary JSON: a key past the document's end")
        key = doc[at + offset:at + offset + length].decode("utf-8")
        if key in out:
            raise ValueError("MySQL binary JSON: a duplicate key")
        out[key] = values[i]
    return out


def _entry(doc: bytes, base: int, end: int, entry: int, large: bool, depth: int) -> Any:
    """Value entry at `entry` of the container at `base`: inlined (literals, 16-bit ints, 32-bit in large) or at an offset."""
    kind, slot = doc[entry], 4 if large else 2
    if kind in (_LITERAL, 5, 6) or (large and kind in (7, 8)):
        return _value(doc, kind, entry + 1, entry + 1 + slot, depth)
    offset = int.from_bytes(doc[entry + 1:entry + 1 + slot], "little")
    if offset > end - base:
        raise ValueError("MySQL binary JSON: a value offset past the document's end")
    return _value(doc, kind, base + offset, end, depth)


def _opaque(doc: bytes, at: int, end: int) -> Any:
    """An opaque value (MySQL column type, length, bytes) as wrapper_to_string prints it."""
    if end - at < 1:
        raise ValueError("MySQL binary JSON: an opaque value without its type")
    start, n = _var_length(doc, at + 1, end)
    mysql_type, data = doc[at], doc[start:start + n]
    if mysql_type == F.NEWDECIMAL:
        return orjson.Fragment(_decimal(data))
    if mysql_type == F.TIME:
        return orjson.Fragment(f'"{_time(data)}"')
    if mysql_type in _DATETIMES:
        return orjson.Fragment(f'"{_datetime(data, mysql_type == F.DATE)}"')
    if mysql_type == F.VAR_STRING:  # a string kept as opaque: wrapper_to_string prints it as the string
        return data.decode("utf-8")
    encoded = base64.b64encode(data).decode("ascii")
    lines = "\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))  # MySQL's base64_encode breaks lines
    return f"base64:type{mysql_type}:{lines}"


def _decimal(data: bytes) -> str:
    """An opaque DECIMAL (precision, scale, MySQL's binary DECIMAL) as its exact digits (decimal2string)."""
    if len(data) < 2:
        raise ValueError("MySQL binary JSON: a DECIMAL without precision and scale")
    precision, scale = data[0], data[1]
    return checked_decimal_text(data[2:], precision, scale)


def _packed(data: bytes) -> tuple[bool, int, int]:
    """(negative, integer part, microseconds) of a packed temporal value (TIME_to_longlong_packed)."""
    if len(data) < 8:
        raise ValueError("MySQL binary JSON: a packed time shorter than 8 bytes")
    packed = int.from_bytes(data[:8], "little", signed=True)
    magnitude = -packed if packed < 0 else packed
    return packed < 0, magnitude >> 24, magnitude % (1 << 24)


def _time(data: bytes) -> str:
    """TIME_from_longlong_time_packed + my_time_to_str(t, 6): the sign on the whole value, hours up to 838."""
    negative, whole, micro = _packed(data)
    hour, minute, second = (whole >> 12) % (1 << 10), (whole >> 6) % 64, whole % 64
    if hour > 838 or minute > 59 or second > 59 or micro > 999999:
        raise ValueError("MySQL binary JSON: a TIME out of range")
    return f"{'-' if negative else ''}{hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"


def _datetime(data: bytes, date_only: bool) -> str:
    """TIME_from_longlong_datetime_packed + my_TIME_to_str(t, 6); MySQL prints no sign for a date."""
    _, whole, micro = _packed(data)
    ymd, hms = whole >> 17, whole % (1 << 17)
    year, month, day = (ymd >> 5) // 13, (ymd >> 5) % 13, ymd % 32
    hour, minute, second = hms >> 12, (hms >> 6) % 64, hms % 64
    if year > 9999 or hour > 23 or minute > 59 or second > 59 or micro > 999999:
        raise ValueError("MySQL binary JSON: a DATETIME out of range")
    if date_only:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"
