"""The snapshot's C row reader against the generated Python one: the same packets, the same lines and errors.

Real MariaDB results (the all-types workload, the hostile names and types of test_lines, column
rules) go through both readers block by block as wire.py hands them over; then the captured
packets are cut at every offset, and synthetic packets cover what a server never sends but a reader
must still treat exactly alike: every byte and pair of bytes of text, invalid UTF-8 of every kind,
long length prefixes, malformed packets. The Python reader is the reference (it is held to the old
PyMySQL way by test_lines); the C one must equal it byte for byte, error for error.

The C reader is built by `pip install -e .` (scripts/setup.sh): these tests fail when it is missing
or stale, unless CDC_NATIVE=0 says it is switched off on purpose.
"""

from __future__ import annotations

import itertools
import random
import re
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pymysql
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.masking import ColumnRules, hash_value
from cdc.snapshot import native as native_api
from cdc.snapshot.lines import CompiledTable, LineParts, RowEncodeError, compile_table
from cdc.snapshot.wire import read_rows
from cdc.source.tables import RAW_CONVERSIONS, TableInfo, TablePlan, plan_table, prepare_session, select_sql
from tests.capture import workload
from tests.hash_key import KEY
from tests.rig import MariaDB
from tests.snapshot.test_lines import ODD_TABLE, _create_odd_table

PARTS = LineParts(b"0000000001:000000000004:s", b',"src":{"file":"b%d.000001","row":', b',"xid":null},"table":',
                  b',"ts":"2026-11-23T00:00:00Z","v":1}\n')


@pytest.fixture(autouse=True)
def _native_reader_built() -> None:
    if native_api.is_disabled():
        pytest.skip("CDC_NATIVE=0: the C row reader is switched off")
    assert native_api.native_module() is not None, native_api.PROBLEM


@dataclass
class Pair:
    """Both readers of one table; `parse` runs both on the same block and asserts they agree."""

    c: CompiledTable
    py: CompiledTable
    stream: list[bytes] = field(default_factory=list)  # the row packets both read, in order
    blocks: int = 0
    first_seq: int | None = None

    def parse(self, buf: bytes, p: int, end: int, n: int, seq: int, out: list[bytes]) -> tuple[int, int, int]:
        (native, handed_over), python = traced(self.c.parse, buf, p, end, n, seq), outcome(self.py.parse, buf, p,
                                                                                           end, n, seq)
        assert native == python
        assert not handed_over, "the C reader handed a server's ordinary rows to the Python one"
        self.blocks += 1
        self.first_seq = seq if self.first_seq is None else self.first_seq
        if not isinstance(python[0], tuple) or python[0][0] != "raised":
            self.stream.append(buf[p:python[0][0]])
        return replay(self.c.parse, buf, p, end, n, seq, out)  # the wire goes on with C's blocks


def outcome(parse: Any, buf: bytes, p: int, end: int, n: int, seq: int) -> tuple[Any, list[bytes]]:
    """(where parse stopped, or what it raised; the lines it appended, even before an error).

    The Python reader appends a bytes object per line, the C one a block of lines per call: both are
    compared as the lines they hold."""
    out: list[bytes] = []
    try:
        return parse(buf, p, end, n, seq, out), split_lines(out)
    except RowEncodeError as exc:
        return ("raised", "RowEncodeError", exc.row, type(exc.cause).__name__, str(exc.cause)), split_lines(out)
    except Exception as exc:  # noqa: BLE001 - any other error must be the same one too
        return ("raised", type(exc).__name__, str(exc)), split_lines(out)


def split_lines(out: list[bytes]) -> list[bytes]:
    assert all(block.endswith(b"\n") for block in out)  # whole lines only
    return [line + b"\n" for line in b"".join(out).split(b"\n")[:-1]]


def traced(parse: Any, buf: bytes, p: int, end: int, n: int, seq: int,
           called: Callable[[str], bool] = "parse".__eq__) -> tuple[tuple[Any, list[bytes]], int]:
    """outcome() of the C reader, and how many times it called a generated function whose name is `called`:
    by default the Python parse it hands a block over to."""
    calls = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and called(code.co_name) and code.co_filename.startswith("<snapshot reader"):
            calls.append(code)

    sys.setprofile(profile)
    try:
        result = outcome(parse, buf, p, end, n, seq)
    finally:
        sys.setprofile(None)
    return result, len(calls)


def replay(parse: Any, buf: bytes, p: int, end: int, n: int, seq: int, out: list[bytes]) -> tuple[int, int, int]:
    result: tuple[int, int, int] = parse(buf, p, end, n, seq, out)
    return result


def compiled_pair(plan: TablePlan, fields: Sequence[Any], converters: Sequence[Any],
                  rules: ColumnRules = ColumnRules()) -> Pair:
    c = compile_table(plan, PARTS, fields, converters, rules, native=True)
    py = compile_table(plan, PARTS, fields, converters, rules, native=False)
    assert c.native and not py.native
    return Pair(c, py)


def read_both(conn: pymysql.Connection, db: str, table: str,
              rules: ColumnRules = ColumnRules()) -> tuple[Pair, list[bytes]]:
    """Read the whole table through both readers (compared block by block); the Python reader's lines."""
    plan = plan_table(conn, TableInfo(db, table, 0, 0), "", allow_no_pk=False)
    pairs: list[Pair] = []

    def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
        pairs.append(compiled_pair(plan, fields, converters, rules))
        return CompiledTable(pairs[-1].parse, pairs[-1].py.row, pairs[-1].py.field_types)

    lines: list[bytes] = []

    def sink(n: int, count: int, batch: list[bytes]) -> None:
        assert n == len(lines)
        lines.extend(split_lines(batch))
        assert len(lines) == n + count

    count, last = read_rows(conn, select_sql(plan, after_key=False, limit=None), None, compiled_for, 0, sink,
                            binary_rows=False)
    assert count == len(lines) and last == lines[-1]
    return pairs[0], lines


def all_types_db(mariadb: MariaDB, db: str, transactions: int) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, db)
        workload.run_workload(conn, db, seed=31, transactions=transactions)
        with conn.cursor() as cur:  # a row of NULLs in every nullable column
            cur.execute(f"INSERT INTO `{db}`.`{workload.TABLE}` (id) VALUES (999999)")


def raw_connection(mariadb: MariaDB) -> pymysql.Connection:
    conn = mariadb.connect(conv=RAW_CONVERSIONS)
    prepare_session(conn)
    return conn


# --- real results -------------------------------------------------------------------------------


def test_all_types_workload_reads_identically(mariadb: MariaDB, fresh_db: str) -> None:
    all_types_db(mariadb, fresh_db, transactions=150)
    with raw_connection(mariadb) as conn:
        pair, lines = read_both(conn, fresh_db, workload.TABLE)
    assert len(lines) > 100 and pair.blocks >= 2
    assert any(b"\\u0000" in line for line in lines) and any("🎉".encode() in line for line in lines)


def test_odd_types_and_names_read_identically(mariadb: MariaDB, fresh_db: str) -> None:
    with mariadb.connect() as conn:
        _create_odd_table(conn, fresh_db)
    with raw_connection(mariadb) as conn:
        pair, lines = read_both(conn, fresh_db, ODD_TABLE)
    assert len(lines) == 4
    assert b'"per%cent \\"q\\"":42,' in lines[0]  # a name with % and quotes, a ZEROFILL value through Python
    assert lines[0].count(b'"ts6":"1970-01-01T00:00:01.000001Z"') == 1


def test_column_rules_read_identically(mariadb: MariaDB, fresh_db: str) -> None:
    all_types_db(mariadb, fresh_db, transactions=40)
    table = f"{fresh_db}.{workload.TABLE}"
    excluded = ("c_text", "c_blob", "c_json", "c_float")
    hashed = tuple(c for c in workload.COLUMNS if c not in excluded and c != "id")
    rules = ColumnRules(tuple(f"{table}.{c}" for c in excluded), tuple(f"{table}.{c}" for c in hashed), KEY)
    with raw_connection(mariadb) as conn:
        _, lines = read_both(conn, fresh_db, workload.TABLE, rules)
    assert len(lines) > 20
    assert not any(b'"c_text"' in line or b'"c_float"' in line for line in lines)
    assert all(line.count(b'"c_varchar":') == 1 for line in lines)


def test_packets_cut_at_every_offset_read_identically(mariadb: MariaDB, fresh_db: str) -> None:
    all_types_db(mariadb, fresh_db, transactions=4)
    with raw_connection(mariadb) as conn:
        pair, lines = read_both(conn, fresh_db, workload.TABLE)
    stream, seq0 = b"".join(pair.stream), pair.first_seq
    assert seq0 is not None and 5 < len(lines) < 40 and len(stream) < 20_000
    whole = stream + packet(seq0 + len(lines), b"\xfe\x00\x00\x02\x00")  # the EOF packet ends the rows
    for cut in range(len(whole) + 1):
        first = [outcome(reader.parse, whole, 0, cut, 0, seq0) for reader in (pair.c, pair.py)]
        assert first[0] == first[1], cut
        (p, n, seq), head = first[1]
        rest = [outcome(reader.parse, whole, p, len(whole), n, seq) for reader in (pair.c, pair.py)]
        assert rest[0] == rest[1], cut
        assert rest[1][0] == (len(stream), len(lines), (seq0 + len(lines)) & 255), cut
        assert head + rest[1][1] == lines, cut
    shifted = [outcome(reader.parse, b"junk" + whole, 4, 4 + len(whole), 0, seq0) for reader in (pair.c, pair.py)]
    assert shifted[0] == shifted[1] == ((4 + len(stream), len(lines), (seq0 + len(lines)) & 255), lines)


# --- synthetic packets --------------------------------------------------------------------------

SYNTH_COLUMNS = ("id INT PRIMARY KEY, s VARCHAR(300), j JSON, e ENUM('a','b'), b BLOB, ts TIMESTAMP(3) NULL, "
                 "dt DATETIME(2), tm TIME(6), d DECIMAL(10,2), dbl DOUBLE, y YEAR, bt BIT(64), z INT(4) ZEROFILL")


@pytest.fixture(scope="module")
def synth(mariadb: MariaDB) -> Iterator[tuple[TablePlan, Sequence[Any], Sequence[Any]]]:
    """A table of every action's column kind, with the result fields a real SELECT of it returns."""
    yield from synthetic_table(mariadb, "native", SYNTH_COLUMNS)


@pytest.fixture(scope="module")
def float_synth(mariadb: MariaDB) -> Iterator[tuple[TablePlan, Sequence[Any], Sequence[Any]]]:
    yield from synthetic_table(mariadb, "native_float", "id INT PRIMARY KEY, f FLOAT")


def synthetic_table(mariadb: MariaDB, name: str,
                    columns: str) -> Iterator[tuple[TablePlan, Sequence[Any], Sequence[Any]]]:
    db = mariadb.create_database(name)
    mariadb.execute(f"CREATE TABLE t ({columns})", database=db)
    with raw_connection(mariadb) as conn:
        plan = plan_table(conn, TableInfo(db, "t", 0, 0), "", allow_no_pk=False)
        seen: list[tuple[Sequence[Any], Sequence[Any]]] = []

        def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
            seen.append((fields, converters))
            return compile_table(plan, PARTS, fields, converters, native=False)

        read_rows(conn, select_sql(plan, after_key=False, limit=None), None, compiled_for, 0, lambda n, b: None,
                  binary_rows=False)
    yield plan, *seen[0]
    mariadb.drop_database(db)


def lenenc(value: bytes | None, width: int | None = None) -> bytes:
    """A text-protocol value: NULL, or its length (1 byte, or 0xFC/0xFD/0xFE and 2/3/8 bytes) and bytes."""
    if value is None:
        return b"\xfb"
    if width is None:
        width = 0 if len(value) < 251 else 2 if len(value) < 1 << 16 else 3 if len(value) < 1 << 24 else 8
    prefix = {0: b"", 2: b"\xfc", 3: b"\xfd", 8: b"\xfe"}[width]
    return (bytes([len(value)]) if width == 0 else prefix + len(value).to_bytes(width, "little")) + value


def packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 255]) + payload


BASE_ROW = [b"1", b"x", b'{"a":1}', b"a", b"\x00\xff", b"2026-11-23 01:02:03.456", b"2026-11-23 01:02:03.45",
            b"-838:59:59.000000", b"12.50", b"1.5", b"2026", b"\x00\x00\x00\x00\x00\x00\x01\x02", b"0042"]


def row_payload(**values: bytes | None) -> bytes:
    names = [c.split()[0] for c in SYNTH_COLUMNS.split(", ")]
    row = dict(zip(names, BASE_ROW), **values)
    return b"".join(lenenc(v) for v in row.values())


def both(synth: Any, buf: bytes, rules: ColumnRules = ColumnRules(), handed_over: int = 0) -> tuple[Any, list[bytes]]:
    """Both readers' outcome on buf (rows numbered from 3, sequence from 0), asserted equal; the C reader
    hands `handed_over` blocks to the Python one (0: it read every row itself)."""
    pair = compiled_pair(*synth, rules)
    (native, calls), python = traced(pair.c.parse, buf, 0, len(buf), 3, 0), outcome(pair.py.parse, buf, 0, len(buf),
                                                                                     3, 0)
    assert native == python
    assert calls == handed_over
    return python


def text_rows(values: Sequence[bytes]) -> bytes:
    return b"".join(packet(i, row_payload(s=v)) for i, v in enumerate(values))


def check_texts(synth: Any, values: Sequence[bytes]) -> None:
    """Each value alone in a row of its own (an error stops a block: later values would go untested)."""
    pair = compiled_pair(*synth)
    for value in values:
        buf = text_rows([value])
        (native, calls), python = traced(pair.c.parse, buf, 0, len(buf), 3, 0), outcome(pair.py.parse, buf, 0,
                                                                                         len(buf), 3, 0)
        assert native == python, value
        assert calls == (0 if is_utf8(value) else 1), value  # C writes every valid text itself


def is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_every_byte_and_every_pair_of_bytes_as_text(synth: Any) -> None:
    singles = [bytes([b]) for b in range(256)]
    check_texts(synth, singles)
    pairs = [bytes([a, b]) for a, b in itertools.product(range(256), repeat=2)]
    ascii_pairs = [v for v in pairs if v.isascii()]
    kind, lines = both(synth, text_rows(ascii_pairs))  # one block: every escape combination of two ASCII bytes
    assert kind == (len(text_rows(ascii_pairs)), 3 + len(ascii_pairs), len(ascii_pairs) & 255)
    assert b'"s":"\\u001f\\u007f"' not in b"".join(lines) and b'"s":"\\u001f\x7f"' in b"".join(lines)
    check_texts(synth, [v for v in pairs if not v.isascii()])


def test_every_byte_at_every_offset_of_a_longer_text(synth: Any) -> None:
    # The C reader skips plain ASCII 8 bytes at a time: a byte that needs care must be seen in any lane
    # of a word, after another in the same word, and in the tail shorter than a word.
    plain = bytes(range(0x20, 0x7f)).replace(b'"', b"").replace(b"\\", b"")[:24]
    values = [plain[:size] for size in range(len(plain) + 1)]
    for byte in [*range(0x20), 0x22, 0x5c, 0x7f, 0x80, 0xc3, 0xff]:
        values += [plain[:at] + bytes([byte]) + plain[at:] for at in range(len(plain) + 1)]
        values += [plain[:at] + bytes([byte, 0x0a]) + plain[at:] for at in (0, 7, 8, 15)]
    values += [plain[:at] + "é🎉".encode() + plain[at:] for at in range(len(plain) + 1)]
    check_texts(synth, values)


def test_invalid_utf8_of_every_kind(synth: Any) -> None:
    cases = [
        b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80",
        b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
        b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x8e", b"ok\xc3\x28", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc",
        "é".encode() + b"\x80", b"a" * 300 + b"\xc3",
    ]
    check_texts(synth, cases)
    valid = ["\u0080", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010ffff", "\u2028\u2029",
             "\ufeff", "🎉🐍", "é\"\\\n\x00\x1f\x7f€"]
    buf = text_rows([v.encode() for v in valid])
    (_, n, _), lines = both(synth, buf)
    assert n == 3 + len(valid) and b'"s":"\xe2\x80\xa8\xe2\x80\xa9"' in lines[8]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=40),
                          st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass"))),  # surrogates too
                min_size=1, max_size=6))
def test_random_texts(synth: Any, values: list[bytes]) -> None:
    check_texts(synth, values)
    # All in one block too: both stop at the first bad value alike.
    both(synth, text_rows(values), handed_over=0 if all(map(is_utf8, values)) else 1)


@pytest.mark.parametrize("column", ["s", "j", "e", "b"])
@pytest.mark.parametrize("size", [0, 250, 251, 252, 65_535, 65_536, 70_000])
def test_long_values_and_every_length_prefix(synth: Any, column: str, size: int) -> None:
    value = bytes((i * 7) % 94 + 33 for i in range(size))
    eight_byte_lengths = b"".join(lenenc(v, 8 if v is not None else None) for v in row_values(**{column: value}))
    rows = [packet(0, row_payload(**{column: value})), packet(1, row_payload(**{column: None})),
            packet(2, eight_byte_lengths)]
    (p, n, _), lines = both(synth, b"".join(rows))
    assert (p, n) == (sum(map(len, rows)), 6)
    assert orjson.loads(lines[0])["after"] == orjson.loads(lines[2])["after"]
    assert b'"%s":null' % column.encode() in lines[1]


def row_values(**values: bytes | None) -> list[bytes | None]:
    names = [c.split()[0] for c in SYNTH_COLUMNS.split(", ")]
    return list(dict(zip(names, BASE_ROW), **values).values())


def encode_error(cause: str, message: str) -> tuple[Any, ...]:
    return ("raised", "RowEncodeError", 3, cause, message)


ROW = packet(0, row_payload())
STOPPED_AFTER_ONE_ROW = (len(ROW), 4, 1)
# name: (packets, what both readers do: where they stop or what they raise, and whether C hands the block
# over to the Python reader (it does for anything it is not sure of, so the error is the Python one).
MALFORMED: dict[str, tuple[bytes, Any, bool]] = {
    "value past its packet": (packet(0, row_payload()[:-1] + b"\x05ab"),
                              encode_error("ValueError", "invalid literal for int() with base 10: b'004\\x05'"), True),
    "bytes after the last value": (packet(0, row_payload() + b"x"),
                                   encode_error("ValueError", "row packet of 112 bytes, its values take 111"), True),
    "0xFF prefix mid-row": (packet(0, b"\x011\xff" + row_payload()[3:]),
                            encode_error("ValueError", "length prefix 0xFF is not valid in a row packet"), True),
    "empty packet": (packet(0, b"") + ROW, ("raised", "IndexError", "index out of range"), True),
    "EOF packet": (ROW + packet(1, b"\xfe\x00\x00\x02\x00"), STOPPED_AFTER_ONE_ROW, False),
    "ERR packet": (ROW + packet(1, b"\xff\x19\x04#HY000boom"), STOPPED_AFTER_ONE_ROW, False),
    "first value 0xFE with 9+ bytes is a row": (packet(0, lenenc(b"1", 8) + row_payload()[2:]), (123, 4, 1), False),
    "sequence gap": (ROW + packet(2, row_payload()), STOPPED_AFTER_ONE_ROW, False),
    "16 MiB packet header": (ROW + b"\xff\xff\xff\x01" + row_payload(), STOPPED_AFTER_ONE_ROW, False),
    "incomplete packet": (ROW + packet(1, row_payload())[:-1], STOPPED_AFTER_ONE_ROW, False),
    "a bad DOUBLE through Python": (packet(0, row_payload(dbl=b"1.5x")),
                                    encode_error("ValueError", "could not convert string to float: b'1.5x'"), True),
    "a bad YEAR through Python": (packet(0, row_payload(y=b"20x6")),
                                  encode_error("ValueError", "invalid literal for int() with base 10: b'20x6'"), True),
    "truncated length prefix": (packet(0, row_payload()[:-5] + b"\xfd\x01"),
                                encode_error("ValueError", "a value runs past the end of its row packet"), True),
    "huge 8-byte length": (packet(0, row_payload()[:-5] + b"\xfe" + b"\xff" * 8),
                           encode_error("ValueError", "a value runs past the end of its row packet"), True),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_and_stopping_packets(synth: Any, name: str) -> None:
    buf, expected, handed_over = MALFORMED[name]
    result, lines = both(synth, buf, handed_over=int(handed_over))
    assert result == expected
    assert len(lines) == (1 if expected == STOPPED_AFTER_ONE_ROW else 0 if handed_over else 1)


def test_excluded_and_hashed_columns(synth: Any) -> None:
    plan = synth[0]
    table = f"{plan.info.db}.t"
    rules = ColumnRules((f"{table}.s", f"{table}.b"), (f"{table}.j", f"{table}.ts", f"{table}.dbl"), KEY)
    bad_text = packet(0, row_payload(s=b"\xc3\x28", b=b"\xff"))
    (_, n, _), lines = both(synth, bad_text, rules)  # an excluded value is never looked at
    assert n == 4 and b'"s"' not in lines[0] and b'"b"' not in lines[0]
    after = orjson.loads(lines[0])["after"]
    assert after["j"] == hash_value({"a": 1}, KEY) and after["ts"] == hash_value("2026-11-23T01:02:03.456000Z", KEY)
    assert after["dbl"] == hash_value(1.5, KEY) and after["d"] == "12.50"
    bad_hashed = packet(0, row_payload(dbl=b"nope"))
    result, _ = both(synth, bad_hashed, rules, handed_over=1)
    assert result == encode_error("ValueError", "could not convert string to float: b'nope'")
    nulls = packet(0, row_payload(j=None, ts=None, dbl=None))
    (_, n, _), lines = both(synth, nulls, rules)
    assert b'"j":null' in lines[0] and b'"ts":null' in lines[0] and b'"dbl":null' in lines[0]


INTEGER_TEXTS = [b"0042", b"42", b"0", b"0000", b"-0", b"-000", b"-0005", b"9" * 40, b"0" * 30 + b"7", b"2026",
                 b"+5", b" 5", b"5 ", b"1_000", b"", b"-", b"12a", b"\xd9\xa5", b"--1"]


@pytest.mark.parametrize("column", ["y", "z"])
def test_integer_text_plain_in_c_anything_else_through_int(synth: Any, column: str) -> None:
    for value in INTEGER_TEXTS:
        plain = value.lstrip(b"-").isdigit() and value.count(b"-") <= 1 and not value.startswith(b"+")
        try:
            expected: Any = b'"%s":%d' % (column.encode(), int(value))
        except ValueError as exc:
            expected = encode_error("ValueError", str(exc))
        result, lines = both(synth, packet(0, row_payload(**{column: value})), handed_over=0 if plain or
                             expected[0] != "raised" else 1)
        written = re.search(rb'"%s":[^,}]*' % column.encode(), lines[0]).group() if lines else result  # type: ignore
        assert written == expected, value


def test_bit_values_of_every_length(synth: Any) -> None:
    for size in range(0, 12):
        for value in (b"\x00" * size, b"\xff" * size, bytes(range(1, size + 1)), b"\x80" + b"\x00" * max(size - 1, 0)):
            value = value[:size]
            result, lines = both(synth, packet(0, row_payload(bt=value)))
            assert result == (len(packet(0, row_payload(bt=value))), 4, 1)
            assert b'"bt":%d,' % int.from_bytes(value, "big") in lines[0], value


def test_row_numbers_of_every_width(synth: Any) -> None:
    pair = compiled_pair(*synth)
    buf = packet(0, row_payload()) + packet(1, row_payload())
    for n in (0, 9, 10, 999_999_999_999, 10**12, 10**15, 2**62):
        assert outcome(pair.c.parse, buf, 0, len(buf), n, 0) == outcome(pair.py.parse, buf, 0, len(buf), n, 0)


def test_set_fragments_kept_per_distinct_value_stay_exact(mariadb: MariaDB, fresh_db: str) -> None:
    labels = "abcdefghij"
    mariadb.execute(f"CREATE TABLE st (id INT PRIMARY KEY, v SET({', '.join(repr(c) for c in labels)}))",
                    database=fresh_db)
    seen: list[Pair] = []
    with raw_connection(mariadb) as conn:
        plan = plan_table(conn, TableInfo(fresh_db, "st", 0, 0), "", allow_no_pk=False)

        def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
            seen.append(compiled_pair(plan, fields, converters))
            return seen[0].py

        read_rows(conn, select_sql(plan, after_key=False, limit=None), None, compiled_for, 0, lambda n, b: None,
                  binary_rows=False)
    pair = seen[0]
    # Every combination as the server sends it (1,024: past the 256 kept), then odd spellings a server never sends.
    values = [",".join(c for k, c in enumerate(labels) if mask >> k & 1).encode() for mask in range(1 << len(labels))]
    values += [b"c,a", b"a,a", b"zz", b",", "é".encode()]
    for _ in range(2):  # the second pass meets kept fragments
        buf = b"".join(packet(k, lenenc(b"%d" % k) + lenenc(v)) for k, v in enumerate(values))
        (native, calls), python = traced(pair.c.parse, buf, 0, len(buf), 0, 0), outcome(pair.py.parse, buf, 0,
                                                                                         len(buf), 0, 0)
        assert native == python and calls == 0
        assert python[0] == (len(buf), len(values), len(values) & 255)
        assert b'"v":["a","c"]' in python[1][5] and b'"v":["a","c"]' in python[1][-5]  # 'c,a' sorted as tail does
    for _ in range(2):  # a value that fails is never kept: the Python reader raises it each time
        bad = packet(0, lenenc(b"1") + lenenc(b"\xff"))
        (native, calls), python = traced(pair.c.parse, bad, 0, len(bad), 0, 0), outcome(pair.py.parse, bad, 0,
                                                                                         len(bad), 0, 0)
        assert native == python and calls == 1 and python[0][:4] == ("raised", "RowEncodeError", 0,
                                                                      "UnicodeDecodeError")


# What a server sends for `f + 0E0`, and what it never does (doubles past FLOAT's range too).
FLOAT_TEXTS = [b"0", b"-0", b"1.100000023841858", b"-1.100000023841858", b"0.10000000149011612", b"16777216",
               b"16777217", b"3.4028234663852886e38", b"-3.4028234663852886e38", b"1.1754943508222875e-38",
               b"1.401298464324817e-45", b"0.0001", b"0.00009999999747378752", b"123456.7890625", b"1e16",
               b"9999999827968", b"1e+20", b"3.4028235e38", b"3.4028236e38", b"1e400", b"-1e400", b"nan", b"inf",
               b" 1.5", b"1.5 ", b"1_5", b"1.5x", b"", b"+1.5", b"1e", b"--1", b".", b"1" * 39, b"1" * 40,
               b"1.7976931348623157e308", b"-2.2250738585072014e-308", b"5e-324", b"1e-05", b"-0.00001",
               b"9.999999999999999e-05", b"1e-06", b"1e15", b"123456789012345680000", b"0.1e-3", b"1E5"]


def float32_texts(count: int, seed: int) -> list[bytes]:
    """4-byte floats as a server prints them widened to DOUBLE (shortest round-trip: repr's digits, no '+'):
    half of any bit pattern, half prices and measures (a few decimals, as people store them), some of
    those scaled down to where repr and orjson start writing exponents."""
    rng = random.Random(seed)
    texts = []
    while len(texts) < count:
        if len(texts) % 2:
            value = struct.unpack("<f", rng.getrandbits(32).to_bytes(4, "little"))[0]
        else:
            value = round(rng.uniform(-1e6, 1e6) * 10.0 ** -rng.randrange(0, 6), rng.randrange(0, 8))
            value *= 10.0 ** -rng.randrange(6, 12) if len(texts) % 10 == 0 else 1
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        if value == value and abs(value) != float("inf"):
            texts.append(repr(value).encode().replace(b"+", b""))
    return texts


@pytest.mark.parametrize("exponents", [True, False], ids=["orjson-as-checked", "another-orjson"])
def test_float_values_written_in_c_odd_text_through_python(float_synth: Any, exponents: bool) -> None:
    """Both readers byte for byte and error for error; C writes every float of number text itself, and those
    with an exponent only while orjson writes exponents as C does (checked at import: "another-orjson" is
    what an orjson that writes them otherwise gets)."""
    pair = compiled_pair(*float_synth)
    module = native_api.native_module()
    assert module is not None and native_api.orjson_writes_exponents_as_c()
    module.set_orjson_exponents(exponents)
    in_c = with_exponent = 0
    try:
        for text in FLOAT_TEXTS + float32_texts(20_000, seed=8):
            buf = packet(0, lenenc(b"1") + lenenc(text))
            # c_calls: the column fragments C called (frag0, frag1, ...), each a value C did not write itself
            native, c_calls = traced(pair.c.parse, buf, 0, len(buf), 3, 0,
                                     called=lambda name: name.startswith("frag"))
            python = outcome(pair.py.parse, buf, 0, len(buf), 3, 0)
            assert native == python, text
            written = python[1][0] if python[1] else b""
            number = re.search(rb'"f":([^,}]*)', written)
            # A number (not an error, not null for an overflow) from text of number characters only.
            by_c = (number is not None and number.group(1) != b"null"
                    and re.fullmatch(rb"[-+0-9.eE]{1,39}", text) is not None)
            exponent = by_c and number is not None and "e" in repr(orjson.loads(number.group(1)))
            by_c = by_c and (exponents or not exponent)
            assert (c_calls == 0) == by_c, text  # C wrote every value it should, and only those
            in_c += by_c
            with_exponent += by_c and exponent
    finally:
        module.set_orjson_exponents(native_api.orjson_writes_exponents_as_c())
    # Every random value is written by C; without the exponent forms, about 45% of them go to Python.
    assert in_c > (20_000 if exponents else 10_000)
    assert (with_exponent > 1_000) == exponents
