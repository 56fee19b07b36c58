"""The compiled snapshot reader against the old way, byte for byte, and the wire reader's hard cases.

The old way is PyMySQL's own row parsing and converters, cdc.values.encode_row and
cdc.changelog.encode_line: what snapshot wrote before the compiled reader, and what tail's values
are held to. Every line the snapshot writes must equal it byte for byte, on hostile values of every
type, on names that would break a %-template, on values whose lengths take 2, 3 and 8 bytes, and on
rows of more than 16 MiB (split over several packets).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymysql
import pymysql.cursors
import pytest

from cdc.changelog import encode_line, list_segments, position_string
from cdc.snapshot.lines import LineParts, compile_table
from cdc.snapshot.run import SnapshotRequest, SnapshotSummary, run_snapshot
from cdc.snapshot.wire import read_rows
from cdc.source.schema_reads import read_table_schema
from cdc.source.tables import RAW_CONVERSIONS, TableInfo, plan_table, quote_ident, select_sql
from cdc.values import encode_row
from tests.capture import workload
from tests.rig import MariaDB
from tests.snapshot.support import make_settings, mysql_args, state, subprocess_env  # noqa: F401

ODD_TABLE = 'odd%s "types" %d'
ODD_COLUMNS = {
    "id": "INT NOT NULL PRIMARY KEY",
    'per%cent "q"': "INT(6) ZEROFILL",
    "dz": "DECIMAL(10,3) ZEROFILL",
    "dblz": "DOUBLE ZEROFILL",
    "y": "YEAR",
    "b1": "BIT(1)",
    "s": "SET('a','b','c')",
    "mt": "MEDIUMTEXT",
    "lb": "LONGBLOB",
    "ts6": "TIMESTAMP(6) NULL DEFAULT NULL",
    "t3": "TIME(3)",
    "e": "ENUM('x','y')",
    "tu": "TINYINT UNSIGNED",
    "bu": "BIGINT UNSIGNED",
    "nn": "VARCHAR(5) NOT NULL DEFAULT ''",
    "l1": "CHAR(3) CHARACTER SET latin1",
    "f": "FLOAT",
    "ctl": "VARCHAR(20)",
    "x ORDER BY y": "VARCHAR(12)",  # a name that contains SQL keywords of the chunk query
}
ODD_ROWS: list[tuple[Any, ...]] = [
    (1, 42, "12.340", 1.5, 2026, b"\x01", "c,a", "é🎉\\\"" * 30_000, bytes(range(256)) * 300, "1970-01-01 00:00:01.000001",
     "-838:59:58.999", "y", 255, 2**64 - 1, "", "€ü'", 3.4e38, "\x7f\x1f\x00%s%%", " ORDER BY "),
    (2, 0, "0.000", 0.0, 0, b"\x00", "", "", b"", "0000-00-00 00:00:00", "00:00:00", "", 0, 0, "x", "", -0.0, "\u2028", "%s"),
    (3, *([None] * 13), "a\tb", None, None, None, None),
    (4, 999999, "9999999.999", 1e-300, 1901, b"\x01", "b", "plain", b"\xc3\x28", "2038-01-19 03:14:07.999999",
     "25:00:00.5", "x", 1, 2**63, "O'B", "a b", 1.1, "back\\slash\n", "LIMIT 1"),
]


def _expected_lines(conn: pymysql.Connection, db: str, table: str, summary: SnapshotSummary) -> list[bytes]:
    """The old way: PyMySQL's converters, encode_row, encode_line; rows in key order, numbered from 0."""
    schema = read_table_schema(conn, db, table)
    assert schema is not None
    cp = summary.checkpoint
    h = cp.handover
    select = ", ".join(f"{quote_ident(c.name)} + 0E0 AS {quote_ident(c.name)}" if c.data_type == "float"
                       else quote_ident(c.name) for c in schema.columns)
    order = ", ".join(quote_ident(k) for k in schema.primary_key)
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT {select} FROM {quote_ident(db)}.{quote_ident(table)} ORDER BY {order}")
        rows = cur.fetchall()
    lines = []
    for n, row in enumerate(rows):
        after = encode_row(schema.columns, row)
        lines.append(encode_line({
            "after": after, "before": None, "db": db, "key": {k: after[k] for k in schema.primary_key}, "op": "r",
            "position": position_string(h.file, h.pos, n, snapshot=True),
            "src": {"file": h.file, "gtid": h.gtid, "pos": h.pos, "row": n, "server_id": cp.server_id, "xid": None},
            "table": table, "ts": cp.started_at, "v": 1,
        }))
    return lines


def _written_lines(state_dir: Path) -> list[bytes]:
    return [line for seg in list_segments(state_dir / "changelog") for line in seg.read_bytes().splitlines(True)]


def _create_odd_table(conn: pymysql.Connection, db: str) -> None:
    columns = ", ".join(f"{quote_ident(name)} {sql}" for name, sql in ODD_COLUMNS.items())
    names = ", ".join(quote_ident(name) for name in ODD_COLUMNS)
    workload.prepare_session(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {quote_ident(db)}.{quote_ident(ODD_TABLE)} ({columns})")
        # PyMySQL %-formats the statement to bind values: the names' own '%' must be doubled.
        target = f"{quote_ident(db)}.{quote_ident(ODD_TABLE)} ({names})".replace("%", "%%")
        cur.executemany(f"INSERT INTO {target} VALUES ({', '.join(['%s'] * len(ODD_COLUMNS))})", ODD_ROWS)


@pytest.mark.parametrize("chunk_size", [3, 10_000])
def test_all_types_lines_equal_the_old_way_byte_for_byte(
    mariadb: MariaDB, fresh_db: str, state: Path, chunk_size: int
) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
        workload.run_workload(conn, fresh_db, seed=23, transactions=120)
        with conn.cursor() as cur:  # a row of NULLs in every nullable column
            cur.execute(f"INSERT INTO `{fresh_db}`.`{workload.TABLE}` (id) VALUES (999999)")
    summary = run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest(chunk_size=chunk_size))
    with mariadb.connect() as conn:
        expected = _expected_lines(conn, fresh_db, workload.TABLE, summary)
    written = _written_lines(state)
    assert len(written) == len(expected) > 100
    for got, want in zip(written, expected):
        assert got == want


def test_odd_types_and_names_equal_the_old_way_byte_for_byte(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    with mariadb.connect() as conn:
        _create_odd_table(conn, fresh_db)
    summary = run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest(chunk_size=3))
    with mariadb.connect() as conn:
        expected = _expected_lines(conn, fresh_db, ODD_TABLE, summary)
    written = _written_lines(state)
    assert written == expected
    assert b'"per%cent \\"q\\"":42,' in written[0] and b'"dz":"12.340"' in written[0]  # zero fill gone
    assert summary.rows == len(ODD_ROWS) and summary.chunks == 2


def test_rows_over_16_mib_span_packets_and_stay_exact(mariadb_factory: Any, tmp_path: Path) -> None:
    server = mariadb_factory({"max-allowed-packet": "64M"})
    db = server.create_database("big")
    server.execute(f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, v LONGBLOB, t LONGTEXT)")
    # 17 MiB of blob (a row packet of 16 MiB or more continues in the next one) and 3 MiB of text
    # between ordinary rows; row 4's packet is exactly 16 MiB - 1 bytes, so an empty packet ends it.
    server.execute(f"INSERT INTO `{db}`.b VALUES (1, 'a', 'x'), (2, REPEAT(x'00ff', 17 * 524288), "
                   f"REPEAT('é', 3 * 524288)), (3, NULL, ''), (4, REPEAT('z', 16777215 - 7), NULL), (5, 'e', 'f')")
    state_dir = tmp_path / "state"
    summary = run_snapshot(make_settings(server, state_dir, databases=(db,)), SnapshotRequest(chunk_size=10))
    with server.connect() as conn:
        expected = _expected_lines(conn, db, "b", summary)
    written = _written_lines(state_dir)
    assert [len(line) for line in written] == [len(line) for line in expected]
    assert written == expected


def _reader(conn: pymysql.Connection, db: str, table: str) -> tuple[str, Any]:
    plan = plan_table(conn, TableInfo(db, table, 0, 0), "", allow_no_pk=False)
    parts = LineParts(b"0000000001:000000000004:s", b',"src":{"row":', b'},"table":', b',"v":1}\n')
    return select_sql(plan, after_key=False, limit=None), lambda fields, conv: compile_table(plan, parts, fields, conv)


def test_an_error_packet_mid_result_raises_and_the_connection_stays_usable(mariadb: MariaDB, fresh_db: str) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40))", database=fresh_db)
    mariadb.execute("INSERT INTO t SELECT seq, REPEAT('v', 40) FROM seq_1_to_300000", database=fresh_db)
    conn = mariadb.connect(conv=RAW_CONVERSIONS)
    try:
        sql, compiled_for = _reader(conn, fresh_db, "t")
        seen: list[int] = []

        def slow_sink(n: int, count: int, lines: list[bytes]) -> None:
            seen.append(sum(block.count(b"\n") for block in lines))
            assert seen[-1] == count
            if len(seen) == 1:
                time.sleep(0.5)  # the statement's time runs out while the server still has rows to send

        with conn.cursor() as cur:
            cur.execute("SET SESSION max_statement_time = 0.2")
        with pytest.raises(pymysql.err.OperationalError) as raised:
            read_rows(conn, sql, None, compiled_for, 0, slow_sink)
        assert raised.value.args[0] == 1969, raised.value  # ER_STATEMENT_TIMEOUT, sent as an ERR packet
        assert 0 < sum(seen) < 300_000
        with conn.cursor() as cur:  # in step with the server: the next statement works
            cur.execute("SET SESSION max_statement_time = 0")
            cur.execute(f"SELECT COUNT(*) FROM `{fresh_db}`.t")
            assert cur.fetchone() == (300_000,)
            cur.execute("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")  # the C reader's statement closed too
            assert str(cur.fetchone()[1]) == "0"
    finally:
        conn.close()


def test_a_killed_connection_mid_result_is_an_error_not_a_short_chunk(mariadb: MariaDB, fresh_db: str) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40))", database=fresh_db)
    mariadb.execute("INSERT INTO t SELECT seq, REPEAT('v', 40) FROM seq_1_to_300000", database=fresh_db)
    conn = mariadb.connect(conv=RAW_CONVERSIONS)
    sql, compiled_for = _reader(conn, fresh_db, "t")
    seen: list[int] = []

    def killing_sink(n: int, count: int, lines: list[bytes]) -> None:
        seen.append(sum(block.count(b"\n") for block in lines))
        assert seen[-1] == count
        if len(seen) == 1:
            mariadb.execute(f"KILL CONNECTION {conn.thread_id()}")

    try:
        with pytest.raises(pymysql.err.OperationalError):
            read_rows(conn, sql, None, compiled_for, 0, killing_sink)
        assert 0 < sum(seen) < 300_000
    finally:
        conn.close()


def _peak_rss_mib(server: MariaDB, state_dir: Path, table: str) -> int:
    """Peak RSS of a `cdc snapshot` subprocess copying `table` in one chunk."""
    code = ("import resource, sys\nfrom cdc.commands.main import run\nsys.argv = ['cdc', *sys.argv[1:]]\n"
            "try:\n    run()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, "snapshot", *mysql_args(server), "--state-dir", str(state_dir),
                             "--tables", table, "--chunk-size", "1000000", "--json"],
                            capture_output=True, text=True, timeout=300, env=subprocess_env(state_dir.parent))
    assert result.returncode == 0, result.stderr
    return int(result.stderr.strip().splitlines()[-1])


def test_memory_stays_bounded_over_a_120_mb_chunk(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    for rows in (1000, 400_000):
        mariadb.execute(f"CREATE TABLE t{rows} (id INT PRIMARY KEY, v VARCHAR(300))", database=fresh_db)
        mariadb.execute(f"INSERT INTO t{rows} SELECT seq, REPEAT('v', 300) FROM seq_1_to_{rows}", database=fresh_db)
    small = _peak_rss_mib(mariadb, tmp_path / "small", f"{fresh_db}.t1000")
    big = _peak_rss_mib(mariadb, tmp_path / "big", f"{fresh_db}.t400000")
    # One SELECT streams 120 MB of values and 170 MB of lines: only a block and a batch of lines are held.
    assert big - small < 30, (small, big)
