"""Decode workers (--decode-workers): the same change log as in-process, and a dead worker loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from cdc.capture import Filters, StartRequest, TailOptions, run_tail
from cdc.capture.decode_pool import DecodePool, DecodeWorkerError
from cdc.errors import DataError
from tests.capture.conftest import ROOT, binlog_start, changelog_bytes, env_for, settings_for, spawn_tail, tail_once
from tests.capture.workload import create_all_types_table, run_workload
from tests.rig import MariaDB


def _workload(mariadb: MariaDB, db: str) -> None:
    """Every column type and hostile values, DDL, and multi-event statements (2,000 rows each)."""
    with mariadb.connect() as conn:
        create_all_types_table(conn, db)
        run_workload(conn, db, seed=8, transactions=60)
    mariadb.execute(f"CREATE TABLE `{db}`.big (id INT PRIMARY KEY, pad VARCHAR(255), note TEXT)")
    for round_ in range(3):
        mariadb.execute(f"INSERT INTO `{db}`.big SELECT seq + {round_ * 10_000}, REPEAT('x', 200), CONCAT('é', seq) "
                        f"FROM `{db}`.seq_1_to_2000")
        mariadb.execute(f"UPDATE `{db}`.big SET note = CONCAT(note, '🎉') WHERE id % 3 = {round_}")
    mariadb.execute(f"ALTER TABLE `{db}`.big ADD COLUMN extra INT")
    mariadb.execute(f"DELETE FROM `{db}`.big WHERE id % 5 = 0")


def _tail(mariadb: MariaDB, state: Path, db: str, start: str, workers: int, **filters: tuple[str, ...]):  # type: ignore[no-untyped-def]
    options = TailOptions(start=StartRequest(position=start), filters=Filters(databases=(db,), **filters),
                          decode_workers=workers, spill_bytes=256 * 1024)  # the 2,000-row statements spill
    return run_tail(settings_for(mariadb, state), options)


@pytest.mark.parametrize("filters", [{}, {"exclude_columns": ("*.*.c_text",),
                                         "hash_columns": ("*.big.pad", "*.*.c_varchar", "*.*.c_decimal")}],
                         ids=["plain", "excluded-and-hashed"])
def test_workers_write_the_in_process_change_log_byte_for_byte(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                               filters: dict[str, tuple[str, ...]]) -> None:
    start = binlog_start(mariadb)
    _workload(mariadb, fresh_db)
    alone = _tail(mariadb, tmp_path / "in-process", fresh_db, start, 0, **filters)
    assert alone.decode_workers == 0 and alone.worker_rows == 0 and alone.rows > 10_000
    for workers in (1, 2):
        summary = _tail(mariadb, tmp_path / f"workers-{workers}", fresh_db, start, workers, **filters)
        assert summary.decode_workers == workers and summary.worker_rows > 0  # the workers did decode
        assert (summary.rows, summary.transactions) == (alone.rows, alone.transactions)
        assert changelog_bytes(tmp_path / f"workers-{workers}") == changelog_bytes(tmp_path / "in-process")


def test_big_rows_are_bounded_by_bytes_in_flight_not_only_by_count(mariadb: MariaDB, fresh_db: str,
                                                                    tmp_path: Path) -> None:
    """Rows of 1.5 MB, one rows event each: with 1 MiB allowed in flight, at most one event is with the worker at
    a time (the reader decodes the others itself) instead of 32 at once, and the change log is unchanged."""
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.b (id INT PRIMARY KEY, body LONGBLOB)")
    row = 1_500_000
    for key in range(1, 25):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.b VALUES ({key}, REPEAT(CHAR(65 + {key % 26}), {row}))")
    alone = _tail(mariadb, tmp_path / "in-process", fresh_db, start, 0)
    options = TailOptions(start=StartRequest(position=start), filters=Filters(databases=(fresh_db,)),
                          decode_workers=1, decode_bytes=2**20)
    bounded = run_tail(settings_for(mariadb, tmp_path / "bounded"), options)
    assert bounded.rows == alone.rows == 24
    assert bounded.worker_rows > 0  # here about half: the reader decodes an event itself while one is out
    # Never two events in flight (without the byte bound, 5-6 were: 7.5-9 MB).
    assert row < bounded.worker_peak_bytes < 2 * row
    assert changelog_bytes(tmp_path / "bounded") == changelog_bytes(tmp_path / "in-process")


def test_lines_waiting_behind_a_held_up_worker_are_bounded_by_bytes(mariadb: MariaDB, fresh_db: str,
                                                                     tmp_path: Path) -> None:
    """The worker is stopped (SIGSTOP) while it holds jobs: the reader decodes the next events itself, and their
    lines wait behind the held job. Past 1 MiB of them it waits for the worker instead of queueing 256 events'
    worth (~5 MB here); resumed, the worker's results slot in and the change log is the in-process one."""
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, pad VARCHAR(255))")
    # One statement: ~600 rows events of ~8 KB, ~14 KB of change lines each.
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t SELECT seq, REPEAT('q', 200) FROM `{fresh_db}`.seq_1_to_20000")
    alone = _tail(mariadb, tmp_path / "in-process", fresh_db, start, 0)
    before = set(_children(os.getpid()))
    held: list[int] = []

    def hold_the_worker() -> None:
        deadline = time.monotonic() + 60
        while not (new := set(_children(os.getpid())) - before) and time.monotonic() < deadline:
            time.sleep(0.001)
        held.extend(new)
        for pid in new:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(2.0)  # the reader reaches the bound in well under a second of its own decoding
        for pid in new:
            os.kill(pid, signal.SIGCONT)

    holder = threading.Thread(target=hold_the_worker)
    holder.start()
    try:
        summary = _tail(mariadb, tmp_path / "held", fresh_db, start, 1)
    finally:
        holder.join()
    assert len(held) == 1 and summary.decode_workers == 1
    assert summary.rows == alone.rows == 20_000
    assert summary.worker_rows > 0  # the held jobs were decoded by the worker once it went on
    # Lines did queue behind the held job, up to the bound and at most one event's lines past it.
    assert 2**20 - 64 * 1024 < summary.queued_peak_bytes < 2**20 + 64 * 1024
    assert changelog_bytes(tmp_path / "held") == changelog_bytes(tmp_path / "in-process")


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def _worker_of(proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 60
    while not (children := _children(proc.pid)):
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "tail started no decode worker within 60 s"
        time.sleep(0.05)
    return children[0]


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie (exited, not yet reaped by a dead parent's reaper) has ended too.
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_killed_worker_stops_tail_with_a_clear_error_and_loses_nothing(mariadb: MariaDB, fresh_db: str,
                                                                         tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, pad VARCHAR(255))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t SELECT seq, REPEAT('a', 200) FROM `{fresh_db}`.seq_1_to_5000")
    state = tmp_path / "killed"
    proc = spawn_tail(mariadb, state, "--follow", "--databases", fresh_db, "--start-position", start,
                      "--decode-workers", "1", "--flush-interval", "0.2")
    worker = _worker_of(proc)
    os.kill(worker, signal.SIGKILL)
    # Rows keep coming: the next rows event the reader hands over finds the worker dead.
    for round_ in range(1, 4):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t SELECT seq + {round_ * 10_000}, REPEAT('b', 200) "
                        f"FROM `{fresh_db}`.seq_1_to_2000")
    _, err = proc.communicate(timeout=60)

    assert proc.returncode == 1, err.decode()
    assert f"decode worker (pid {worker}) was killed by signal SIGKILL" in err.decode()
    assert "--decode-workers 0" in err.decode()  # the hint
    # Whatever was sealed and checkpointed is a prefix of the truth: a rerun completes it exactly.
    tail_once(mariadb, state, fresh_db, decode_workers=1)
    tail_once(mariadb, tmp_path / "clean", fresh_db, start, decode_workers=0)
    assert changelog_bytes(state) == changelog_bytes(tmp_path / "clean")
    assert changelog_bytes(state).count(b'"op":"c"') == 11_000


def test_kill_9_of_tail_ends_its_worker_and_frees_the_lock(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    proc = spawn_tail(mariadb, tmp_path, "--follow", "--databases", fresh_db, "--start-position", start,
                      "--decode-workers", "1")
    worker = _worker_of(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _gone(worker, 10), "the decode worker outlived tail"
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    resume = None if (tmp_path / "tail.json").exists() else start  # killed before its first checkpoint?
    summary = tail_once(mariadb, tmp_path, fresh_db, resume)  # no LockedError: nothing holds tail's lock any more
    assert summary.rows == 1


def test_a_pool_whose_worker_died_raises_instead_of_returning() -> None:
    """At the library level: the error names the worker and how it ended; no result is made up."""
    pool = DecodePool(1)
    try:
        os.kill(pool.pids[0], signal.SIGKILL)
        with pytest.raises(DecodeWorkerError, match="killed by signal SIGKILL"):
            pool.take()
    finally:
        pool.close()


def test_a_value_the_fast_path_refuses_goes_through_the_library_in_tail(mariadb: MariaDB, fresh_db: str,
                                                                          tmp_path: Path) -> None:
    """Byte 0x98 in a cp1251 column: a single-byte charset stores any byte, but 0x98 is no character of cp1251
    (MySQL's table has none either), so the fast path raises and the worker answers "slow"; tail decodes that
    event itself through the library and stops with the same error, column and position as without workers;
    the transaction committed before it is sealed and checkpointed either way."""
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, s VARCHAR(10) CHARACTER SET cp1251)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1, 'caf\u0451')")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2, UNHEX('98'))")
    errors = []
    for workers in (0, 1):
        state = tmp_path / str(workers)
        with pytest.raises(DataError) as caught:
            _tail(mariadb, state, fresh_db, start, workers)
        errors.append(caught.value.message)
        assert changelog_bytes(state).count(b'"op":"c"') == 1 and "cafё".encode() in changelog_bytes(state)
    assert errors[0] == errors[1]
    assert f"{fresh_db}.t at " in errors[0] and "'s'" in errors[0], errors[0]


def test_a_stuck_worker_is_an_error_not_a_hang() -> None:
    """A stopped worker (SIGSTOP) answers nothing: the pool gives up after its stall time and ends the worker."""
    pool = DecodePool(1, stall_seconds=1.0)
    pid = pool.pids[0]
    try:
        os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()
        with pytest.raises(DecodeWorkerError, match=f"decode worker \\(pid {pid}\\) sent nothing for 1 s"):
            pool.take()
        assert 1.0 <= time.monotonic() - began < 10
    finally:
        pool.close()
    assert _gone(pid, 10)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="on one core there is no worker by default either way")
def test_by_default_no_worker_with_the_c_decoder_and_one_without(mariadb: MariaDB, fresh_db: str,
                                                                   tmp_path: Path) -> None:
    """With the C decoder a worker's pipe costs more than the decoding it takes over (bench_tail.py: 0.55 s wall and
    0.73 s CPU with one, 0.34 s and 0.33 s without); on the Python path (CDC_NATIVE=0) the worker pays."""
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, pad VARCHAR(255))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t SELECT seq, REPEAT('a', 200) FROM `{fresh_db}`.seq_1_to_500")
    workers = {}
    for native in ("1", "0"):
        argv = [sys.executable, "-m", "cdc", "tail", "--until-now", "--json", "--databases", fresh_db,
                "--start-position", start, "--state-dir", str(tmp_path / native)]
        done = subprocess.run(argv, cwd=ROOT, env=env_for(mariadb, CDC_NATIVE=native), capture_output=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        summary = orjson.loads(done.stdout.splitlines()[-1])
        assert summary["rows"] == 500, summary
        workers[native] = summary["decode_workers"]
    assert workers == {"1": 0, "0": 1}
