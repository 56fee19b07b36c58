"""`cdc resnapshot` against a server whose watermark table the cdc user cannot write: locked chunk reads.

A real MariaDB with `read_only=1` for the (non-SUPER) cdc user, or without a write grant on the watermark
table; tail follows it; an admin user writes meanwhile (updates, deletes, key changes of the keys being read,
rollbacks); the change log replayed equals SELECT * row for row.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cdc.checkpoints import ResnapshotCheckpoint
from cdc.config import Settings, load_settings
from cdc.snapshot import ResnapshotRequest, run_resnapshot
from cdc.state import StateDir
from tests.capture.conftest import ROOT, binlog_start, changelog_lines, env_for
from tests.rig import MariaDB
from tests.snapshot.resnapshot_rig import MARKS, Workload, create_marks_table, kill_tail_until_done, replay, source, tail_running

ROWS = 200
LOCKED_GRANTS = ("SELECT", "LOCK TABLES", "BINLOG MONITOR")  # what a locked re-snapshot needs (docs/guide.md)


def _source_table(server: MariaDB, rows: int = ROWS) -> None:
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40), n INT NOT NULL)")
    server.execute(f"INSERT INTO shop.t SELECT seq, CONCAT('v', seq), 0 FROM shop.seq_1_to_{rows}")
    with server.connect() as conn, conn.cursor() as cur:  # changes tail never sees: the re-snapshot repairs them
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("UPDATE shop.t SET v = 'silent' WHERE id % 7 = 0")
        cur.execute("DELETE FROM shop.t WHERE id % 11 = 0")
        cur.execute("INSERT INTO shop.t VALUES (100000, 'silent insert', 1)")


def _read_only_user(server: MariaDB, tmp_path: Path, state: Path, how: str) -> Settings:
    """The cdc user's settings: read_only=1 (it may INSERT, UPDATE, but is not SUPER), or no write grant at all."""
    if how == "read_only":
        server.create_user("cdc_ro", "pw", (*LOCKED_GRANTS, "INSERT", "UPDATE"))
        server.execute("SET GLOBAL read_only = 1")  # root (SUPER) keeps writing: the admin workload
    else:
        server.create_user("cdc_ro", "pw", LOCKED_GRANTS)
    return load_settings({"mysql.host": server.host, "mysql.port": server.port, "mysql.user": "cdc_ro",
                          "mysql.databases": ("shop",), "mysql.watermark_table": f"{MARKS}.watermarks",
                          "state_dir": str(state)}, env={"HOME": str(tmp_path), "CDC_MYSQL_PASSWORD": "pw"},
                         cwd=tmp_path)


@pytest.mark.parametrize("how", ["read_only", "no_write_grant"])
def test_locked_reads_under_concurrent_writes_end_equal(mariadb_factory: Any, tmp_path: Path, how: str) -> None:
    server = mariadb_factory()
    create_marks_table(server)
    start = binlog_start(server)
    _source_table(server)
    state = tmp_path / "state"
    settings = _read_only_user(server, tmp_path, state, how)
    with tail_running(server, state, "shop", start):
        assert replay(state, "shop", "t") != source(server, "shop", "t")  # tail cannot know the silent changes
        # Two writers, throttled: each chunk waits for tail to pass it, and tail must keep up on a loaded machine.
        with (Workload(server, "shop", "t", ROWS, seed=7, pause=0.002) as workload,
              Workload(server, "shop", "t", ROWS, seed=8, pause=0.002)):
            while workload.writes < 50:
                time.sleep(0.01)
            summary = run_resnapshot(settings, ResnapshotRequest(("shop.t",), chunk_size=10, wait_timeout=120))
            time.sleep(0.2)
    assert summary.mode == "locked"
    assert workload.writes > 100
    assert replay(state, "shop", "t") == source(server, "shop", "t")
    reads = [line for line in changelog_lines(state) if line["op"] == "r"]
    assert reads and all(line["position"].split(":")[2].startswith("b") for line in reads)
    assert not [line for line in changelog_lines(state) if line.get("db") == MARKS]
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "changelog.schema.json").read_text()))
    for line in changelog_lines(state):  # the published schema describes the lines written between transactions
        validator.validate(line)
    checkpoint = ResnapshotCheckpoint.read(StateDir(state))
    assert checkpoint is not None and checkpoint.status == "done"
    assert not (state / "resnapshot" / checkpoint.run).exists()  # every step's files go once tail is past them
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {MARKS}.watermarks")
        assert cur.fetchone() == (0,)  # nothing was written to the server


# Minutes on a slow 2-core machine (292 s on the one of 2026-12-01): with the fault campaign (-m slow); CI keeps
# test_resnapshot.py's kill test inside watermark windows.
@pytest.mark.slow
def test_tail_killed_9_again_and_again_during_locked_reads_ends_equal(mariadb_factory: Any, tmp_path: Path) -> None:
    """tail.json stays before an open locked window and `.at` fixes where a chunk goes: restarts emit nothing twice."""
    server = mariadb_factory()
    create_marks_table(server)
    start = binlog_start(server)
    _source_table(server, rows=400)
    state = tmp_path / "state"
    with tail_running(server, state, "shop", start):
        pass
    settings = _read_only_user(server, tmp_path, state, "read_only")
    box: dict[str, object] = {}

    def resnapshot() -> None:
        try:
            box["summary"] = run_resnapshot(settings, ResnapshotRequest(("shop.t",), chunk_size=10, wait_timeout=120))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    with Workload(server, "shop", "t", 400, seed=4, pause=0.005):
        reader = threading.Thread(target=resnapshot, daemon=True)
        reader.start()
        kills = kill_tail_until_done(server, state, "shop", reader, os.getpid())
    assert "error" not in box, box.get("error")
    assert kills >= 2
    with tail_running(server, state, "shop", None):
        pass
    assert replay(state, "shop", "t") == source(server, "shop", "t")
