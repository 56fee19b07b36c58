"""The snapshot's hand-over GTID on MariaDB: read without the binlog on a quiet server, exact under writes.

BINLOG_GTID_POS reads the binlog file from its start to the position (up to max_binlog_size per
snapshot); cdc.snapshot.handover reads the server's GTID position instead when the binlog still ends
at the snapshot's position. Both are checked against BINLOG_GTID_POS itself, run afterwards. The tests
write in three GTID domains and turn the general log on: they have a server of their own, so that the
session server's binlog keeps the one domain the other tests expect.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pymysql
import pytest

from cdc.gtid import GtidSet
from cdc.snapshot.handover import take_handover
from cdc.source.server import describe_server
from tests.rig import MariaDB
from tests.snapshot.support import make_settings


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDB]:
    own = MariaDB()
    try:
        yield own.start()
    finally:
        own.cleanup()


@pytest.fixture
def db(server: MariaDB) -> str:
    return server.create_database("handover")


@contextmanager
def general_log(server: MariaDB) -> Iterator[None]:
    """The session server's general log into mysql.general_log while the block runs."""
    logging, output = server.execute("SELECT @@GLOBAL.general_log, @@GLOBAL.log_output")[0]
    server.execute("SET GLOBAL log_output = 'TABLE'")
    server.execute("SET GLOBAL general_log = 1")
    try:
        yield
    finally:
        server.execute("SET GLOBAL general_log = 0")
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")  # the binlog the tests read stays as it was
            cur.execute("TRUNCATE TABLE mysql.general_log")
        server.execute("SET GLOBAL log_output = %s", (output,))
        server.execute(f"SET GLOBAL general_log = {int(logging)}")


def statements_of(server: MariaDB, thread_id: int) -> list[str]:
    rows = server.execute("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log "
                          "WHERE thread_id = %s AND command_type = 'Query'", (thread_id,))
    return [r[0] for r in rows]


def handover_of(server: MariaDB, state: Path) -> tuple[str, int, str | None, int]:
    """One snapshot transaction's hand-over (file, pos, gtid) and the thread id of the connection it ran on."""
    settings = make_settings(server, state)
    with server.connect() as reader:
        info = describe_server(reader)
        handover = take_handover(settings.mysql, reader, info, [], "mariadb").handover
        reader.rollback()
        return handover.file, handover.pos, handover.gtid, reader.thread_id()


def gtid_at(server: MariaDB, file: str, pos: int) -> GtidSet:
    return GtidSet.parse(server.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))[0][0] or "")


def write_in_domains(server: MariaDB, db: str) -> None:
    """Transactions in three GTID domains, one of them from another server id."""
    with server.connect(database=db) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO t VALUES (1)")
        cur.execute("SET SESSION gtid_domain_id = 7")
        cur.execute("SET SESSION server_id = 4242")
        cur.execute("INSERT INTO t VALUES (2)")
        cur.execute("SET SESSION gtid_domain_id = 3")
        cur.execute("INSERT INTO t VALUES (3)")
        conn.commit()


def test_quiet_server_hand_over_reads_no_binlog(server: MariaDB, db: str, tmp_path: Path) -> None:
    write_in_domains(server, db)
    with general_log(server):
        file, pos, gtid, thread = handover_of(server, tmp_path / "state")
        ran = statements_of(server, thread)
    assert (file, pos) == server.binlog_position()
    assert gtid is not None and GtidSet.parse(gtid) == gtid_at(server, file, pos)
    assert {"3", "7"} <= {part.split("-")[0] for part in gtid.split(",")}
    assert ran and not [s for s in ran if "BINLOG_GTID_POS" in s.upper()], ran


def test_hand_over_under_writes_is_the_binlog_s(server: MariaDB, db: str, tmp_path: Path) -> None:
    """With commits racing the hand-over, its GTID is BINLOG_GTID_POS at its position every time; the hand-overs
    that found the binlog moved on read it (at least one of the 40 here)."""
    write_in_domains(server, db)
    stop, errors = threading.Event(), []

    def commit_forever() -> None:
        try:
            with server.connect(database=db) as conn, conn.cursor() as cur:
                n = 100
                while not stop.is_set():
                    cur.execute("INSERT INTO t VALUES (%s)", (n,))
                    conn.commit()
                    n += 1
        except pymysql.err.MySQLError as exc:  # handed to the test thread
            errors.append(exc)

    writer = threading.Thread(target=commit_forever, daemon=True)
    results, read_binlog = [], 0
    with general_log(server):
        writer.start()
        try:
            for i in range(40):
                file, pos, gtid, thread = handover_of(server, tmp_path / f"state{i}")
                results.append((file, pos, gtid))
                read_binlog += any("BINLOG_GTID_POS" in s.upper() for s in statements_of(server, thread))
        finally:
            stop.set()
            writer.join(timeout=30)
    assert not errors, errors
    for file, pos, gtid in results:
        assert GtidSet.parse(gtid or "") == gtid_at(server, file, pos), (file, pos, gtid)
    assert read_binlog > 0


def test_a_user_without_binlog_monitor_gets_the_binlog_s_gtid(server: MariaDB, db: str, tmp_path: Path) -> None:
    """SHOW MASTER STATUS is refused to a user with SELECT only: the hand-over reads BINLOG_GTID_POS instead."""
    write_in_domains(server, db)
    user = server.create_user("cdc_select_only", "select-only-pw", ("SELECT",))
    with server.connect(user.name, user.password) as reader:
        with reader.cursor() as cursor, pytest.raises(pymysql.err.OperationalError):
            cursor.execute("SHOW MASTER STATUS")
        handover = take_handover(make_settings(server, tmp_path / "state").mysql, reader, describe_server(reader),
                                 [], "mariadb").handover
        reader.rollback()
    assert handover.gtid is not None
    assert GtidSet.parse(handover.gtid) == gtid_at(server, handover.file, handover.pos)
