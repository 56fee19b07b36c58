"""The binary protocol's rows turned into text rows (cdc.snapshot.binary), against the server's own text rows.

The same SELECT (cdc's: FLOAT widened by `+ 0E0`, key order) is run both ways on the session server, over the
table of every type with hostile values (tests/capture/workload.py) and a table of edge values. Every value
must be the server's text byte for byte, except DOUBLE, whose text must read back as the same double.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pymysql
import pytest
from pymysql.connections import MySQLResult
from pymysql.constants import COMMAND, FIELD_TYPE

from cdc.masking import ColumnRules
from cdc.snapshot import native as native_api
from cdc.snapshot.binary import WireType, close, execute, prepare, to_text
from cdc.snapshot.lines import CompiledTable, compile_table
from cdc.snapshot.run import SnapshotRequest, run_snapshot
from cdc.snapshot.wire import read_rows
from cdc.source.tables import RAW_CONVERSIONS, TableInfo, plan_table, prepare_session, select_sql
from tests.capture import workload
from tests.hash_key import KEY
from tests.rig import MariaDB
from tests.snapshot.support import make_settings
from tests.snapshot.test_handover import general_log
from tests.snapshot.test_native import PARTS

EDGE = """CREATE TABLE edge (
  id INT PRIMARY KEY, d DATE, dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), ts0 TIMESTAMP NULL DEFAULT NULL,
  ts6 TIMESTAMP(6) NULL DEFAULT NULL, t0 TIME, t1 TIME(1), t6 TIME(6), y YEAR, f FLOAT, db DOUBLE,
  ub BIGINT UNSIGNED, sb BIGINT, ti TINYINT, tu TINYINT UNSIGNED, sm SMALLINT UNSIGNED, m MEDIUMINT,
  mu MEDIUMINT UNSIGNED, zf INT(5) ZEROFILL, de DECIMAL(30,10), bi BIT(13), e ENUM('a','b'), s SET('x','y'),
  v VARCHAR(20), bl BLOB)"""
EDGE_ROWS = [
    (1, "0000-00-00", "0000-00-00 00:00:00", "0000-00-00 00:00:00.000", "0000-00-00 00:00:00.000000",
     "0000-00-00 00:00:00", "0000-00-00 00:00:00.000000", "-838:59:59", "-00:00:00.5", "-838:59:58.999999",
     0, -0.0, -0.0, 2**64 - 1, -(2**63), -128, 255, 65535, -8388608, 16777215, 42, "-12345678901234567890.1234567890",
     0b1010101010101, "a", "x,y", "", b""),
    (2, "2026-00-00", "9999-12-31 23:59:59", "2026-11-22 07:00:01.123", "1999-12-31 23:59:59.999999",
     "2038-01-19 03:14:07", "1970-01-01 00:00:01.000001", "838:59:59", "00:00:00.1", "12:34:56.789012",
     2155, 3.4e38, 1.7976931348623157e308, 0, 2**63 - 1, 127, 0, 0, 8388607, 0, 0, "0.0000000001",
     0, "b", "", "O'Brien \\ \U0001f389", b"\x00\xff"),
    (3, "1000-01-01", "2026-05-00 00:00:00", "2026-01-01 00:00:00.001", "2026-01-01 00:00:00.000001",
     "2026-03-29 01:30:00", "2026-03-29 01:30:00.5", "00:00:00", "-01:30:00.2", "-00:00:00.000001",
     1901, 1.1, 5e-324, 123456789, 0, 0, 1, 1, 0, 1, 99999, "1", 1, None, None, "x", b"\x01"),
    (4, *([None] * 26)),
]


def edge_table(server: MariaDB, db: str) -> None:
    with server.connect(database=db) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # zero and partial-zero dates
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(EDGE)
        cur.executemany(f"INSERT INTO edge VALUES ({', '.join(['%s'] * 27)})", EDGE_ROWS)
        conn.commit()


def binary_rows(conn: pymysql.Connection, sql: str) -> tuple[list[WireType], Iterator[bytes]]:
    """The column types and the row payloads of `sql` run as a prepared statement (closed after the last row)."""
    statement = prepare(conn, sql)
    result = execute(conn, statement)

    def rows() -> Iterator[bytes]:
        while not (packet := conn._read_packet()).is_eof_packet():  # noqa: SLF001
            yield packet.get_all_data()
        close(conn, statement)

    return [WireType.of(field) for field in result.fields], rows()


def query_rows(conn: pymysql.Connection, sql: str) -> tuple[list[Any], list[bytes]]:
    """The text protocol's fields and row payloads of `sql`."""
    conn._execute_command(COMMAND.COM_QUERY, sql)  # noqa: SLF001
    result = MySQLResult(conn)
    result.field_count = conn._read_packet().read_length_encoded_integer()  # noqa: SLF001
    result._get_descriptions()  # noqa: SLF001
    rows = []
    while not (packet := conn._read_packet()).is_eof_packet():  # noqa: SLF001
        rows.append(packet.get_all_data())
    return result.fields, rows


def values(payload: bytes) -> list[bytes | None]:
    """The length-encoded values of a text row payload."""
    out: list[bytes | None] = []
    p = 0
    while p < len(payload):
        first = payload[p]
        if first == 0xFB:
            out.append(None)
            p += 1
            continue
        width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first, 0)
        size = first if not width else int.from_bytes(payload[p + 1:p + 1 + width], "little")
        p += 1 + width
        out.append(payload[p:p + size])
        p += size
    return out


def select_of(server: MariaDB, db: str, table: str) -> str:
    rows = server.execute("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                          "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, table))
    columns = ", ".join(f"`{c}` + 0E0 AS `{c}`" if kind == "float" else f"`{c}`" for c, kind in rows)
    return f"SELECT {columns} FROM `{db}`.`{table}` ORDER BY `id`"


def assert_same_rows(server: MariaDB, db: str, table: str) -> int:
    sql = select_of(server, db, table)
    with server.connect() as conn:
        prepare_session(conn)
        fields, expected = query_rows(conn, sql)
        types, rows = binary_rows(conn, sql)
        got = [to_text(row, types) for row in rows]
    assert [WireType.of(f) for f in fields] == types
    assert len(got) == len(expected)
    for n, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        for wire, field, a, b in zip(types, fields, values(mine), values(theirs), strict=True):
            if wire.code == FIELD_TYPE.DOUBLE and a is not None and b is not None:
                assert struct.pack("<d", float(a)) == struct.pack("<d", float(b)), (n, field.name, a, b)
            else:
                assert a == b, (n, field.name, a, b)
    return len(got)


def test_every_type_with_hostile_values(mariadb: MariaDB, fresh_db: str) -> None:
    rng = random.Random(28)
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
        workload.prepare_session(conn)
        with conn.cursor() as cur:
            for key in range(1, 401):
                workload.insert_row(cur, fresh_db, workload.TABLE, workload.random_row(rng, key))
        conn.commit()
    assert assert_same_rows(mariadb, fresh_db, workload.TABLE) == 400


def test_edge_values(mariadb: MariaDB, fresh_db: str) -> None:
    edge_table(mariadb, fresh_db)
    assert assert_same_rows(mariadb, fresh_db, "edge") == len(EDGE_ROWS)


def test_damaged_binary_rows_are_refused(mariadb: MariaDB, fresh_db: str) -> None:
    """Every cut of a row and random byte flips: a ValueError or a text row, never another exception."""
    edge_table(mariadb, fresh_db)
    with mariadb.connect() as conn:
        types, rows = binary_rows(conn, select_of(mariadb, fresh_db, "edge"))
        payloads = list(rows)
    for payload in payloads:
        for cut in range(len(payload)):
            with pytest.raises(ValueError):
                to_text(payload[:cut], types)
    rng = random.Random(1)
    for _ in range(2000):
        damaged = bytearray(rng.choice(payloads))
        damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            to_text(bytes(damaged), types)
        except ValueError:
            pass


# --- the snapshot's lines, read over each protocol ------------------------------------------------------------


def lines_of(mariadb: MariaDB, db: str, table: str, *, binary: bool, native: bool,
             rules: ColumnRules = ColumnRules()) -> list[bytes]:
    """The change-log lines of the whole table, read by read_rows over one protocol with one reader."""
    with mariadb.connect(conv=RAW_CONVERSIONS) as conn:
        prepare_session(conn)
        plan = plan_table(conn, TableInfo(db, table, 0, 0), "", allow_no_pk=False)
        compiled: list[CompiledTable] = []

        def compiled_for(fields: Sequence[Any], converters: Sequence[Any]) -> CompiledTable:
            compiled.append(compile_table(plan, PARTS, fields, converters, rules, native=native))
            return compiled[-1]

        lines: list[bytes] = []
        count, _ = read_rows(conn, select_sql(plan, after_key=False, limit=None), None, compiled_for, 0,
                             lambda _n, _count, batch: lines.extend(batch), binary_rows=binary)
    assert compiled[0].native is native
    out = [line + b"\n" for line in b"".join(lines).split(b"\n")[:-1]]
    assert len(out) == count
    return out


def assert_protocols_agree(mariadb: MariaDB, db: str, table: str, rules: ColumnRules = ColumnRules()) -> list[bytes]:
    """The text protocol read by the Python reader (the reference) = the binary protocol read by the C reader
    = the binary protocol read row by row through binary.to_text and the Python reader."""
    reference = lines_of(mariadb, db, table, binary=False, native=False, rules=rules)
    assert lines_of(mariadb, db, table, binary=True, native=True, rules=rules) == reference
    assert lines_of(mariadb, db, table, binary=True, native=False, rules=rules) == reference
    return reference


@pytest.fixture
def _native_reader_built() -> None:
    if native_api.is_disabled():
        pytest.skip("CDC_NATIVE=0: the C row reader is switched off")
    assert native_api.native_module() is not None, native_api.PROBLEM


@pytest.mark.usefixtures("_native_reader_built")
def test_snapshot_lines_equal_over_both_protocols(mariadb: MariaDB, fresh_db: str) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
        workload.run_workload(conn, fresh_db, seed=28, transactions=150)
        with conn.cursor() as cur:  # a row of NULLs in every nullable column
            cur.execute(f"INSERT INTO `{fresh_db}`.`{workload.TABLE}` (id) VALUES (999999)")
        conn.commit()
    lines = assert_protocols_agree(mariadb, fresh_db, workload.TABLE)
    assert len(lines) > 100 and any("🎉".encode() in line for line in lines)


@pytest.mark.usefixtures("_native_reader_built")
def test_edge_values_and_column_rules_equal_over_both_protocols(mariadb: MariaDB, fresh_db: str) -> None:
    edge_table(mariadb, fresh_db)
    assert len(assert_protocols_agree(mariadb, fresh_db, "edge")) == len(EDGE_ROWS)
    table = f"{fresh_db}.edge"
    rules = ColumnRules((f"{table}.bl", f"{table}.f"), tuple(f"{table}.{c}" for c in ("db", "dt6", "t6", "y", "zf")),
                        KEY)
    lines = assert_protocols_agree(mariadb, fresh_db, "edge", rules)
    assert not any(b'"bl"' in line for line in lines)


def _outcome(convert: Any, payload: bytes) -> bytes | str:
    try:
        return bytes(convert(payload))
    except ValueError:
        return "ValueError"


@pytest.mark.usefixtures("_native_reader_built")
def test_the_c_conversion_equals_the_reference_on_damaged_rows(mariadb: MariaDB, fresh_db: str) -> None:
    """The C reader's to_text (_native_binary.c) against binary.to_text: every cut of every edge row and random
    byte flips give the same text row, or both a ValueError."""
    edge_table(mariadb, fresh_db)
    with mariadb.connect() as conn:
        prepare_session(conn)
        types, rows = binary_rows(conn, select_of(mariadb, fresh_db, "edge"))
        payloads = list(rows)
    module = native_api.native_module()
    assert module is not None
    reader = module.reader((native_api.SKIP,) * len(types), (b"",) * len(types), (None,) * len(types), (b"",), (),
                           lambda *_: None)
    reader.set_binary(tuple((t.code, int(t.unsigned), t.decimals, t.zerofill, False) for t in types), lambda *_: b"")
    cases = [payload[:cut] for payload in payloads for cut in range(len(payload) + 1)]
    rng = random.Random(7)
    for _ in range(3000):
        damaged = bytearray(rng.choice(payloads))
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        cases.append(bytes(damaged))
    made = 0
    for case in cases:
        mine = _outcome(reader.to_text, case)
        assert mine == _outcome(lambda p: to_text(p, types), case), case
        made += mine != "ValueError"
    assert made > len(payloads)  # whole rows, and damaged ones that still read, were compared as text


@pytest.mark.usefixtures("_native_reader_built")
def test_the_snapshot_reads_its_rows_over_the_binary_protocol(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    """`cdc snapshot` with the C reader prepares and executes the table's SELECT (the server prints no value), and
    its lines are the text protocol's (the reference reader's)."""
    edge_table(mariadb, fresh_db)
    with general_log(mariadb):
        summary = run_snapshot(make_settings(mariadb, tmp_path / "state", databases=(fresh_db,)),
                               SnapshotRequest(chunk_size=10))
        logged = mariadb.execute("SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log")
    kinds = {kind for kind, statement in logged if f"FROM `{fresh_db}`.`edge` ORDER BY" in statement}
    assert kinds == {"Prepare", "Execute"}, logged
    assert summary.rows == len(EDGE_ROWS)
    written = [line for segment in (tmp_path / "state" / "changelog").glob("seg-*")
               for line in segment.read_bytes().splitlines(keepends=True)]
    reference = lines_of(mariadb, fresh_db, "edge", binary=False, native=False)
    assert [orjson.loads(line)["after"] for line in written] == [orjson.loads(line)["after"] for line in reference]


@pytest.mark.usefixtures("_native_reader_built")
def test_a_server_that_will_not_prepare_is_read_over_text(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    """max_prepared_stmt_count 0: COM_STMT_PREPARE fails (1461), the same SELECT runs over the text protocol."""
    edge_table(mariadb, fresh_db)
    limit = mariadb.variable("max_prepared_stmt_count")
    mariadb.execute("SET GLOBAL max_prepared_stmt_count = 0")
    try:
        with general_log(mariadb):
            summary = run_snapshot(make_settings(mariadb, tmp_path / "state", databases=(fresh_db,)),
                                   SnapshotRequest(chunk_size=10))
            logged = mariadb.execute("SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log")
    finally:
        mariadb.execute(f"SET GLOBAL max_prepared_stmt_count = {int(limit)}")
    kinds = [kind for kind, statement in logged if f"FROM `{fresh_db}`.`edge` ORDER BY" in statement]
    assert kinds == ["Query"], logged  # the refused COM_STMT_PREPARE is not logged; read over text
    assert summary.rows == len(EDGE_ROWS)


@pytest.mark.usefixtures("_native_reader_built")
def test_mariadb_address_and_uuid_types_equal_over_both_protocols(mariadb: MariaDB, fresh_db: str) -> None:
    """INET6, UUID and INET4 (MariaDB 10.5-10.10) come as text in both protocols."""
    mariadb.execute("CREATE TABLE u (id INT PRIMARY KEY, a INET6, b UUID, c INET4)", database=fresh_db)
    mariadb.execute("INSERT INTO u VALUES (1, '::1', '123e4567-e89b-12d3-a456-426655440000', '10.0.0.1'), "
                    "(2, 'fe80::1:2', NULL, NULL), (3, NULL, '00000000-0000-0000-0000-000000000000', '0.0.0.0')",
                    database=fresh_db)
    assert assert_same_rows(mariadb, fresh_db, "u") == 3
    lines = assert_protocols_agree(mariadb, fresh_db, "u")
    assert b'"a":"::1"' in lines[0] and b'"c":"10.0.0.1"' in lines[0]
