"""Progress: the lag in seconds and bytes while catching up, status lines while idle, `--json` as JSON lines."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc.capture import Filters, Progress, StartRequest, TailOptions, run_tail
from cdc.capture.lag import bytes_behind
from cdc.source.binlog import Position
from tests.capture.conftest import binlog_start, changelog_lines, settings_for, spawn_tail
from tests.rig import MariaDB


def test_bytes_behind_sums_the_files_after_the_position() -> None:
    binlogs = [("b.000001", 900), ("b.000002", 500), ("b.000003", 120)]
    assert bytes_behind(binlogs, Position("b.000002", 300)) == 200 + 120
    assert bytes_behind(binlogs, Position("b.000003", 120)) == 0
    assert bytes_behind(binlogs, Position("b.000004", 4)) == 0  # rotated past the list we read


def test_lag_shrinks_to_zero_while_catching_up(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, pad VARCHAR(200))")
    for batch in range(6):  # separate transactions: > 256 events in all
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t SELECT seq + {batch * 1000}, REPEAT('x', 200) "
                        f"FROM `{fresh_db}`.seq_1_to_50")
        for key in range(1, 60, 3):
            mariadb.execute(f"UPDATE `{fresh_db}`.t SET pad = 'y' WHERE id = {batch * 1000 + key}")
    _, end = mariadb.binlog_position()
    seen: list[Progress] = []
    options = TailOptions(StartRequest(position=start), filters=Filters(databases=(fresh_db,)))
    run_tail(settings_for(mariadb, tmp_path), options, on_progress=seen.append)
    assert seen, "no progress was reported for hundreds of events"
    first = seen[0]
    assert first.lag_bytes is not None and 0 < first.lag_bytes < end
    assert first.lag_seconds is not None and first.lag_seconds >= 0
    assert [p.lag_bytes for p in seen] == sorted((p.lag_bytes for p in seen), reverse=True)  # type: ignore[arg-type]
    assert all(p.rows <= q.rows for p, q in zip(seen, seen[1:]))


def _read_lines(proc: subprocess.Popen[bytes], into: list[dict[str, Any]]) -> threading.Thread:
    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            into.append(json.loads(raw))  # every line must be one JSON object
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_json_follow_prints_status_lines_then_the_summary(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    proc = spawn_tail(mariadb, tmp_path, "--follow", "--json", "--databases", fresh_db, "--start-position", start)
    lines: list[dict[str, Any]] = []
    reader = _read_lines(proc, lines)
    try:
        _wait_for(lambda: len(lines) >= 1, "the first status line")  # caught up: the server sent a heartbeat
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
        committed = time.monotonic()
        # Default --flush-interval 0.5: the committed row is in a sealed segment well within a second (3 s of
        # slack for a loaded machine).
        _wait_for(lambda: [line["op"] for line in changelog_lines(tmp_path)] == ["ddl", "c"], "the sealed row", 10)
        assert time.monotonic() - committed < 3.0
        _wait_for(lambda: lines[-1]["status"]["rows"] == 1, "a status line with the new row")
        seen = len(lines)
        _wait_for(lambda: len(lines) >= seen + 2, "status lines while the server is idle", timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(timeout=10)  # stdout belongs to the reader thread (communicate() would race it for the last line)
    assert proc.stderr is not None
    assert proc.returncode == 0, proc.stderr.read().decode()
    proc.stderr.close()
    statuses, summary = [line["status"] for line in lines[:-1]], lines[-1]
    assert set(statuses[-1]) == {"position", "events", "rows", "transactions", "events_per_second", "lag_seconds",
                                 "segments", "lag_bytes"}
    assert (statuses[-1]["rows"], statuses[-1]["lag_seconds"], statuses[-1]["lag_bytes"]) == (1, 0.0, 0)
    assert (summary["stopped"], summary["rows"], summary["transactions"]) == ("stopped by signal", 1, 2)


def test_follow_without_a_terminal_logs_a_status_line_every_interval(mariadb: MariaDB, fresh_db: str,
                                                                     tmp_path: Path) -> None:
    """A daemon's tail (stderr a pipe): one status line per --status-interval, idle or not, until SIGTERM."""
    import re
    from datetime import datetime

    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    proc = spawn_tail(mariadb, tmp_path, "--follow", "--status-interval", "1", "--databases", fresh_db,
                      "--start-position", start)
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        lines.extend(raw.decode().rstrip("\n") for raw in proc.stderr)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    status = re.compile(r"^(\S+Z) INFO +cdc\.commands\.tail: tail at (\S+), lag (\S+) / (\S+) bytes, ([\d.,]+) rows/s; "
                        r"(\d+) rows, (\d+) transactions, (\d+) segments so far$")
    found = lambda: [m for m in map(status.match, list(lines)) if m]  # noqa: E731
    try:
        _wait_for(lambda: len(found()) >= 1, "the first status line")
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
        _wait_for(lambda: found()[-1][6] == "1", "a status line with the new row", timeout=10)
        seen = len(found())
        _wait_for(lambda: len(found()) >= seen + 2, "status lines while the server is idle", timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(timeout=10)
    assert proc.returncode == 0, "\n".join(lines)
    assert proc.stdout is not None and proc.stdout.read() == b""  # stdout is for data (--stdout, --json) only
    proc.stdout.close()
    matches = found()
    times = [datetime.fromisoformat(m[1].replace("Z", "+00:00")) for m in matches]
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:])]
    assert all(0.9 <= gap < 5 for gap in gaps), gaps  # about every second (a heartbeat brings each one)
    assert (matches[-1][3], matches[-1][4], matches[-1][6]) == ("0s", "0", "1")  # caught up, the row counted
    assert "tail stopped by signal" in lines[-1]
