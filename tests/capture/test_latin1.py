"""MySQL's latin1 is cp1252 with its five unassigned bytes kept as C1 controls: every byte is a character."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.snapshot.run import SnapshotRequest, run_snapshot
from tests.capture.conftest import binlog_start, changelog_lines, tail_once
from tests.rig import MariaDB
from tests.snapshot.support import make_settings

# 0x81 0x8D 0x8F 0x90 0x9D: no character in Python's cp1252; 0x80 is the euro sign in both.
EVERY_ODD_BYTE = "UNHEX('818D8F909D80E9')"
EXPECTED = "\u0081\u008d\u008f\u0090\u009d€é"


@pytest.mark.parametrize("workers", [0, 1])
def test_tail_and_snapshot_read_every_latin1_byte_as_mysql_does(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                                 workers: int) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, s VARCHAR(20) CHARACTER SET latin1)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1, {EVERY_ODD_BYTE})")
    # The server's own reading of the bytes (converted to utf8mb4 for the client) is the oracle.
    assert mariadb.execute(f"SELECT s FROM `{fresh_db}`.t")[0][0] == EXPECTED

    tail_once(mariadb, tmp_path / "tail", fresh_db, start, decode_workers=workers)
    run_snapshot(make_settings(mariadb, tmp_path / "snap", tables=(f"{fresh_db}.t",)), SnapshotRequest())

    rows = [line["after"] for line in changelog_lines(tmp_path / "tail") if line["op"] == "c"]
    assert rows == [{"id": 1, "s": EXPECTED}]
    assert [line["after"] for line in changelog_lines(tmp_path / "snap")] == rows
