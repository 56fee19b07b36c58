"""The binlog stream's fast reading (issue 28): packets in blocks, common rows events without the library's constructor.

Each test reads one real binlog range twice, as tail reads it and with the fast paths switched off (PyMySQL's
own packet reads, python-mysql-replication's own event construction), and asserts the same events: every
field tail uses, the row bytes and the rows the library reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.source import binlog_blocks, binlog_rows
from cdc.source.binlog import BinlogReader, Event, Position, ReaderOptions
from tests.capture.conftest import settings_for
from tests.rig import MariaDB

TABLE = ("CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a BIGINT UNSIGNED, b VARCHAR(40), c DECIMAL(10,3), "
         "d DATETIME(6), e FLOAT, f JSON, g BLOB, h ENUM('x','y'), i BIT(5), j SET('p','q'), k TIME(2), "
         "l YEAR) DEFAULT CHARSET=utf8mb4")
ROW = "({n}, {n} * 1000, CONCAT('zoë ', {n}), {n} / 7, NOW(6), {n} / 3, JSON_OBJECT('n', {n}), REPEAT('b', {n}), " \
      "1 + {n} % 2, {n} % 32, 'p,q', '-01:02:03.45', 2000 + {n} % 50)"


def _workload(mariadb: MariaDB, db: str) -> tuple[Position, Position]:
    """Inserts, updates and deletes over two null-bitmap bytes, NULLs, foreign_key_checks=0, a MINIMAL image."""
    mariadb.execute(TABLE.format(db=db))
    start = Position(*mariadb.binlog_position())
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES " + ",".join(ROW.format(n=n) for n in range(1, 301)))
    mariadb.execute(f"INSERT INTO `{db}`.t (id) VALUES (1000)")
    mariadb.execute(f"UPDATE `{db}`.t SET b = CONCAT(b, '\"\\\\'), e = NULL WHERE id % 3 = 0")
    with mariadb.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION foreign_key_checks = 0")
        cursor.execute(f"DELETE FROM `{db}`.t WHERE id % 5 = 0")
        cursor.execute("SET SESSION binlog_row_image = 'MINIMAL'")  # partial images: the library's readers
        cursor.execute(f"UPDATE `{db}`.t SET c = c + 1 WHERE id % 7 = 1")
    return start, Position(*mariadb.binlog_position())


def _read(mariadb: MariaDB, tmp_path: Path, start: Position, end: Position) -> tuple[list[tuple[Any, ...]], Any]:
    """Every event from start to end as the fields tail uses, rows events with their bytes and library rows."""
    settings = settings_for(mariadb, tmp_path, **{"mysql.server_id": 777301})
    reader = BinlogReader(settings.mysql, start, ReaderOptions(heartbeat=1, read_timeout=10))
    seen: list[tuple[Any, ...]] = []
    try:
        for event in reader.events():
            seen.append(_fields(event))
            if event.file == end.file and event.next_pos >= end.pos:
                break
        return seen, reader._blocks
    finally:
        reader.close()


def _fields(event: Event) -> tuple[Any, ...]:
    fields = (event.kind, event.file, event.pos, event.next_pos, event.timestamp, event.server_id, event.gtid,
              event.db, event.table, event.op, event.table_id, event.fk_checks)
    if event.kind != "rows":
        return fields
    raw = event.raw
    return (*fields, hasattr(raw, "_cdc_args"), raw.row_bytes(), raw.rows, raw.flags, raw.event_size,
            raw.number_of_columns, raw.columns_present_bitmap)


def test_common_rows_events_are_built_fast_and_equal_the_librarys(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    start, end = _workload(mariadb, fresh_db)
    fast, blocks = _read(mariadb, tmp_path, start, end)
    with monkeypatch.context() as patched:
        patched.setattr(binlog_rows._PacketWrapper, "_fast_rows", lambda self, args: False)
        patched.setattr(binlog_blocks.BlockPackets, "install", lambda self: None)
        slow, _ = _read(mariadb, tmp_path, start, end)
    rows = [f for f in fast if f[0] == "rows"]
    built_fast = [f for f in rows if f[12]]
    # Every full-image rows event went the fast way; the MINIMAL update's went through the library.
    assert len(built_fast) == len(rows) - 1 and rows[-1][12] is False and rows[-1][13] is None
    assert {f[9] for f in built_fast} == {"c", "u", "d"} and any(f[11] is False for f in built_fast)
    assert sum(len(f[14]) for f in rows) == 301 + 100 + 61 + 34
    assert [f[:12] + f[13:] for f in fast] == [f[:12] + f[13:] for f in slow]
    assert blocks is not None and 0 < blocks.blocks < len(fast) / 4  # packets came in blocks


def test_fast_events_give_the_librarys_rows_when_their_body_is_refused(mariadb: MariaDB, fresh_db: str,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The differential tests switch the body off (row_bytes -> None): a fast event then reads as the library."""
    start, end = _workload(mariadb, fresh_db)
    with monkeypatch.context() as patched:
        patched.setattr(binlog_rows._RowsGuard, "row_bytes", lambda self: None)
        fast, _ = _read(mariadb, tmp_path, start, end)
        patched.setattr(binlog_rows._PacketWrapper, "_fast_rows", lambda self, args: False)
        slow, _ = _read(mariadb, tmp_path, start, end)
    assert any(f[12] for f in fast if f[0] == "rows")
    assert [f[:12] + f[13:] for f in fast] == [f[:12] + f[13:] for f in slow]


@pytest.mark.parametrize("size", [300_000, 17 * 2**20], ids=["past-a-block", "over-16MiB-packets"])
def test_big_events_are_read_whole(mariadb: MariaDB, fresh_db: str, tmp_path: Path, size: int) -> None:
    """An event longer than a block is read in one piece; one of 16 MiB or more spans several packets."""
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.big (id INT PRIMARY KEY, v LONGBLOB)")
    mariadb.execute("SET GLOBAL max_allowed_packet = 64 * 1024 * 1024")
    start = Position(*mariadb.binlog_position())
    value = bytes(range(256)) * (size // 256)
    with mariadb.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{fresh_db}`.big VALUES (1, %s), (2, 'small')", (value,))
    end = Position(*mariadb.binlog_position())
    events, _ = _read(mariadb, tmp_path, start, end)
    rows = [row for f in events if f[0] == "rows" for row in f[14]]
    assert [(row["values"]["id"], row["values"]["v"]) for row in rows] == [(1, value), (2, b"small")]
