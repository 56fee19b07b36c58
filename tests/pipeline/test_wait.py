"""`cdc wait`: duration parsing, GTID containment, and each gate against hand-made state and the session MariaDB."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cdc.config import load_settings
from cdc.durations import parse_duration
from cdc.errors import TimeoutExpired, UsageError
from cdc.gtid import GtidSet
from cdc.pipeline.wait import Gate, parse_position, wait_for
from cdc.state import StateDir
from tests.pipeline.cli import run
from tests.pipeline.conftest import BINLOG, change, checkpoint, write_segments
from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--timeout", "300ms", "--interval", "50ms")


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("5s", 5), ("10m", 600), ("2h", 7200), ("1.5", 1.5)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "-1s", "1w", "s"])
def test_bad_duration_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(("have", "want", "expected"), [
    ("0-1-57", "0-1-50", True), ("0-1-57", "0-1-57", True), ("0-1-57", "0-1-58", False),
    ("0-1-57,1-2-9", "1-2-9", True), ("0-1-57", "1-1-1", False),
    ("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-57", "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-57", True),
    ("aaaa:1-10:12-20", "aaaa:11", False), ("aaaa:1-10:11-20", "aaaa:5-15", True), ("aaaa:1-10", "bbbb:1", False),
])
def test_gtid_containment(have: str, want: str, expected: bool) -> None:
    assert GtidSet.parse(have).contains(GtidSet.parse(want)) is expected


def test_position_gate_per_stage(state: StateDir) -> None:
    segs = write_segments(state, [[change(100)], [change(200)], [change(300)]])
    checkpoint(state, "tail", file=BINLOG, pos=400, gtid="0-1-3", last_segment=segs[2].name, server_uuid="u")
    checkpoint(state, "ship-s3", last_segment=segs[0].name)
    base = ("wait", "--state-dir", str(state.root), *FAST)
    assert run(*base, "--position", f"{BINLOG}:400", "--stage", "tail").exit_code == 0
    assert run(*base, "--position", f"{BINLOG}:401", "--stage", "tail").exit_code == 9
    # ship-s3 (the default: furthest stage with a checkpoint) has consumed everything before pos 200 only.
    assert run(*base, "--position", f"{BINLOG}:200").exit_code == 0
    result = run(*base, "--position", f"{BINLOG}:201")
    assert result.exit_code == 9
    assert "ship-s3 did not reach position mariadb-bin.000003:201" in result.stderr.replace("\n", " ")
    assert "1 segment(s) before" in result.stderr.replace("\n", " ")
    done = run(*base, "--position", "mariadb-bin.000002:999999", "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["stage"] == "ship-s3"


def test_position_gate_after_a_rebase_counts_the_offset(state: StateDir) -> None:
    # Since a --rebase, tail reads mariadb-bin.000001 of a new server, written into the change log as file 3.
    moved = [dict(change(pos), position=f"{3:010d}:{pos:012d}:b{0:012d}") for pos in (100, 200, 300)]
    segs = write_segments(state, [[change(50)], *([line] for line in moved)])
    checkpoint(state, "tail", file="mariadb-bin.000001", pos=400, gtid="0-2-9", last_segment=segs[-1].name,
               server_uuid="u", gtid_state="0-2-9", seq_offset=2)
    checkpoint(state, "ship-s3", last_segment=segs[1].name)
    base = ("wait", "--state-dir", str(state.root), *FAST, "--stage", "ship-s3")
    assert run(*base, "--position", "mariadb-bin.000001:100").exit_code == 0
    assert run(*base, "--position", "mariadb-bin.000001:201").exit_code == 9  # the line at 200 is not shipped


def test_gtid_gate(state: StateDir) -> None:
    segs = write_segments(state, [[change(100, gtid="0-1-1")], [change(200, gtid="0-1-2")]])
    checkpoint(state, "tail", file=BINLOG, pos=300, gtid="0-1-2", last_segment=segs[1].name, server_uuid="u")
    checkpoint(state, "merge", last_segment=segs[0].name, last_batch="b000000000001")
    base = ("wait", "--state-dir", str(state.root), *FAST, "--gtid")
    assert run(*base, "0-1-1").exit_code == 0  # default stage: spark-merge
    assert run(*base, "0-1-2").exit_code == 9
    assert run(*base, "0-1-2", "--stage", "tail").exit_code == 0
    assert run(*base, "0-1-3", "--stage", "tail").exit_code == 9


def test_reached_while_waiting(state: StateDir) -> None:
    segs = write_segments(state, [[change(100)]])
    checkpoint(state, "tail", file=BINLOG, pos=200, gtid=None, last_segment=segs[0].name, server_uuid="u")
    checkpoint(state, "ship-kinesis", last_segment=None)

    def ship_later() -> None:
        time.sleep(0.3)
        checkpoint(state, "ship-kinesis", last_segment=segs[0].name)

    worker = threading.Thread(target=ship_later)
    worker.start()
    result = wait_for(load_settings({"state_dir": str(state.root)}), Gate(position=parse_position(f"{BINLOG}:200")),
                      timeout=10, interval=0.05)
    worker.join()
    assert result.stage == "ship-kinesis" and result.polls > 1 and 0.3 <= result.seconds < 10


def test_usage_errors(state: StateDir) -> None:
    base = ("wait", "--state-dir", str(state.root), *FAST)
    assert run(*base, "--position", f"{BINLOG}:1").exit_code == 2  # no stage has a checkpoint yet
    assert run(*base, "--position", "nofile", "--stage", "tail").exit_code == 2
    assert run(*base, "--stage", "tail").exit_code == 2  # no gate
    assert run(*base, "--gtid", "0-1-1", "--lag-below", "5s", "--stage", "tail").exit_code == 2
    assert run(*base, "--gtid", "zz:abc", "--stage", "tail").exit_code == 2
    assert run(*base, "--gtid", "0-1-1", "--stage", "bogus").exit_code == 2


def test_lag_gate_against_the_server(mariadb: MariaDB, fresh_db: str, state: StateDir) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    file, pos = mariadb.binlog_position()
    checkpoint(state, "tail", file=file, pos=pos, gtid=None, last_segment=None, server_uuid="u")
    server = ("--host", mariadb.host, "--port", str(mariadb.port), "--user", "root")
    result = run("wait", "--lag-below", "5s", "--state-dir", str(state.root), *FAST, *server, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["detail"] == "lag 0.0s"
    mariadb.execute("INSERT INTO t VALUES (1)", database=fresh_db)
    time.sleep(1.1)  # binlog timestamps have one-second precision
    settings = load_settings({"state_dir": str(state.root), "mysql.host": mariadb.host, "mysql.port": mariadb.port})
    with pytest.raises(TimeoutExpired, match=r"tail did not reach lag below 0.5s within 0.2s: lag \d"):
        wait_for(settings, Gate(lag_below=0.5), stage="tail", timeout=0.2, interval=0.05)


def test_notes_only_when_the_gate_state_changes_or_as_a_heartbeat(state: StateDir) -> None:
    """A moving tail changes the detail at every poll ("tail is at ...:1234"); the notes follow the state instead."""
    checkpoint(state, "tail", file=BINLOG, pos=4, gtid=None, last_segment=None, server_uuid="u")
    moves, stop = [0], threading.Event()

    def tail_moves() -> None:
        while not stop.is_set():
            moves[0] += 1
            checkpoint(state, "tail", file=BINLOG, pos=4 + moves[0], gtid=None, last_segment=None, server_uuid="u")
            time.sleep(0.01)

    worker = threading.Thread(target=tail_moves)
    worker.start()
    try:
        base = ("wait", "--state-dir", str(state.root), "--position", f"{BINLOG}:999999", "--stage", "tail",
                "--interval", "20ms", "--timeout", "1500ms")
        quiet = run(*base)  # default heartbeat 30s: one note, then the timeout's error
        beating = run(*base, "--status-interval", "500ms")
    finally:
        stop.set()
        worker.join()
    assert moves[0] > 50
    assert quiet.exit_code == beating.exit_code == 9
    notes = [line for line in quiet.stderr.splitlines() if "waiting for tail: tail is at" in line]
    assert len(notes) == 1, quiet.stderr
    beats = [line for line in beating.stderr.splitlines() if "waiting for tail: tail is at" in line]
    assert 2 <= len(beats) <= 5, beating.stderr  # ~75 polls in 1.5 s: a note at once, then one each 500 ms
    assert len(set(beats)) == len(beats)  # each heartbeat says where tail is by then


def test_notes_when_the_state_changes(state: StateDir) -> None:
    # A real `cdc wait` whose notes are read as they come: each state change is made only after the note of the
    # state before it, so no note can be skipped by a change landing between two polls.
    segs = write_segments(state, [[change(100)]])
    checkpoint(state, "ship-s3", last_segment=None)
    argv = [sys.executable, "-m", "cdc", "wait", "--state-dir", str(state.root), "--position", f"{BINLOG}:200",
            "--stage", "ship-s3", "--interval", "20ms", "--timeout", "30s"]
    then = [lambda: checkpoint(state, "tail", file=BINLOG, pos=150, gtid=None, last_segment=None, server_uuid="u"),
            lambda: checkpoint(state, "tail", file=BINLOG, pos=300, gtid=None, last_segment=segs[0].name,
                               server_uuid="u"),
            lambda: checkpoint(state, "ship-s3", last_segment=segs[0].name)]
    notes = []
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "waiting for ship-s3: " in line:
                notes.append(line.split("waiting for ship-s3: ", 1)[1].strip())
                then.pop(0)()  # a fourth note would find nothing left to do and fail here
        assert proc.wait(timeout=60) == 0
    assert notes == ["tail has no checkpoint yet", f"tail is at {BINLOG}:150",
                     f"1 segment(s) before {BINLOG}:200 not consumed yet (next {segs[0].name})"]
