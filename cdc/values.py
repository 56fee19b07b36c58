"""Encode MySQL values exactly into the change log's JSON representation (docs/formats.md, "Values").

Both capture paths end here: snapshot hands over what PyMySQL returns for a SELECT, tail hands over
what the binlog decoder returns after our fixes of the library's pitfalls. One encoder means a row
read by snapshot and the same row read from the binlog produce the same JSON.
"""

from __future__ import annotations

import base64
import codecs
import datetime as dt
import struct
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from cdc.errors import DataError
from cdc.schema import Column

INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
# MariaDB's INET4, INET6 and UUID: text in a SELECT, bytes in the binlog (read as text by cdc.rows.addresses).
ADDRESS_TYPES = frozenset({"inet4", "inet6", "uuid"})
SPATIAL_TYPES = frozenset(
    {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
     "geometrycollection", "geomcollection"}
)



def _mysql_latin1_table() -> str:
    """MySQL's latin1 is Windows-1252, except that it maps cp1252's five unassigned bytes (0x81, 0x8D,
    0x8F, 0x90, 0x9D) to the C1 controls U+0081... that share their number, so every byte is a character;
    Python's cp1252 refuses those five, which would stop capture on values MySQL stores happily."""
    def char(byte: int) -> str:
        try:
            return bytes([byte]).decode("cp1252")
        except UnicodeDecodeError:
            return chr(byte)
    return "".join(char(b) for b in range(256))


_LATIN1_DECODING = _mysql_latin1_table()
_LATIN1_ENCODING = codecs.charmap_build(_LATIN1_DECODING)
MYSQL_LATIN1 = "mysql_latin1"


def _find_codec(name: str) -> codecs.CodecInfo | None:
    if name != MYSQL_LATIN1:
        return None
    return codecs.CodecInfo(
        name=MYSQL_LATIN1,
        encode=lambda text, errors="strict": codecs.charmap_encode(text, errors, _LATIN1_ENCODING),
        decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, _LATIN1_DECODING),
    )


codecs.register(_find_codec)  # in every process that imports cdc.values (decode workers too)

# MySQL charset names -> Python codecs.
CHARSET_CODECS = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": MYSQL_LATIN1, "ascii": "ascii",
    "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be",
    "cp1250": "cp1250", "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257", "cp850": "cp850",
    "cp852": "cp852", "cp866": "cp866", "latin2": "iso8859-2", "latin5": "iso8859-9", "latin7": "iso8859-13",
    "greek": "iso8859-7", "hebrew": "iso8859-8", "koi8r": "koi8-r", "koi8u": "koi8-u", "gbk": "gbk",
    "gb2312": "gb2312", "gb18030": "gb18030", "big5": "big5", "sjis": "shift_jis", "cp932": "cp932",
    "ujis": "euc-jp", "eucjpms": "euc-jp", "euckr": "euc-kr", "tis620": "tis-620", "macroman": "mac-roman",
}

ZERO_DATE = "0000-00-00"
ZERO_DATETIME = "0000-00-00 00:00:00"
ZERO_TIMESTAMP = "0000-00-00T00:00:00Z"


def codec_for(charset: str | None) -> str:
    return CHARSET_CODECS.get((charset or "utf8mb4").lower(), "utf-8")


def encode_row(columns: Iterable[Column], row: dict[str, Any]) -> dict[str, Any]:
    """Encode a row (column name -> Python value) column by column."""
    return {c.name: encode_value(c, row.get(c.name)) for c in columns}


def encode_value(column: Column, value: Any) -> Any:
    """One value in its change-log form; DataError rather than a guess when it cannot be exact."""
    if value is None:
        return None
    encoder = _ENCODERS.get(column.data_type, _encode_fallback)
    try:
        return encoder(column, value)
    except _INEXACT as exc:
        raise _cannot_encode(column, value, exc) from exc


_INEXACT = (ValueError, TypeError, UnicodeDecodeError, OverflowError)


def _cannot_encode(column: Column, value: Any, exc: Exception) -> DataError:
    return DataError(f"column {column.name!r} ({column.type}): cannot encode {type(value).__name__} value exactly: {exc}")


def encoder_for(column: Column) -> Callable[[Any], Any]:
    """encode_value bound to one column, dispatch done once (the binlog decoder calls it per value)."""
    encoder = _ENCODERS.get(column.data_type, _encode_fallback)

    def encode(value: Any) -> Any:
        if value is None:
            return None
        if encoder is _encode_int and type(value) is int:
            return value
        try:
            return encoder(column, value)
        except _INEXACT as exc:
            raise _cannot_encode(column, value, exc) from exc

    return encode


def _encode_int(column: Column, value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    return int(value)


def _encode_bit(column: Column, value: Any) -> int:
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big")
    if isinstance(value, str):  # python-mysql-replication renders BIT as a string of 0/1
        return int(value, 2) if value else 0
    return int(value)


def _encode_decimal(column: Column, value: Any) -> str:
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    scale = column.scale or 0
    # format() of a Decimal is exact at any precision (no float on the way).
    return format(number, f".{scale}f")


def _encode_float(column: Column, value: Any) -> float:
    number = float(value)
    if column.data_type == "float" and number == number and abs(number) != float("inf"):
        return shortest_float32(number)
    return number


def shortest_float32(number: float) -> float:
    """The shortest decimal that round-trips a 4-byte float: 1.100000023841858 -> 1.1, as SELECT shows it."""
    packed = struct.pack("<f", number)
    for digits in range(6, 10):
        candidate = float(f"{number:.{digits}g}")
        if struct.pack("<f", candidate) == packed:
            return candidate
    return number


def _encode_date(column: Column, value: Any) -> str:
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return value.isoformat()
    return _checked_text(value, 10)


def _fraction(column: Column, microsecond: int) -> str:
    return f".{microsecond:06d}" if (column.fsp or 0) > 0 else ""


def _encode_datetime(column: Column, value: Any) -> str:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            raise ValueError("DATETIME has no time zone; got an aware datetime")
        return _clock(value, " ") + _fraction(column, value.microsecond)
    if isinstance(value, dt.date):
        return value.isoformat() + " 00:00:00" + _fraction(column, 0)
    text = _checked_text(value, 19)  # zero or partial-zero datetimes arrive as text
    return text[:19] + _fraction(column, int(text[20:26].ljust(6, "0")) if len(text) > 20 else 0)


def _clock(value: dt.datetime, separator: str) -> str:
    # Not strftime: glibc's %Y does not zero-pad years below 1000 ('5-01-01'), and f-strings are faster.
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d}{separator}"
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}")


def _encode_timestamp(column: Column, value: Any) -> str:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        # A naive datetime is UTC by contract: snapshot reads with time_zone='+00:00',
        # the binlog decoder converts epoch seconds in UTC.
        return _clock(value, "T") + _fraction(column, value.microsecond) + "Z"
    text = _checked_text(value, 19)
    if text.startswith("0000-00-00"):
        return "0000-00-00T00:00:00" + _fraction(column, 0) + "Z"
    raise ValueError(f"TIMESTAMP text {text!r} is not a zero timestamp")


def _encode_time(column: Column, value: Any) -> str:
    if isinstance(value, dt.timedelta):
        # Work in integer microseconds: timedelta normalises -1h30m-0.25s to days=-1 + positive parts.
        total = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
        sign = "-" if total < 0 else ""
        total = abs(total)
        seconds, micro = divmod(total, 1_000_000)
        hours, rest = divmod(seconds, 3600)
        minutes, secs = divmod(rest, 60)
        return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}" + _fraction(column, micro)
    if isinstance(value, dt.time):
        return value.strftime("%H:%M:%S") + _fraction(column, value.microsecond)
    return _checked_text(value, 8)


def _encode_year(column: Column, value: Any) -> int:
    if isinstance(value, dt.date):
        return value.year
    return int(value)


def _encode_text(column: Column, value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode(codec_for(column.charset))
    return str(value)


def _encode_binary(column: Column, value: Any) -> str:
    if isinstance(value, str):
        # python-mysql-replication decodes an empty BLOB as '' (not b''); anything else as str is a bug.
        if value:
            raise TypeError("binary column decoded as text")
        value = b""
    return base64.b64encode(bytes(value)).decode("ascii")


def _encode_enum(column: Column, value: Any) -> str:
    if isinstance(value, int):
        labels = column.enum_values or ()
        return labels[value - 1] if 0 < value <= len(labels) else ""
    return _encode_text(column, value)


def _encode_set(column: Column, value: Any) -> list[str]:
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode(codec_for(column.charset))
    if isinstance(value, str):
        members = {part for part in value.split(",") if part != ""} if value else set()
    else:
        members = {_encode_text(column, part) for part in value}
    order = {label: i for i, label in enumerate(column.set_values or ())}
    return sorted(members, key=lambda label: (order.get(label, len(order)), label))


class MySQLJsonText(str):
    """MySQL 8's binary JSON document already written as the JSON text MySQL shows for it (cdc.rows.json_binary)."""

    __slots__ = ()


def _encode_json(column: Column, value: Any) -> str:
    # Three sources, kept apart: MySQL 8's binary document from the binlog, decoded to MySQL's own text
    # (cdc.rows.json_binary); MariaDB's JSON, a LONGTEXT whose bytes the binlog holds; a SELECT's text
    # (snapshot, either server). The text is the value, never re-serialised.
    if isinstance(value, MySQLJsonText):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    if isinstance(value, str):
        return value
    raise TypeError(f"JSON value of an unexpected type {type(value).__name__}: MySQL 8's documents are read "
                    "by cdc.rows.json_binary, never as the library's Python values")


def _encode_fallback(column: Column, value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (int, float, str)):
        return value
    raise TypeError(f"no encoder for MySQL type {column.data_type!r}")


def _checked_text(value: Any, minimum: int) -> str:
    text = value.decode("ascii") if isinstance(value, (bytes, bytearray)) else str(value)
    if len(text) < minimum:
        raise ValueError(f"unexpected text {text!r}")
    return text


_ENCODERS: dict[str, Callable[[Column, Any], Any]] = {
    **{name: _encode_int for name in INTEGER_TYPES},
    "bit": _encode_bit,
    "decimal": _encode_decimal,
    "float": _encode_float,
    "double": _encode_float,
    "date": _encode_date,
    "datetime": _encode_datetime,
    "timestamp": _encode_timestamp,
    "time": _encode_time,
    "year": _encode_year,
    **{name: _encode_text for name in TEXT_TYPES},
    **{name: _encode_binary for name in BINARY_TYPES | SPATIAL_TYPES},
    "enum": _encode_enum,
    "set": _encode_set,
    "json": _encode_json,
    **{name: lambda column, value: _checked_text(value, 1) for name in ADDRESS_TYPES},
}
