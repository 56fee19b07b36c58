"""The adapter around python-mysql-replication (cdc/source/binlog.py): each library behaviour it owns, tested.

- MariaDB: it reads from exactly the position given, in a later file, not from the first binlog
  (`is_mariadb=True`) nor from the start of the file (`resume_stream=False`);
- a rows event whose table map was not read stops with its coordinates (the library drops it silently);
- the library's own silent reconnect (mid-transaction) is refused: the caller restarts at its last commit;
- an idle server keeps talking (heartbeats well inside the read timeout), so blocking never hangs.
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

import cdc.source.binlog as binlog
from cdc.errors import DataError, PreconditionError, TransientError
from cdc.source.binlog import BinlogReader, Event, Position, ReaderOptions
from tests.capture.conftest import settings_for
from tests.rig import MariaDB


def _reader(mariadb: MariaDB, tmp_path: Path, start: Position, server_id: int, **options: float) -> BinlogReader:
    settings = settings_for(mariadb, tmp_path, **{"mysql.server_id": server_id})
    return BinlogReader(settings.mysql, start, ReaderOptions(**options))


def _first_rows(events: Iterator[Event]) -> Event:
    for event in events:
        if event.kind == "rows":
            return event
    raise AssertionError("the stream ended without a rows event")


def test_stream_arguments_are_the_ones_that_read_mariadb_correctly(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    class Recorder:
        def __init__(self, **kwargs: Any) -> None:
            seen.update(kwargs)

        def fetchone(self) -> None:
            return None

        def close(self) -> None:
            pass

    monkeypatch.setattr(binlog, "BinLogStreamReader", Recorder)
    settings = settings_for(MariaDBStub(), tmp_path, **{"mysql.server_id": 9})  # type: ignore[arg-type]
    reader = BinlogReader(settings.mysql, Position("mariadb-bin.000007", 1234), ReaderOptions(heartbeat=1, read_timeout=4))
    with pytest.raises(TransientError, match="ended the binlog stream"):
        next(reader.events())
    assert (seen["is_mariadb"], seen["resume_stream"], seen["blocking"]) == (False, True, True)
    assert (seen["log_file"], seen["log_pos"], seen["server_id"]) == ("mariadb-bin.000007", 1234, 9)
    assert seen["connection_settings"]["read_timeout"] == 4 and seen["slave_heartbeat"] == 1
    assert seen["enable_logging"] is False and seen["filter_non_implemented_events"] is False


class MariaDBStub:
    """Just enough of a rig server for settings_for (no connection is made)."""

    host, port = "127.0.0.1", 3306


def test_reads_from_the_exact_position_in_a_later_file(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2)")
    file, pos = mariadb.binlog_position()
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (3)")
    reader = _reader(mariadb, tmp_path, Position(file, pos), 777101)
    try:
        rows = _first_rows(reader.events())
    finally:
        reader.close()
    assert (rows.file, rows.db, rows.table) == (file, fresh_db, "t")
    assert rows.pos > pos
    assert [r["values"]["id"] for r in rows.raw.rows] == [3]


def test_events_are_freed_without_the_garbage_collector(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    # The library's packet and event refer to each other; if that cycle stayed, every event of a long
    # transaction (its packet and row bytes) would live until a collection, and tail's memory would grow.
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    file, pos = mariadb.binlog_position()
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    reader = _reader(mariadb, tmp_path, Position(file, pos), 777105)
    gc.disable()
    try:
        events = reader.events()
        rows = _first_rows(events)
        packet = weakref.ref(rows.raw.packet)
        raw = weakref.ref(rows.raw)
        del rows
        next(events)  # the reader's loop holds the event it yielded last
        assert raw() is None and packet() is None
    finally:
        gc.enable()
        reader.close()


def test_rows_event_without_its_table_map_stops_with_coordinates(mariadb: MariaDB, fresh_db: str,
                                                                 tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    file, _ = mariadb.binlog_position()
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1), (2)")
    events = mariadb.execute(f"SHOW BINLOG EVENTS IN '{file}'")
    rows_pos = [int(e[1]) for e in events if str(e[2]).startswith("Write_rows")][-1]
    reader = _reader(mariadb, tmp_path, Position(file, rows_pos), 777102)
    try:
        with pytest.raises(DataError) as caught:
            _first_rows(reader.events())
    finally:
        reader.close()
    assert f"rows event at {file}:{rows_pos} refers to table id" in caught.value.message
    assert "whose table map was not read" in caught.value.message


def test_a_killed_connection_is_reported_not_silently_resumed(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    file, pos = mariadb.binlog_position()
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    reader = _reader(mariadb, tmp_path, Position(file, pos), 777103, heartbeat=0.5, read_timeout=5)
    events = reader.events()
    try:
        next(events)
        for row in mariadb.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'"):
            mariadb.execute(f"KILL CONNECTION {int(row[0])}")
        with pytest.raises(TransientError, match="lost the binlog connection"):
            deadline = time.monotonic() + 20
            for _ in events:  # what was already buffered, then the error: never a second stream connection
                assert time.monotonic() < deadline
    finally:
        reader.close()


def test_idle_server_sends_heartbeats_inside_the_read_timeout(mariadb: MariaDB, tmp_path: Path) -> None:
    file, pos = mariadb.binlog_position()
    reader = _reader(mariadb, tmp_path, Position(file, pos), 777104, heartbeat=0.5, read_timeout=2)
    began, heartbeats = time.monotonic(), 0
    try:
        for event in reader.events():
            heartbeats += event.kind == "heartbeat"
            if time.monotonic() - began > 4:
                break
    finally:
        reader.close()
    assert heartbeats >= 4  # ~ every 0.5 s for 4 s; a TransientError (read timeout) would have ended the loop


class _Cursor:
    def __init__(self, answers: dict[str, tuple[Any, ...] | None], asked: list[str]) -> None:
        self.answers, self.asked, self.row = answers, asked, None

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *_: Any) -> None:
        pass

    def execute(self, sql: str) -> None:
        self.asked.append(sql)
        if sql not in self.answers:
            raise pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax")
        self.row = self.answers[sql]

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.row


class _Conn:
    def __init__(self, answers: dict[str, tuple[Any, ...] | None]) -> None:
        self.answers, self.asked = answers, []  # type: ignore[var-annotated]

    def cursor(self) -> _Cursor:
        return _Cursor(self.answers, self.asked)


@pytest.mark.parametrize(("answers", "asked"), [
    ({"SHOW BINARY LOG STATUS": ("binlog.000009", 157)}, ["SHOW BINARY LOG STATUS"]),  # MySQL 8.2+ / 8.4
    ({"SHOW MASTER STATUS": ("binlog.000009", 157)}, ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"]),  # older
], ids=["mysql-8.4", "mysql-8.0-or-mariadb"])
def test_current_position_uses_the_statement_the_server_has(answers: dict[str, Any], asked: list[str]) -> None:
    conn = _Conn(answers)
    assert binlog.current_position(conn) == Position("binlog.000009", 157)  # type: ignore[arg-type]
    assert conn.asked == asked


def test_current_position_with_binlog_off_is_a_precondition_error() -> None:
    """The server is not ready (exit 4), as snapshot and check-binlog say for the same server; not a position problem."""
    with pytest.raises(PreconditionError, match="binary logging is off"):
        binlog.current_position(_Conn({"SHOW BINARY LOG STATUS": None}))  # type: ignore[arg-type]


@pytest.mark.parametrize(("option", "value", "fix"), [
    ("binlog-format", "MIXED", "SET GLOBAL binlog_format = 'ROW'"),
    ("binlog-format", "STATEMENT", "SET GLOBAL binlog_format = 'ROW'"),
    ("binlog-row-image", "MINIMAL", "SET GLOBAL binlog_row_image = 'FULL'"),
    ("binlog-row-image", "NOBLOB", "SET GLOBAL binlog_row_image = 'FULL'"),
])
def test_tail_and_snapshot_refuse_a_server_whose_row_events_miss_changes(option: str, value: str, fix: str,
                                                                         mariadb_factory: Any, tmp_path: Path) -> None:
    """MariaDB's default binlog_format is MIXED: its INSERTs reach the binlog as SQL text, which tail would pass over
    as if nothing changed ("caught up", 0 rows). A binlog_row_image other than FULL leaves out of an UPDATE's after
    image the columns it did not set, which tail took for NULL (a corrupt lake, then a stuck apply). Not ready
    (exit 4), before anything is written; so is a snapshot."""
    from tests.capture.conftest import binlog_start, tail_once

    server = mariadb_factory({option: value})
    server.execute("CREATE DATABASE m")
    server.execute("CREATE TABLE m.t (id INT PRIMARY KEY, a INT, c TEXT)")
    start = binlog_start(server)
    server.execute("INSERT INTO m.t VALUES (1, 1, 'x')")
    refusal = f"{option.replace('-', '_')}={value}"
    with pytest.raises(PreconditionError, match=refusal) as raised:
        tail_once(server, tmp_path / "state", "m", start)
    assert fix in (raised.value.hint or "")
    assert not (tmp_path / "state" / "tail.json").exists()
    # A snapshot, which would hand over to that tail, is refused before it copies a row.
    from cdc.snapshot import SnapshotRequest, run_snapshot

    with pytest.raises(PreconditionError, match=refusal):
        run_snapshot(settings_for(server, tmp_path / "snap", **{"mysql.databases": ["m"]}), SnapshotRequest())
    assert not list((tmp_path / "snap").glob("changelog/*")) and not (tmp_path / "snap" / "snapshot.json").exists()


@pytest.mark.parametrize(("sql", "tables", "not_names"), [
    ("INSERT INTO t (a) VALUES ('x.y', \"`q`\")", [("d", "t")], [("d", "x"), ("x", "y"), ("d", "q")]),  # literals
    ("/* app */ UPDATE `o``dd`.`t 1` SET c = 1 WHERE id = 2", [("o`dd", "t 1")], [("d", "app")]),  # comments
    ("delete low_priority from x.t where k = 'a'", [("x", "t")], [("d", "a")]),
    ("DELETE a, b FROM a JOIN s.b ON a.id = b.id", [("d", "a"), ("d", "b"), ("s", "b")], []),  # multi-table
    ("REPLACE INTO t SELECT * FROM u", [("d", "t")], [("d", "u")]),  # u is only read
    ("INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = (SELECT MAX(a) FROM u)", [("d", "t")], [("d", "u")]),
    # pt-table-checksum's chunk: the checked table is read, only its checksums table is written
    ("REPLACE INTO `percona`.`checksums` (db, tbl, cnt) SELECT 'x', 't', COUNT(*) FROM `x`.`t` FORCE INDEX(`PRIMARY`)"
     " WHERE id > 5", [("percona", "checksums")], [("x", "t"), ("d", "t")]),
    ("UPDATE a JOIN s.b ON a.id = b.id SET a.n = (SELECT 1 FROM u)", [("d", "a"), ("s", "b")], [("d", "u")]),
    ("DELETE FROM t1, t2 USING t1 JOIN t2 WHERE t1.k IN (SELECT k FROM u)", [("d", "t1"), ("d", "t2")], [("d", "u")]),
    ("LOAD DATA INFILE '/tmp/f' INTO TABLE t", [("d", "t")], [("d", "/tmp/f")]),
    ("LOAD DATA LOCAL INFILE 'f' REPLACE INTO TABLE x.t FIELDS TERMINATED BY ','", [("x", "t")], [("d", "f")]),
])
def test_statement_tables_names_every_table_a_dml_statement_may_change(
        sql: str, tables: list[tuple[str, str]], not_names: list[tuple[str, str]]) -> None:
    from cdc.capture.statements import statement_tables

    found = statement_tables(sql, "d")
    assert found is not None and len(found) == len(set(found))
    assert set(tables) <= set(found) and not set(not_names) & set(found), found


def test_called_names_are_the_names_called_like_functions() -> None:
    from cdc.capture.statements import called_names

    found = called_names("INSERT INTO t VALUES (f(1), `x`.g (2), 'h(3)', COUNT(*)) -- k(4)", "d")
    assert ("d", "f") in found and ("x", "g") in found and ("d", "COUNT") in found
    assert ("d", "h") not in found and ("d", "k") not in found and ("d", "g") not in found


@pytest.mark.parametrize("sql", ["ALTER TABLE t ADD c INT", "BEGIN", "SAVEPOINT s", "SELECT * FROM t", "COMMIT"])
def test_statement_tables_of_a_statement_that_is_no_row_change_is_none(sql: str) -> None:
    from cdc.capture.statements import statement_tables

    assert statement_tables(sql, "d") is None
