"""`cdc status` on hand-made state directories, against the session MariaDB and a server of its own for the runway."""

from __future__ import annotations

import fcntl
import json
import math
import os
import pty
import re
import select
import signal
import stat
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc.pipeline.probe import BinlogFile, ServerView, bytes_behind
from cdc.state import StateDir
from tests.pipeline.cli import run
from tests.pipeline.conftest import BINLOG, change, checkpoint, sealed_batch, write_segments
from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]


def server_args(server: MariaDB) -> list[str]:
    return ["--host", server.host, "--port", str(server.port), "--user", "root"]


def status_json(*args: str) -> tuple[int, dict]:
    result = run("status", "--json", *args)
    return result.exit_code, (json.loads(result.stdout) if result.stdout.strip() else {})


def test_offline_without_any_state_reports_nothing_run(tmp_path: Path) -> None:
    code, doc = status_json("--offline", "--state-dir", str(tmp_path / "none"))
    assert code == 0
    assert [(s["stage"], s["ran"]) for s in doc["stages"]] == [
        ("snapshot", False), ("tail", False), ("ship-kinesis", False), ("ship-s3", False),
        ("spark-merge", False), ("snowflake-apply", False)]
    assert doc["lag"]["seconds"] is None and doc["runway"] is None and doc["server"] is None
    assert "does not exist" in doc["notes"][0]


def test_offline_shows_what_waits_between_stages(state: StateDir) -> None:
    segs = write_segments(state, [[change(100)], [change(200), change(200, 1)], [change(300, ts="2026-11-22T07:00:09Z")]])
    checkpoint(state, "tail", file=BINLOG, pos=400, gtid="0-1-9", last_segment=segs[2].name, server_uuid="u")
    checkpoint(state, "ship-s3", last_segment=segs[0].name, destination="s3://lake/cdc")
    checkpoint(state, "merge", last_segment=segs[1].name, last_batch="b000000000002")
    sealed_batch(state, "b000000000001", (segs[0].name, segs[0].name))
    sealed_batch(state, "b000000000002", (segs[1].name, segs[1].name))
    (state.root / "batches" / "b000000000003").mkdir()  # no manifest: still being written, not pending
    checkpoint(state, "snowflake-apply", last_batch="b000000000001")

    code, doc = status_json("--offline", "--state-dir", str(state.root))
    assert code == 0
    stages = {s["stage"]: s for s in doc["stages"]}
    assert stages["tail"]["at"] == f"{BINLOG}:400"
    assert (stages["ship-s3"]["pending_segments"], stages["ship-s3"]["pending_bytes"]) == (
        2, segs[1].stat().st_size + segs[2].stat().st_size)
    assert stages["ship-kinesis"]["ran"] is False
    assert (stages["spark-merge"]["at"], stages["spark-merge"]["pending_segments"]) == (segs[1].name, 1)
    apply = stages["snowflake-apply"]
    assert (apply["at"], apply["pending_batches"], apply["pending_segments"]) == ("b000000000001", 1, 2)
    assert doc["position"] == {"file": BINLOG, "pos": 400, "gtid": "0-1-9"}
    assert doc["lag"]["last_change_at"] == "2026-11-22T07:00:09Z"


def test_table_output_for_people(state: StateDir) -> None:
    checkpoint(state, "tail", file=BINLOG, pos=4, gtid=None, last_segment=None, server_uuid="u")
    result = run("status", "--offline", "--state-dir", str(state.root))
    assert result.exit_code == 0
    assert "snowflake-apply" in result.stdout and "lag: unknown (no sealed change-log segment)" in result.stdout


@pytest.mark.parametrize(("stem", "body", "needle"), [
    ("tail", b'{"version": 1, "file": "x.000001", "pos"', "is corrupt"),
    ("tail", b'{"version": 1, "file": "x.000001", "pos": "12"}', "pos = '12' is not a integer"),
    ("merge", b'{"version": 7, "last_segment": null}', "version 7"),
    ("snapshot", b'{"version": 1, "status": "done", "handover": {"file": 3}}', "file = 3 is not a string"),
])
def test_corrupt_checkpoint_exits_5(state: StateDir, stem: str, body: bytes, needle: str) -> None:
    (state.root / f"{stem}.json").write_bytes(body)
    result = run("status", "--offline", "--state-dir", str(state.root))
    assert result.exit_code == 5
    assert needle in result.stderr.replace("\n", " ") or needle in result.output.replace("\n", " ")


def test_bytes_behind_sums_binlog_sizes_from_the_checkpoint() -> None:
    view = ServerView("s", "mariadb", "b.000005", 300, None,
                      (BinlogFile("b.000003", 1000), BinlogFile("b.000004", 500), BinlogFile("b.000005", 300)),
                      None, "")
    assert bytes_behind(view, "b.000003", 400) == (600 + 500 + 300, 2)
    assert bytes_behind(view, "b.000005", 300) == (0, 0)


def test_online_caught_up_then_behind(mariadb: MariaDB, fresh_db: str, state: StateDir) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    file, pos = mariadb.binlog_position()
    checkpoint(state, "tail", file=file, pos=pos, gtid=None, last_segment=None, server_uuid="u")
    code, doc = status_json("--state-dir", str(state.root), *server_args(mariadb))
    assert code == 0
    assert doc["lag"]["seconds_source"] == "caught up with the server" or doc["server"]["file"] != file
    mariadb.execute("INSERT INTO t VALUES (1)", database=fresh_db)
    code, doc = status_json("--state-dir", str(state.root), *server_args(mariadb))
    server = doc["server"]
    assert code == 0  # the session server never purges: runway is unlimited
    assert doc["lag"]["bytes"] > 0 and doc["lag"]["seconds"] is not None and doc["lag"]["seconds"] < 60
    assert doc["lag"]["seconds_source"] == "age of the oldest unread transaction on the server"
    if server["file"] == file:  # (another test may rotate the session server's binlog meanwhile)
        assert doc["lag"]["bytes"] == server["pos"] - pos and doc["lag"]["files"] == 0
    assert doc["runway"]["seconds"] is None and doc["runway"]["low"] is False


def test_runway_below_threshold_exits_8(mariadb_factory: Callable[..., MariaDB], state: StateDir) -> None:
    server = mariadb_factory()
    server.execute("SET GLOBAL binlog_expire_logs_seconds = 3600")
    file, pos = server.binlog_position()
    checkpoint(state, "tail", file=file, pos=pos, gtid=None, last_segment=None, server_uuid="u")
    # While tail's file is still written, the whole retention lies ahead: 1 h < 6 h already.
    code, doc = status_json("--state-dir", str(state.root), *server_args(server))
    assert code == 8 and doc["runway"]["seconds"] == 3600 and doc["runway"]["low"] is True
    server.execute("FLUSH BINARY LOGS")
    code, doc = status_json("--state-dir", str(state.root), *server_args(server))
    runway = doc["runway"]
    assert code == 8
    assert runway["needed_file"] == file and runway["retention_source"] == "binlog_expire_logs_seconds"
    assert 3500 < runway["seconds"] <= 3600 and runway["file_closed_at"] is not None
    code, _ = status_json("--state-dir", str(state.root), "--min-runway-hours", "0.5", *server_args(server))
    assert code == 0
    result = run("status", "--state-dir", str(state.root), *server_args(server))
    assert result.exit_code == 8 and "until" in result.stdout

    server.execute("FLUSH BINARY LOGS")
    server.purge_binlogs_to(server.binlog_position()[0])
    code, doc = status_json("--state-dir", str(state.root), "--min-runway-hours", "0.5", *server_args(server))
    assert code == 8 and doc["runway"]["purged"] is True and doc["runway"]["seconds"] == 0



def test_a_state_directory_of_another_server_exits_5_instead_of_a_made_up_lag(
        mariadb: MariaDB, mariadb_factory: Callable[..., MariaDB], tmp_path: Path) -> None:
    other = mariadb_factory()
    state = tmp_path / "state"
    tailed = run("tail", "--until-now", "--from-now", "--state-dir", str(state), *server_args(other))
    assert tailed.exit_code == 0, tailed.output
    code, doc = status_json("--state-dir", str(state), *server_args(other))
    assert code == 0 and doc["lag"]["seconds_source"] == "caught up with the server"
    result = run("status", "--state-dir", str(state), *server_args(mariadb))
    assert result.exit_code == 5, result.output
    said = " ".join(result.output.split())
    assert f"state directory {state} belongs to server" in said and "--offline" in said


# --- the operator's night: a real tail fails, status and its metrics say so, a success clears it, --watch ---------

WRONG_PASSWORD = "n0t-the 'pw\" #9"


def cdc(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m cdc ...` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "cdc", *args], env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def spawn_cdc(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cdc", *args], env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_lines(proc: subprocess.Popen[str], count: int, timeout: float = 60) -> list[str]:
    """The first `count` lines of a --watch, each within `timeout`."""
    assert proc.stdout is not None
    lines: list[str] = []
    for _ in range(count):
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        assert ready, f"no line from the watch after {lines!r}; stderr so far follows"
        line = proc.stdout.readline()
        assert line, f"the watch ended early (exit {proc.wait(10)}): {proc.stderr.read() if proc.stderr else ''}"
        lines.append(line)
    return lines


def stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def parse_metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a metrics file, by (name, sorted labels), through Prometheus' own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, state: Path,
           stage: str | None = None) -> float | None:
    labels = {"state_dir": str(state.resolve())} | ({"stage": stage} if stage else {})
    return metrics.get((name, tuple(sorted(labels.items()))))


def test_a_failing_tail_is_shown_by_status_until_it_succeeds(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    state, prom = tmp_path / "state", tmp_path / "textfile" / "cdc.prom"
    prom.parent.mkdir()
    server = server_args(mariadb)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", database=fresh_db)
    state.mkdir()

    # 1. tail's first run fails: the password is wrong. The failure is recorded, privately and without the password.
    failed = cdc("tail", "--from-now", "--until-now", "--databases", fresh_db, "--state-dir", str(state), *server,
                 env={"CDC_MYSQL_PASSWORD": WRONG_PASSWORD})
    assert failed.returncode == 1, failed.stderr
    record = state / "errors" / "tail.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert WRONG_PASSWORD not in record.read_text() and "n0t-the" not in record.read_text()
    recorded = json.loads(record.read_text())
    assert (recorded["version"], recorded["stage"], recorded["exit_code"], recorded["command"]) == (1, "tail", 1, "cdc tail")
    assert "access denied" in recorded["message"] and "root" in recorded["message"]

    # 2. status (against the server) shows it, with its exit code, and so does the metrics file.
    shown = cdc("status", "--json", "--state-dir", str(state), "--metrics-file", str(prom), *server)
    assert shown.returncode == 0, shown.stderr
    tail = {s["stage"]: s for s in json.loads(shown.stdout)["stages"]}["tail"]
    assert tail["last_error"]["exit_code"] == 1 and tail["last_error"]["failed_at"] == recorded["failed_at"]
    assert "access denied" in tail["last_error"]["message"]
    metrics = parse_metrics(prom.read_text())
    assert sample(metrics, "cdc_stage_failing", state, "tail") == 1
    assert sample(metrics, "cdc_stage_last_error_exit_code", state, "tail") == 1
    assert sample(metrics, "cdc_stage_last_error_timestamp_seconds", state, "tail") == recorded["failed_at_unix"]
    assert sample(metrics, "cdc_stage_failing", state, "ship-s3") == 0
    assert sample(metrics, "cdc_server_up", state) == 1
    table = cdc("status", "--state-dir", str(state), *server, env={"COLUMNS": "200"})
    assert "tail failed at" in table.stdout and "exit 1" in table.stdout

    # 3. The next run succeeds: the record goes. 30 rows follow, captured by a second run.
    ok = cdc("tail", "--from-now", "--until-now", "--databases", fresh_db, "--state-dir", str(state), *server)
    assert ok.returncode == 0, ok.stderr
    assert not record.exists()
    for i in range(30):
        mariadb.execute("INSERT INTO t VALUES (%s, 'x')", (i,), database=fresh_db)
    ok = cdc("tail", "--until-now", "--databases", fresh_db, "--state-dir", str(state), *server)
    assert ok.returncode == 0, ok.stderr

    # 4. --watch without a terminal: one JSON object per refresh, the metrics file rewritten each time; SIGTERM -> 143.
    watch = spawn_cdc("status", "--watch", "--json", "--interval", "0.5", "--state-dir", str(state),
                      "--metrics-file", str(prom), *server)
    try:
        reports = [json.loads(line) for line in read_lines(watch, 3)]
    finally:
        code, rest, err = stop(watch, signal.SIGTERM)
    assert code == 143, err
    for report in reports:
        stages = {s["stage"]: s for s in report["stages"]}
        assert stages["tail"]["last_error"] is None and report["server_error"] is None
        assert stages["tail"]["rows_per_second"] == 30 / 60  # all 30 sealed within the last minute
        assert stages["tail"]["lag_seconds"] == 0.0 and report["lag"]["seconds_source"] == "caught up with the server"
    metrics = parse_metrics(prom.read_text())
    assert sample(metrics, "cdc_rows_per_second", state, "tail") == 0.5
    assert sample(metrics, "cdc_stage_lag_seconds", state, "tail") == 0
    assert sample(metrics, "cdc_stage_failing", state, "tail") == 0
    assert sample(metrics, "cdc_stage_last_error_timestamp_seconds", state, "tail") is None
    assert sample(metrics, "cdc_binlog_bytes_behind", state) == 0
    assert sample(metrics, "cdc_retention_runway_seconds", state) == math.inf  # the session server never purges
    assert [p.name for p in prom.parent.iterdir()] == ["cdc.prom"]  # no temp file left behind
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644


def test_watch_without_a_terminal_prints_whole_lines_goes_on_after_errors_and_stops_on_sigint(state: StateDir) -> None:
    segs = write_segments(state, [[change(100)], [change(200), change(200, 1)]])
    checkpoint(state, "tail", file=BINLOG, pos=400, gtid="0-1-9", last_segment=segs[1].name, server_uuid="u")
    checkpoint(state, "ship-s3", last_segment=segs[0].name, destination="s3://lake/cdc")
    good = state.checkpoint_path("tail").read_bytes()
    watch = spawn_cdc("status", "--watch", "--offline", "--interval", "0.2", "--state-dir", str(state.root))
    try:
        first = read_lines(watch, 3)
        state.checkpoint_path("tail").write_text('{"version": 1, "file": ')  # corrupt while watched...
        lines = read_lines(watch, 1)
        while not lines[-1].startswith("error"):
            lines += read_lines(watch, 1)
        state.checkpoint_path("tail").write_bytes(good)  # ... and repaired: the watch goes on
        while lines[-1].startswith("error"):
            lines += read_lines(watch, 1)
    finally:
        code, rest, err = stop(watch, signal.SIGINT)
    assert code == 130, err
    for line in first:
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \| tail at=mariadb-bin.000003:400 lag=\S+ rows/s=0\.1 \| "
                        rf"ship-s3 at={segs[0].name} lag=\S+ pending=1seg/{segs[1].stat().st_size}B rows/s=\S+$", line), line
        assert len(line) > 80  # never cut or folded at 80 columns
    assert "error (exit 5):" in lines[-2] and "is corrupt" in lines[-2] and " tail at=" in lines[-1]


def _own_terminal() -> None:
    """In the child: a session of its own, with the pty on stdin as its controlling terminal (so ^C is SIGINT)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_watch_at_a_terminal_is_a_live_view_until_ctrl_c(state: StateDir) -> None:
    segs = write_segments(state, [[change(100)]])
    checkpoint(state, "tail", file=BINLOG, pos=400, gtid=None, last_segment=segs[0].name, server_uuid="u")
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "cdc", "status", "--watch", "--offline", "--interval", "0.3",
                             "--state-dir", str(state.root)], stdin=secondary, stdout=secondary, stderr=secondary,
                            env={**env, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}, preexec_fn=_own_terminal)
    os.close(secondary)
    screen = b""
    try:
        while screen.count(b"Ctrl-C to stop") < 2:  # two refreshes drawn
            ready, _, _ = select.select([primary], [], [], 60)
            assert ready, screen
            screen += os.read(primary, 65536)
        os.write(primary, b"\x03")  # Ctrl-C, typed at the terminal: the terminal sends SIGINT
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([primary], [], [], 0.1)[0]:
                try:
                    screen += os.read(primary, 65536)
                except OSError:  # EIO: the last process holding the terminal is gone
                    break
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(primary)
    text = screen.decode(errors="replace")
    assert "\x1b[" in text  # drawn with terminal control sequences, not printed as lines
    assert "snowflake-apply" in text and segs[0].name in text and "mariadb-bin.000003:400" in text


def test_watch_stops_when_its_reader_goes_away(state: StateDir) -> None:
    checkpoint(state, "tail", file=BINLOG, pos=4, gtid=None, last_segment=None, server_uuid="u")
    watch = spawn_cdc("status", "--watch", "--json", "--offline", "--interval", "0.2", "--state-dir", str(state.root))
    assert json.loads(read_lines(watch, 1)[0])["position"]["pos"] == 4
    assert watch.stdout is not None and watch.stderr is not None
    watch.stdout.close()  # as `| head -1` does
    assert watch.wait(30) == 130
    assert watch.stderr.read() == ""  # no traceback, no "Exception ignored"


def test_a_resnapshot_in_progress_is_shown(state: StateDir) -> None:
    from cdc.checkpoints import ResnapshotCheckpoint, ResnapshotTable

    checkpoint(state, "tail", file=BINLOG, pos=4, gtid=None, last_segment=None, server_uuid="u")
    run_ = ResnapshotCheckpoint("r1", "running", "2026-11-26T07:15:00Z", 3, (
        ResnapshotTable("shop", "orders", ("b.000001", 4), [20], False, False, 20, 2, 90, {"1": None, "2": [10]}),))
    run_.write(state)
    code, doc = status_json("--offline", "--state-dir", str(state.root))
    assert code == 0
    assert doc["resnapshot"] == {"run": "r1", "status": "running", "started_at": "2026-11-26T07:15:00Z", "tables": [
        {"table": "shop.orders", "rows": 20, "est_rows": 90, "chunks": 2, "read_all": False, "done": False}]}
    assert any(n.startswith("resnapshot r1 (started 2026-11-26T07:15:00Z) in progress: shop.orders reading "
                            "20/~90 rows in 2 chunk(s)") for n in doc["notes"])
    result = run("status", "--offline", "--state-dir", str(state.root))
    assert "resnapshot r1" in result.stdout + result.stderr
