"""kill -9 of `cdc tail --follow` at random moments, and KILL of its replication connection, change nothing."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from pathlib import Path

from tests.capture.conftest import binlog_start, changelog_bytes, changelog_lines, spawn_tail, tail_once
from tests.capture.workload import TABLE, create_all_types_table, expected_rows, replay, run_workload
from tests.rig import MariaDB

KILLS = 22


def _workload(mariadb: MariaDB, db: str, tick: threading.Semaphore, done: threading.Event,
              errors: list[BaseException]) -> None:
    """Transactions of every kind, including 2,000-row INSERT ... SELECT statements (dozens of row events).

    One round per tail run (the test releases `tick` after each kill): every kill lands while changes are
    arriving, and the amount of data does not grow with the machine's load.
    """
    try:
        with mariadb.connect() as conn, conn.cursor() as cur:
            for round_ in range(KILLS):
                run_workload(conn, db, seed=round_, transactions=10, first_key=round_ * 1000 + 1)
                if round_ % 4 == 0:
                    cur.execute(f"INSERT INTO `{db}`.big (id, pad) SELECT seq + %s, REPEAT('x', 200) "
                                f"FROM `{db}`.seq_1_to_2000", (round_ * 10_000,))
                    cur.execute(f"DELETE FROM `{db}`.big WHERE id %% 7 = %s", (round_ % 7,))
                tick.acquire(timeout=120)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
    finally:
        done.set()


def _wait_started(proc: subprocess.Popen[bytes], state: Path) -> None:
    """Until the tail process holds its lock: a kill before that (python still importing) would test nothing."""
    lock = state / "locks" / "tail.lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip() == f"pid {proc.pid}"):
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "tail did not start within 60 s"
        time.sleep(0.02)


def _kill_replication_connection(mariadb: MariaDB) -> None:
    for row in mariadb.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'"):
        try:
            mariadb.execute(f"KILL CONNECTION {int(row[0])}")
        except Exception:  # noqa: BLE001 - the connection may be gone already
            pass


def test_kill_9_and_killed_connections_leave_the_change_log_identical(
    mariadb: MariaDB, fresh_db: str, tmp_path: Path
) -> None:
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        create_all_types_table(conn, fresh_db)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.big (id INT PRIMARY KEY, pad VARCHAR(255))")
    tick, done, errors = threading.Semaphore(0), threading.Event(), []
    writer = threading.Thread(target=_workload, args=(mariadb, fresh_db, tick, done, errors), daemon=True)
    writer.start()
    state = tmp_path / "killed"
    rng = random.Random(5)
    kills = connection_kills = 0
    checkpoints = set()
    while kills < KILLS or not done.is_set():
        first = [] if (state / "tail.json").exists() else ["--start-position", start]
        proc = spawn_tail(mariadb, state, "--follow", "--databases", fresh_db, "--flush-interval", "0.2",
                          "--read-timeout", "4", *first)
        _wait_started(proc, state)
        time.sleep(rng.uniform(0.2, 1.4))
        if rng.random() < 0.25:
            _kill_replication_connection(mariadb)
            connection_kills += 1
            time.sleep(rng.uniform(0.1, 0.5))
        assert proc.poll() is None, proc.communicate()[1].decode()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        if (state / "tail.json").exists():
            checkpoints.add((state / "tail.json").read_text())
        tick.release()
    writer.join()
    assert not errors
    # The kills interrupted a tail that was making progress, not one that was still starting up.
    assert len(checkpoints) >= KILLS // 2, checkpoints

    tail_once(mariadb, state, fresh_db)  # resume from the checkpoint and catch up
    tail_once(mariadb, tmp_path / "clean", fresh_db, start)

    assert kills >= 20 and connection_kills >= 1
    assert changelog_bytes(state) == changelog_bytes(tmp_path / "clean")
    lines = changelog_lines(state)
    with mariadb.connect() as conn:
        assert replay(lines, fresh_db, TABLE) == expected_rows(conn, fresh_db, TABLE)
        assert replay(lines, fresh_db, "big") == expected_rows(conn, fresh_db, "big")


def test_sigterm_seals_and_checkpoints(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    proc = spawn_tail(mariadb, tmp_path, "--follow", "--databases", fresh_db, "--start-position", start,
                      "--flush-interval", "5")
    _wait_started(proc, tmp_path)  # a SIGTERM while python still imports would end it before it can seal
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1), (2)")
    time.sleep(2)  # read the inserts; --flush-interval 5 keeps them in the open segment
    assert not (tmp_path / "changelog").exists() or not any((tmp_path / "changelog").glob("seg-*"))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)

    assert proc.returncode == 0, err.decode()
    assert "stopped by signal" in err.decode()
    assert [line["op"] for line in changelog_lines(tmp_path)] == ["ddl", "c", "c"]
    file, pos = mariadb.binlog_position()
    assert (tmp_path / "tail.json").read_text().count(f'"pos": {pos}') == 1
