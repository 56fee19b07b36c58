"""tail leaves MariaDB's sequences out: their NEXTVAL, SETVAL and ALTER SEQUENCE are rows events of a one-row
table in the binlog, a generator's state rather than data, recognised by the table map's column names. The
pipeline's end-to-end case is tests/pipeline/test_sequences.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.capture.conftest import binlog_start, changelog_lines, tail_once


def test_sequence_rows_events_write_no_line(mariadb_factory: Any, tmp_path: Path) -> None:
    server = mariadb_factory()
    db = server.create_database("seq")
    start = binlog_start(server)
    for statement in ("CREATE SEQUENCE ids CACHE 1",
                      "CREATE TABLE t (id BIGINT PRIMARY KEY DEFAULT (NEXT VALUE FOR ids), note VARCHAR(9))",
                      "INSERT INTO t (note) VALUES ('a'), ('b')", "SELECT SETVAL(ids, 50)",
                      "ALTER SEQUENCE ids RESTART WITH 70", "INSERT INTO t (note) VALUES ('c')"):
        server.execute(statement, database=db)
    tail_once(server, tmp_path / "state", db, start)
    changes = [(line["table"], line["op"], line.get("after", {}).get("id")) for line in changelog_lines(tmp_path / "state")
               if line.get("op") in ("c", "u", "d")]
    assert changes == [("t", "c", 1), ("t", "c", 2), ("t", "c", 70)], changes
