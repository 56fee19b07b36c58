"""A SELECT's rows over the binary protocol (a server-side prepared statement), turned into text-protocol rows.

Why: over the text protocol the server prints every value it sends. For DOUBLE that is MariaDB's `my_gcvt`,
22% of the server's CPU while it serves the snapshot of a table of every type; a prepared statement's rows
carry numbers and temporals as binary fields instead, and `all_types` then costs the server 0.155 s of CPU
against 0.260 s (docs/performance.md, issue 28). The snapshot's readers (cdc.snapshot.lines, the C reader)
read text-protocol rows; `to_text` is the reference conversion from one binary row to the text row the
server would have sent for the same SELECT, so that those readers work unchanged on it:

- integers, DATE, DATETIME, TIMESTAMP and TIME as the server prints them (fraction digits: the column's);
- DOUBLE (and FLOAT, which cdc reads widened by `+ 0E0`) as the shortest text that reads back as the same
  double, not the server's own digits: every reader of a snapshot line takes a DOUBLE's text through float();
- everything else (DECIMAL, strings, BLOB, ENUM, SET, BIT, JSON, GEOMETRY) is sent as text by both protocols.

The C reader does the same (_native_binary.c, held to this module by tests/snapshot/test_binary.py), and
writes a DOUBLE column without a column rule straight as its JSON number, where its Python fragment would
have printed float(text) with orjson.

The statement is driven through PyMySQL's internals, as cdc.snapshot.wire reads the text protocol's
rows (`_execute_command`, `_read_packet`; checked by wire.check_driver).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.connections import MySQLResult
from pymysql.constants import FIELD_TYPE, FLAG
from pymysql.protocol import FieldDescriptorPacket

COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE = 0x16, 0x17, 0x19
_INTEGERS = {FIELD_TYPE.TINY: 1, FIELD_TYPE.SHORT: 2, FIELD_TYPE.YEAR: 2, FIELD_TYPE.INT24: 4, FIELD_TYPE.LONG: 4,
             FIELD_TYPE.LONGLONG: 8}
_DATES = (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP)


@dataclass(frozen=True)
class WireType:
    """What a binary row's value of one column is: its field type, signedness, fraction digits, and the width
    the text protocol pads it to with zeros (ZEROFILL, and YEAR: `0000`), else 0."""

    code: int
    unsigned: bool
    decimals: int
    zerofill: int = 0

    @classmethod
    def of(cls, field: Any) -> WireType:
        """From PyMySQL's FieldDescriptorPacket of the column."""
        width = int(field.length) if field.flags & FLAG.ZEROFILL else 0
        return cls(int(field.type_code), bool(field.flags & FLAG.UNSIGNED), int(field.scale), width)


@dataclass(frozen=True)
class Statement:
    id: int
    types: tuple[WireType, ...]  # of its result's columns, as the prepare answer describes them


def prepare(conn: pymysql.Connection, sql: str) -> Statement:
    """COM_STMT_PREPARE: the statement's id and its columns' types (the parameter definitions read past)."""
    conn._execute_command(COM_STMT_PREPARE, sql)  # noqa: SLF001 - see the module docstring
    first = conn._read_packet()  # noqa: SLF001 - raises the server's error (syntax, privileges)
    statement_id, columns, params = struct.unpack_from("<IHH", first.get_all_data(), 1)
    for _ in range(params):
        conn._read_packet()  # noqa: SLF001
    if params:
        conn._read_packet()  # noqa: SLF001 - the EOF after the definitions
    types = tuple(WireType.of(conn._read_packet(FieldDescriptorPacket)) for _ in range(columns))  # noqa: SLF001
    if columns:
        conn._read_packet()  # noqa: SLF001
    return Statement(statement_id, types)


def readable(types: Sequence[WireType]) -> bool:
    """Whether to_text knows every column (the C reader's binary_type_known, the same rule)."""
    return all(_known(t) for t in types)


def _known(wire: WireType) -> bool:
    if wire.code in (FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIME):
        return 0 <= wire.decimals <= 6
    return wire.code <= FIELD_TYPE.YEAR or wire.code in (FIELD_TYPE.VARCHAR, FIELD_TYPE.BIT) or \
        FIELD_TYPE.JSON <= wire.code <= FIELD_TYPE.GEOMETRY


def execute(conn: pymysql.Connection, statement: Statement) -> MySQLResult:
    """COM_STMT_EXECUTE without parameters: the result's fields and converters read, as PyMySQL reads them for a
    text result; its row packets are next on the wire, ended by an EOF packet."""
    conn._execute_command(COM_STMT_EXECUTE, struct.pack("<IBI", statement.id, 0, 1))  # noqa: SLF001
    first = conn._read_packet()  # noqa: SLF001
    result = MySQLResult(conn)
    result.field_count = first.read_length_encoded_integer()
    result._get_descriptions()  # noqa: SLF001
    return result


def close(conn: pymysql.Connection, statement: Statement) -> None:
    """COM_STMT_CLOSE (the server sends no answer)."""
    conn._execute_command(COM_STMT_CLOSE, struct.pack("<I", statement.id))  # noqa: SLF001


def python_parse(row: Callable[[bytes, int], bytes], types: Sequence[WireType]) -> Callable[..., tuple[int, int, int]]:
    """A CompiledTable.parse for binary row packets, each made text by to_text and read by `row`."""

    def parse(buf: bytes, p: int, end: int, n: int, seq: int, out: list[bytes]) -> tuple[int, int, int]:
        while p + 4 < end:
            size = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
            q = p + 4 + size
            if q > end or size in (0, 0xFFFFFF) or buf[p + 3] != seq:
                break
            if buf[p + 4] == 0xFF or (buf[p + 4] == 0xFE and size < 9):
                break  # an ERR or EOF packet: the caller's business
            out.append(row(to_text(buf[p + 4:q], types), n))
            p, n, seq = q, n + 1, (seq + 1) & 255
        return p, n, seq

    return parse


def to_text(payload: bytes, types: Sequence[WireType]) -> bytes:
    """One binary row payload -> the text-protocol row payload (length-encoded values, 0xFB for NULL).

    ValueError for a payload that is not a whole binary row of these columns.
    """
    if payload[:1] != b"\x00":
        raise ValueError(f"a binary row starts with 0x00, not {payload[:1].hex() or 'nothing'}")
    nulls = payload[1:1 + (len(types) + 9) // 8]  # the NULL bitmap starts at bit 2
    p = 1 + len(nulls)
    if len(nulls) * 8 < len(types) + 2:
        raise ValueError("a binary row shorter than its NULL bitmap")
    out = bytearray()
    for i, wire in enumerate(types):
        if nulls[(i + 2) // 8] >> ((i + 2) % 8) & 1:
            out += b"\xfb"
            continue
        text, p = _value(payload, p, wire)
        out += _length_encoded(len(text)) + text
    if p != len(payload):
        raise ValueError(f"a binary row of {len(payload)} bytes, its values take {p}")
    return bytes(out)


def _value(payload: bytes, p: int, wire: WireType) -> tuple[bytes, int]:
    """The text of the value at p, and where the next value starts."""
    code = wire.code
    width = _INTEGERS.get(code)
    if width is not None:
        raw = _take(payload, p, width)
        number = int.from_bytes(raw, "little", signed=not wire.unsigned)
        return b"%0*d" % (wire.zerofill, number), p + width
    if code == FIELD_TYPE.DOUBLE:
        return repr(struct.unpack("<d", _take(payload, p, 8))[0]).encode(), p + 8
    if code == FIELD_TYPE.FLOAT:
        return repr(struct.unpack("<f", _take(payload, p, 4))[0]).encode(), p + 4
    if code in _DATES or code == FIELD_TYPE.TIME:
        size = _take(payload, p, 1)[0]
        fields = _take(payload, p + 1, size)
        text = _time(fields, wire) if code == FIELD_TYPE.TIME else _date(fields, wire)
        return text, p + 1 + size
    size, p = _length(payload, p)
    return _take(payload, p, size), p + size


def _date(fields: bytes, wire: WireType) -> bytes:
    """DATE, DATETIME or TIMESTAMP: 0, 4, 7 or 11 bytes (year, month, day, h, m, s, microseconds)."""
    if len(fields) not in (0, 4, 7, 11):
        raise ValueError(f"a date of {len(fields)} bytes")
    year, month, day, hour, minute, second, micro = _unpack_date(fields)
    text = b"%04d-%02d-%02d" % (year, month, day)
    if wire.code == FIELD_TYPE.DATE:
        return text
    return text + b" %02d:%02d:%02d" % (hour, minute, second) + _fraction(micro, wire.decimals)


def _unpack_date(fields: bytes) -> tuple[int, ...]:
    padded = fields + bytes(11 - len(fields))
    year, month, day, hour, minute, second, micro = struct.unpack("<HBBBBBI", padded)
    return year, month, day, hour, minute, second, micro


def _time(fields: bytes, wire: WireType) -> bytes:
    """TIME: 0, 8 or 12 bytes (negative, days, h, m, s, microseconds); the text has days * 24 + h hours."""
    if len(fields) not in (0, 8, 12):
        raise ValueError(f"a time of {len(fields)} bytes")
    negative, days, hour, minute, second, micro = struct.unpack("<BIBBBI", fields + bytes(12 - len(fields)))
    text = b"%s%02d:%02d:%02d" % (b"-" if negative else b"", days * 24 + hour, minute, second)
    return text + _fraction(micro, wire.decimals)


def _fraction(micro: int, decimals: int) -> bytes:
    """The server prints exactly the column's fraction digits (none for 0)."""
    if not 0 <= decimals <= 6:
        raise ValueError(f"a temporal with {decimals} fraction digits")
    return (b".%06d" % micro)[:decimals + 1] if decimals else b""


def _length(payload: bytes, p: int) -> tuple[int, int]:
    """A length-encoded integer at p: (its value, where what it counts starts)."""
    first = _take(payload, p, 1)[0]
    if first < 0xFB:
        return first, p + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if width is None:
        raise ValueError(f"length prefix 0x{first:02X} is not valid in a row")
    return int.from_bytes(_take(payload, p + 1, width), "little"), p + 1 + width


def _length_encoded(size: int) -> bytes:
    if size < 0xFB:
        return bytes((size,))
    if size < 1 << 16:
        return b"\xfc" + size.to_bytes(2, "little")
    if size < 1 << 24:
        return b"\xfd" + size.to_bytes(3, "little")
    return b"\xfe" + size.to_bytes(8, "little")


def _take(payload: bytes, p: int, count: int) -> bytes:
    if p + count > len(payload):
        raise ValueError(f"a binary row cut short: {count} bytes wanted at {p} of {len(payload)}")
    return payload[p:p + count]
