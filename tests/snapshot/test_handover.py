"""The snapshot's hand-over GTID on MariaDB: read without the binlog on a quiet server, exact under writes.

BINLOG_GTID_POS reads the binlog file from its start to the position (up to max_binlog_size per
snapshot); cdc.snapshot.handover reads the server's GTID position instead when the binlog still ends
at the snapshot's position. Both are checked against BINLOG_GTID_POS itself, run afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pymysql

from cdc.gtid import GtidSet
from cdc.snapshot.handover import take_handover
from cdc.source.server import describe_server
from tests.rig import MariaDB
from tests.snapshot.support import make_settings


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


def test_quiet_server_hand_over_reads_no_binlog(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    write_in_domains(mariadb, fresh_db)
    with general_log(mariadb):
        file, pos, gtid, thread = handover_of(mariadb, tmp_path / "state")
        ran = statements_of(mariadb, thread)
    assert (file, pos) == mariadb.binlog_position()
    assert gtid is not None and GtidSet.parse(gtid) == gtid_at(mariadb, file, pos)
    assert {"3", "7"} <= {part.split("-")[0] for part in gtid.split(",")}
    assert ran and not [s for s in ran if "BINLOG_GTID_POS" in s.upper()], ran


def test_hand_over_under_writes_is_the_binlog_s(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    """With commits racing the hand-over, its GTID is BINLOG_GTID_POS at its position every time; the hand-overs
    that found the binlog moved on read it (at least one of the 40 here)."""
    write_in_domains(mariadb, fresh_db)
    stop, errors = threading.Event(), []

    def commit_forever() -> None:
        try:
            with mariadb.connect(database=fresh_db) as conn, conn.cursor() as cur:
                n = 100
                while not stop.is_set():
                    cur.execute("INSERT INTO t VALUES (%s)", (n,))
                    conn.commit()
                    n += 1
        except pymysql.err.MySQLError as exc:  # handed to the test thread
            errors.append(exc)

    writer = threading.Thread(target=commit_forever, daemon=True)
    results, read_binlog = [], 0
    with general_log(mariadb):
        writer.start()
        try:
            for i in range(40):
                file, pos, gtid, thread = handover_of(mariadb, tmp_path / f"state{i}")
                results.append((file, pos, gtid))
                read_binlog += any("BINLOG_GTID_POS" in s.upper() for s in statements_of(mariadb, thread))
        finally:
            stop.set()
            writer.join(timeout=30)
    assert not errors, errors
    for file, pos, gtid in results:
        assert GtidSet.parse(gtid or "") == gtid_at(mariadb, file, pos), (file, pos, gtid)
    assert read_binlog > 0
