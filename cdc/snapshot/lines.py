"""Compile a snapshot table's row reader: text-protocol row packets -> finished change-log lines.

The server's text protocol already spells most values the way the change log does (docs/formats.md):
an INT is its digits, a DECIMAL its exact text, a DATETIME(6) `2026-11-22 07:00:01.123456`. Parsing
that text into Python objects (int, Decimal, datetime) only to format it back cost more than the rest
of the snapshot (issue 8: PyMySQL's row parsing and converters were 78% of the time). So each table
gets one generated function that walks the row packets of a result in a byte buffer and, per column,
applies the smallest transformation from the server's bytes to the JSON bytes of its change-log
value, then fills a line template built once (keys sorted as orjson sorts them). SET, FLOAT and ZEROFILL
DECIMAL go through cdc.values' encoder; a type not known here takes the old way, value by value:
PyMySQL's own decoding of that field, cdc.values' encoder, orjson. The lines are byte-identical to
cdc.changelog.encode_line of the same change (tests/snapshot/test_lines.py).

Where it is built, the packet loop runs in C (cdc/snapshot/_native.c, ~7x faster): each
column's Python expression comes with the C action doing the same (RAW, QUOTED, ...; PYTHON calls a
generated per-column fragment function), and the generated Python `parse` is its fallback for
anything it is not sure of, so lines and errors stay this file's (tests/snapshot/test_native.py).
"""

from __future__ import annotations

import binascii
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from cdc.masking import ColumnRules, HashKey, hash_value
from cdc.schema import Column
from cdc.snapshot import native as native_api
from cdc.source.tables import TablePlan, column_encoder
from cdc.values import BINARY_TYPES, INTEGER_TYPES, SPATIAL_TYPES, TEXT_TYPES, encoder_for

# A JSON string needs escaping only for these ASCII bytes (orjson writes every other one as is);
# any non-ASCII text goes through decode + orjson so invalid UTF-8 fails as it always did.
_NEEDS_ESCAPE = re.compile(rb'[\x00-\x1f"\\]').search
_QUOTED_AS_IS = frozenset({"decimal", "date"})
VALUE_ERRORS = (ValueError, TypeError, UnicodeDecodeError, OverflowError)
# Length-encoded integer prefixes of the text protocol (a value's length in the next 2, 3 or 8 bytes).
_LONG_LENGTH = {0xFC: 2, 0xFD: 3, 0xFE: 8}

Fragment = Callable[[bytes], bytes]


class RowEncodeError(Exception):
    """A value of row number `row` could not be encoded (the generated code knows only the row)."""

    def __init__(self, row: int, cause: BaseException) -> None:
        super().__init__(row, cause)
        self.row = row
        self.cause = cause


@dataclass(frozen=True)
class LineParts:
    """What every `r` line of one snapshot shares, already serialised (see snapshot._Copier)."""

    prefix: bytes  # the position string up to the row number
    src_head: bytes  # ,"src":{"file":...,"gtid":...,"pos":...,"row":
    src_tail: bytes  # ,"server_id":...,"xid":null},"table":
    line_tail: bytes  # ,"ts":"...","v":1}\n


@dataclass(frozen=True)
class CompiledTable:
    """The generated readers of one table; `parse` stops at anything it does not handle itself.

    parse(buf, p, end, n, seq, out) -> (p, n, seq): appends one line per complete, in-sequence,
    ordinary row packet from buf[p:end], numbering rows from n; returns where it stopped. The Python
    reader appends each line as a bytes object, the C one all lines of a call as one.
    row(payload, n) -> line: one row from a whole packet payload (rows of 16 MiB and more).
    """

    parse: Callable[..., tuple[int, int, int]]
    row: Callable[[bytes, int], bytes]
    field_types: tuple[int, ...]
    native: bool = False  # parse is the C reader's (cdc.snapshot.native)
    reader: Any = None  # the C reader itself (parse_binary, to_text: cdc.snapshot.binary), when native
    plain_doubles: tuple[bool, ...] = ()  # per column: a DOUBLE written as dumps(float(v)), no rule on it

    def checked_row(self, payload: bytes, n: int) -> bytes:
        """row(), with a value's error raised as parse raises it (RowEncodeError: the row number, the cause)."""
        try:
            return self.row(payload, n)
        except VALUE_ERRORS as exc:
            raise RowEncodeError(n, exc) from exc


def compile_table(plan: TablePlan, parts: LineParts, fields: Sequence[Any],
                  converters: Sequence[tuple[str | None, Any]], rules: ColumnRules = ColumnRules(),
                  native: bool | None = None) -> CompiledTable:
    """Generate and compile the readers of `plan` for a result with these PyMySQL fields and converters.

    Column rules apply here, before a line exists: an excluded column is read past and left out of
    the line, a hashed one becomes the HMAC-SHA-256 hex of its change-log value (as tail writes it).
    `native`: parse with the C reader (True: required, None: when built and not CDC_NATIVE=0) or
    with the generated Python one (False); `row` is always Python.
    """
    columns = plan.schema.columns
    excluded, hashed = rules.columns(plan.info.db, plan.info.table)
    if len(fields) != len(columns):
        raise ValueError(f"the SELECT of {plan.name} returned {len(fields)} columns, the schema has {len(columns)}")
    consts: dict[str, Any] = {
        "NULL": b"null", "QUOTED": b'"%b"', "b2a": binascii.b2a_base64, "ESC": _NEEDS_ESCAPE,
        "TEXT": _text_fragment, "LONG": _long_value, "dumps": orjson.dumps, "Decimal": Decimal,
        "RowEncodeError": RowEncodeError, "VALUE_ERRORS": VALUE_ERRORS,
        "T": _template(plan, parts, excluded),
        "HASH": functools.partial(_hash_fragment, rules.require_key()) if hashed else None,
    }
    # An excluded column's value is never looked at (keys cannot be excluded: ColumnRules.check_key).
    codes = [(native_api.SKIP, "None") if c.name in excluded and c.name not in plan.key
             else _column_code(i, c, converters[i], consts, hashed=c.name in hashed) for i, c in enumerate(columns)]
    order = [i for i in _sorted_indexes([c.name for c in columns]) if columns[i].name not in excluded]
    index = {c.name: i for i, c in enumerate(columns)}
    holes = order + [index[name] for name in _sorted_names(plan.key)]
    namespace = _generate(plan, [expression for _, expression in codes], holes, consts)
    reader = _native_reader(codes, consts, namespace, holes, native)
    plain_doubles = tuple(c.data_type == "double" and c.name not in excluded and c.name not in hashed for c in columns)
    return CompiledTable(reader.parse if reader is not None else namespace["parse"], namespace["row"],
                         tuple(int(f.type_code) for f in fields), reader is not None, reader, plain_doubles)


def _generate(plan: TablePlan, expressions: list[str], holes: list[int], consts: dict[str, Any]) -> dict[str, Any]:
    """Compile the Python readers (and one fragment function per column, for the C reader's calls)."""
    reads: list[str] = []
    for i, expression in enumerate(expressions):
        reads.extend(_read_column(i, expression))
    args = ", ".join([f"f{i}" for i in holes] + ["n", "n"])
    # In the packet loop, a first byte of 0xFE (EOF) or 0xFF (ERR) would read as a long length: stop there
    # (checked only on that rare branch, not once per row).
    end_of_rows = ["elif size_0 == 0xFF or (size_0 == 0xFE and size < 9):", "    p -= 4", "    break"]
    first = reads.index("else:")
    loop_reads = reads[:first] + end_of_rows + reads[first:]
    fragments = "".join(f"\n\ndef frag{i}(v):\n    return {e}\n" for i, e in enumerate(expressions))
    source = _SOURCE.format(first_reads=_indent(loop_reads, 12), row_reads=_indent(reads, 4), args=args) + fragments
    namespace = dict(consts)
    exec(compile(source, f"<snapshot reader {plan.name}>", "exec"), namespace)  # noqa: S102 - our own source
    return namespace


def _native_reader(codes: list[tuple[int, str]], consts: dict[str, Any], namespace: dict[str, Any],
                   holes: list[int], native: bool | None) -> Any:
    """The C reader of this column program, or None when the Python one reads (see compile_table)."""
    module = native_api.native_module() if native is not False else None
    if module is None:
        if native:
            raise RuntimeError(native_api.PROBLEM or "the C row reader is disabled (CDC_NATIVE=0)")
        return None
    actions = tuple(action for action, _ in codes)
    suffixes = tuple(consts.get(f"END{i}", b"") for i in range(len(codes)))
    fragments = tuple(namespace[f"frag{i}"] if action in native_api.WITH_FRAGMENT else None
                      for i, (action, _) in enumerate(codes))
    literals, slots = _split_template(consts["T"], holes)
    return module.reader(actions, suffixes, fragments, literals, slots, namespace["parse"])


def _split_template(template: bytes, holes: list[int]) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """The %-template as the C reader fills it: its literal pieces, and per hole a column or the row number."""
    literals: list[bytes] = []
    slots: list[int] = []
    piece = b""
    columns = iter(holes)
    row_slots = {b"%012d": native_api.SLOT_ROW_PADDED, b"%d": native_api.SLOT_ROW}
    for token in re.split(rb"(%%|%b|%012d|%d)", template):
        if token == b"%%":
            piece += b"%"
        elif token == b"%b" or token in row_slots:
            literals.append(piece)
            slots.append(next(columns) if token == b"%b" else row_slots[token])
            piece = b""
        else:
            piece += token
    literals.append(piece)
    return tuple(literals), tuple(slots)


# The packet loop: 3-byte little-endian length, 1-byte sequence number, payload. It stops (returns)
# at an incomplete packet, a sequence gap, a packet of 16 MiB or more (continued in the next one),
# an EOF packet (0xFE, shorter than 9 bytes) or an ERR packet (0xFF); the caller handles those.
_SOURCE = '''
def parse(buf, p, end, n, seq, out):
    append = out.append
    try:
        while p + 4 < end:
            size = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
            q = p + 4 + size
            if q > end or size == 0xFFFFFF or buf[p + 3] != seq:
                break
            p += 4
{first_reads}
            if p != q:
                raise ValueError("row packet of %d bytes, its values take %d" % (size, size + p - q))
            append(T % ({args}))
            n += 1
            seq = (seq + 1) & 255
    except VALUE_ERRORS as exc:
        raise RowEncodeError(n, exc) from exc
    return p, n, seq


def row(buf, n):
    p = 0
{row_reads}
    if p != len(buf):
        raise ValueError("row of %d bytes, its values take %d" % (len(buf), p))
    return T % ({args})
'''


def _read_column(i: int, expression: str) -> list[str]:
    """Statements reading column i at p (a length-encoded string, 0xFB for NULL) into fragment f{i}."""
    value = "buf[p:e]"
    first = [f"f{i} = {value}"] if expression == "v" else [f"v = {value}", f"f{i} = {expression}"]
    return [
        f"size_{i} = buf[p]",
        f"if size_{i} < 251:",
        "    p += 1",
        f"    e = p + size_{i}",
        *(f"    {line}" for line in first),
        "    p = e",
        f"elif size_{i} == 251:",
        f"    f{i} = NULL",
        "    p += 1",
        "else:",
        "    v, p = LONG(buf, p)",
        f"    f{i} = {expression}",
    ]


def _column_code(i: int, column: Column, decoding: tuple[str | None, Any], consts: dict[str, Any], *,
                 hashed: bool) -> tuple[int, str]:
    """(C reader action, Python expression) turning the server's bytes `v` of column i into its JSON bytes."""
    action, expression = _expression(i, column, decoding, consts)
    return (native_api.PYTHON, f"HASH({expression})") if hashed else (action, expression)


def _expression(i: int, column: Column, decoding: tuple[str | None, Any], consts: dict[str, Any]) -> tuple[int, str]:
    """The smallest change from the server's text to the change log's; the C action doing the same."""
    kind, fsp = column.data_type, column.fsp or 0
    zerofill = "zerofill" in column.type.lower()  # the server pads with zeros: not the change-log text
    if kind in INTEGER_TYPES and not zerofill:
        return native_api.RAW, "v"
    if (kind in _QUOTED_AS_IS and not zerofill) or (kind in ("datetime", "time") and not fsp):
        return native_api.QUOTED, "QUOTED % v"
    if kind in ("datetime", "time", "timestamp"):
        # The server prints exactly fsp fraction digits; the change log always has 6 (none when fsp = 0).
        pad = "0" * (6 - fsp) if fsp else ""
        if kind == "timestamp":
            consts[f"END{i}"] = (pad + "Z\"").encode()
            return native_api.TIMESTAMP, f"b'\"' + v.replace(b' ', b'T') + END{i}"
        consts[f"END{i}"] = (pad + "\"").encode()
        return native_api.TEMPORAL, f"b'\"' + v + END{i}"
    if kind in TEXT_TYPES or kind in ("enum", "json"):
        return native_api.TEXT, "(QUOTED % v if v.isascii() and not ESC(v) else TEXT(v))"
    if kind in BINARY_TYPES or kind in SPATIAL_TYPES:
        return native_api.BASE64, "b'\"' + b2a(v, newline=False) + b'\"'"
    if kind in INTEGER_TYPES or kind == "year":  # ZEROFILL integers lose their padding; YEAR 0000 is 0
        return native_api.INTEGER_TEXT, "b'%d' % int(v)"
    if kind == "bit":
        return native_api.BIT, "b'%d' % int.from_bytes(v, 'big')"
    # SET: a pure function of the value, kept per value; FLOAT: any number's text done in C.
    action = {"set": native_api.CACHED, "float": native_api.FLOAT32}.get(kind, native_api.PYTHON)
    return action, _rare_expression(i, column, decoding, consts)


def _rare_expression(i: int, column: Column, decoding: tuple[str | None, Any], consts: dict[str, Any]) -> str:
    """The less common types: still from the server's text, through cdc.values where a rule lives there."""
    kind = column.data_type
    if kind == "double":
        return "dumps(float(v))"
    consts[f"ENC{i}"] = encoder_for(column)
    if kind == "float":  # the shortest decimal that round-trips the 4-byte float
        return f"dumps(ENC{i}(float(v)))"
    if kind == "decimal":  # ZEROFILL: the value without the padding, as the binlog gives it
        return f"dumps(ENC{i}(Decimal(v.decode('ascii'))))"
    if kind == "set":
        return f"dumps(ENC{i}(v.decode('utf-8')))"
    consts[f"OLD{i}"] = _old_way(column, decoding)
    return f"OLD{i}(v)"


def _old_way(column: Column, decoding: tuple[str | None, Any]) -> Fragment:
    """One value as the PyMySQL path made it: the field's decoding and converter, our encoder, orjson."""
    encoding, converter = decoding
    encode, dumps = column_encoder(column), orjson.dumps

    def fragment(raw: bytes) -> bytes:
        value: Any = raw if encoding is None else raw.decode(encoding)
        if converter is not None:
            value = converter(value)
        return dumps(encode(value))

    return fragment


def _text_fragment(raw: bytes) -> bytes:
    # The connection's character set is utf8mb4: the server converts every text column to it.
    return orjson.dumps(raw.decode("utf-8"))


def _long_value(buf: bytes, p: int) -> tuple[bytes, int]:
    """A value whose length needs more than one byte: (value, position after it)."""
    width = _LONG_LENGTH.get(buf[p])
    if width is None:
        raise ValueError(f"length prefix 0x{buf[p]:02X} is not valid in a row packet")
    start = p + 1 + width
    end = start + int.from_bytes(buf[p + 1:start], "little")
    if end > len(buf):
        raise ValueError("a value runs past the end of its row packet")
    return buf[start:end], end


def _hash_fragment(key: HashKey, fragment: bytes) -> bytes:
    """A value's JSON -> the JSON string of its HMAC-SHA-256 hex (NULL never gets here: it stays null)."""
    return b'"%s"' % hash_value(orjson.loads(fragment), key).encode()  # type: ignore[union-attr]


def _template(plan: TablePlan, parts: LineParts, excluded: frozenset[str]) -> bytes:
    """The line with `%b` for each value (after: columns sorted, then key: key columns sorted) and `%d` twice."""
    dumps = orjson.dumps
    kept = [name for name in plan.schema.column_names if name not in excluded]
    after = b",".join(_escape(dumps(name)) + b":%b" for name in _sorted_names(kept))
    key = b",".join(_escape(dumps(name)) + b":%b" for name in _sorted_names(plan.key))
    return (b'{"after":{' + after + b'},"before":null,"db":' + _escape(dumps(plan.info.db))
            + b',"key":{' + key + b'},"op":"r","position":"' + _escape(parts.prefix) + b'%012d"'
            + _escape(parts.src_head) + b"%d" + _escape(parts.src_tail) + _escape(dumps(plan.info.table))
            + _escape(parts.line_tail))


def _escape(text: bytes) -> bytes:
    return text.replace(b"%", b"%%")


def _sorted_names(names: Sequence[str]) -> list[str]:
    """Names in the order orjson's OPT_SORT_KEYS writes them (asked of orjson itself, not assumed)."""
    return list(orjson.loads(orjson.dumps(dict.fromkeys(names, 0), option=orjson.OPT_SORT_KEYS)))


def _sorted_indexes(names: Sequence[str]) -> list[int]:
    index = {name: i for i, name in enumerate(names)}
    return [index[name] for name in _sorted_names(names)]


def _indent(lines: list[str], spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)
