"""Snapshot under concurrent writes and after kill -9: consistent, resumable, and exact once tail has run."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from typer.testing import CliRunner

from cdc.snapshot.run import SnapshotRequest, run_snapshot
from cdc.state import read_json
from tests.capture import workload
from tests.rig import MariaDB
from tests.snapshot.support import ARGV, app, changelog_lines, make_settings, mysql_args, state, subprocess_env  # noqa: F401

ACCOUNTS, BALANCE = 200, 1000


@contextmanager
def writing(work: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run `work` in a thread until the block ends; re-raise what it raised."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work(stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors


def transfers(mariadb: MariaDB, db: str, accounts: int = ACCOUNTS, strides: tuple[int, int] = (7, 13)
              ) -> Callable[[threading.Event], None]:
    """Move money between two accounts per transaction (ids stepping by `strides`): the total never changes."""

    def work(stop: threading.Event) -> None:
        with mariadb.connect(database=db) as conn, conn.cursor() as cur:
            n = 0
            while not stop.is_set():
                a, b = (n * strides[0]) % accounts + 1, (n * strides[1] + 5) % accounts + 1
                cur.execute("BEGIN")
                cur.execute("UPDATE acct SET balance = balance - 3 WHERE id = %s", (a,))
                cur.execute("UPDATE acct SET balance = balance + 3 WHERE id = %s", (b,))
                cur.execute("COMMIT")
                n += 1

    return work


def test_snapshot_is_consistent_under_concurrent_transfers(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    mariadb.execute("CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)", database=fresh_db)
    mariadb.execute(f"INSERT INTO acct SELECT seq, {BALANCE} FROM seq_1_to_{ACCOUNTS}", database=fresh_db)
    with writing(transfers(mariadb, fresh_db)):
        time.sleep(0.1)
        summary = run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest(chunk_size=3))
        assert mariadb.binlog_position() > (summary.checkpoint.handover.file, summary.checkpoint.handover.pos)
    lines = changelog_lines(state)
    # Chunks were read over time while transfers committed: only one consistent view keeps the total.
    assert len(lines) == ACCOUNTS
    assert sum(line["after"]["balance"] for line in lines) == ACCOUNTS * BALANCE


def _workload(mariadb: MariaDB, db: str) -> Callable[[threading.Event], None]:
    def work(stop: threading.Event) -> None:
        with mariadb.connect() as conn:
            seed = 100
            while not stop.is_set():
                workload.run_workload(conn, db, seed=seed, transactions=5, first_key=seed * 1000)
                seed += 1
                stop.wait(0.02)  # steady, modest write load: tail's catch-up stays short

    return work


def tail_until_now(mariadb: MariaDB, state: Path) -> None:
    result = CliRunner().invoke(app, ["tail", "--until-now", *mysql_args(mariadb), "--state-dir", str(state)])
    assert result.exit_code == 0, result.output


def test_snapshot_during_writes_then_tail_equals_source(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
        workload.run_workload(conn, fresh_db, seed=3, transactions=80)
    with writing(_workload(mariadb, fresh_db)):
        time.sleep(0.2)
        run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest(chunk_size=4))
        time.sleep(0.2)
    tail_until_now(mariadb, state)
    with mariadb.connect() as conn:
        expected = workload.expected_rows(conn, fresh_db, workload.TABLE)
    assert workload.replay(changelog_lines(state), fresh_db, workload.TABLE) == expected


def _kill_mid_snapshot(mariadb: MariaDB, db: str, state: Path, at_rows: int) -> None:
    argv = [*ARGV, "snapshot", *mysql_args(mariadb), "--state-dir", str(state), "--databases", db,
            "--chunk-size", "5", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=state.parent,
                            env=subprocess_env(state.parent))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            document = read_json(state / "snapshot.json") if (state / "snapshot.json").exists() else None
            if document and document["row_counter"] >= at_rows:
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"snapshot ended before the kill: {proc.stderr.read() if proc.stderr else ''}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    document = read_json(state / "snapshot.json")
    assert document is not None and document["status"] == "running"


def test_kill_9_mid_snapshot_then_rerun_equals_source(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", database=fresh_db)
    mariadb.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_3000", database=fresh_db)

    _kill_mid_snapshot(mariadb, fresh_db, state, at_rows=500)
    rerun = subprocess.run([*ARGV, "snapshot", *mysql_args(mariadb), "--state-dir", str(state), "--json"],
                           capture_output=True, text=True, cwd=state.parent, timeout=120,
                           env=subprocess_env(state.parent))

    assert rerun.returncode == 0, rerun.stderr
    lines = changelog_lines(state)
    assert [line["after"] for line in lines] == [{"id": i, "v": f"v{i}"} for i in range(1, 3001)]
    assert [line["src"]["row"] for line in lines] == list(range(3000))  # deterministic numbering kept
    assert not list((state / "changelog").glob(".seg-*"))  # the killed run's temp file is gone


def test_kill_9_during_writes_rerun_then_tail_equals_source(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
        workload.run_workload(conn, fresh_db, seed=5, transactions=150)
    with writing(_workload(mariadb, fresh_db)):
        _kill_mid_snapshot(mariadb, fresh_db, state, at_rows=40)
        time.sleep(0.2)  # changes between the hand-over and the resumed snapshot
        rerun = subprocess.run([*ARGV, "snapshot", *mysql_args(mariadb), "--state-dir", str(state)],
                               capture_output=True, text=True, cwd=state.parent, timeout=120,
                           env=subprocess_env(state.parent))
        assert rerun.returncode == 0, rerun.stderr
    tail_until_now(mariadb, state)
    with mariadb.connect() as conn:
        expected = workload.expected_rows(conn, fresh_db, workload.TABLE)
    assert workload.replay(changelog_lines(state), fresh_db, workload.TABLE) == expected
