"""A password given through the environment appears nowhere: not in output, state files, logs, or any process's argv."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPLICATION_PASSWORD
from tests.rig import DbUser, MariaDB

ROOT = Path(__file__).resolve().parents[1]


def argv_of_all_processes() -> list[str]:
    """Every process's command line, as `ps` shows it to any user on the machine."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue  # the process ended while we looked
    return lines


def test_password_from_environment_never_leaks(mariadb: MariaDB, replication_user: DbUser, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_") and k != "MYSQL_PWD"}
    env |= {"HOME": str(home), "CDC_MYSQL_PASSWORD": REPLICATION_PASSWORD, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "cdc", "check-binlog", "--json", "--state-dir", str(state),
            "--host", mariadb.host, "--port", str(mariadb.port), "--user", replication_user.name, "--server-id", "777004"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen_running, leaked = 0, []
    while proc.poll() is None:
        snapshot = argv_of_all_processes()
        seen_running += any("check-binlog" in line for line in snapshot)
        leaked += [line for line in snapshot if REPLICATION_PASSWORD in line]
        time.sleep(0.02)
    stdout, stderr = (stream.decode() for stream in proc.communicate(timeout=60))
    assert seen_running > 0 and leaked == []
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["server"]["user"] == f"{replication_user.name}@%"
    assert {c["name"]: c["status"] for c in report["checks"]}["grant_replication_slave"] == "ok"
    for text in (stdout, stderr):
        assert REPLICATION_PASSWORD not in text
    assert [p for p in state.rglob("*")] == []  # check-binlog is read-only
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert REPLICATION_PASSWORD.encode() not in path.read_bytes(), path


def _run_watching_argv(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """Run a cdc command, scanning every process's argv while it runs; fail if the password shows up there."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen_running, leaked = 0, []
    while proc.poll() is None:
        snapshot = argv_of_all_processes()
        seen_running += any(argv[3] in line and "cdc" in line for line in snapshot)
        leaked += [line for line in snapshot if REPLICATION_PASSWORD in line]
        time.sleep(0.02)
    stdout, stderr = (stream.decode() for stream in proc.communicate(timeout=60))
    assert leaked == [] and seen_running > 0
    return proc.returncode, stdout, stderr


def test_snapshot_and_tail_never_write_the_password(mariadb: MariaDB, replication_user: DbUser, fresh_db: str,
                                                   tmp_path: Path) -> None:
    """The stages that write state (checkpoints, schema history, change log, locks) with the password in use."""
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, note VARCHAR(50))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1, 'before snapshot')")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_") and k != "MYSQL_PWD"}
    env |= {"HOME": str(home), "CDC_MYSQL_PASSWORD": REPLICATION_PASSWORD, "PYTHONPATH": str(ROOT)}
    common = ["--state-dir", str(tmp_path / "state"), "--host", mariadb.host, "--port", str(mariadb.port),
              "--user", replication_user.name, "--server-id", "777005", "--databases", fresh_db, "--json"]
    code, out_snap, err_snap = _run_watching_argv([sys.executable, "-m", "cdc", "snapshot", *common], tmp_path, env)
    assert code == 0, err_snap
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2, 'after snapshot')")
    code, out_tail, err_tail = _run_watching_argv([sys.executable, "-m", "cdc", "tail", *common], tmp_path, env)
    assert code == 0, err_tail
    assert json.loads(out_tail.splitlines()[-1])["rows"] == 1

    written = [path for path in (tmp_path / "state").rglob("*") if path.is_file()]
    assert {p.name for p in written} >= {"tail.json", "snapshot.json", "server.json", "tail.lock", "snapshot.lock"}
    for path in written + [p for p in tmp_path.rglob("*") if p.is_file()]:
        assert REPLICATION_PASSWORD.encode() not in path.read_bytes(), path
    for text in (out_snap, err_snap, out_tail, err_tail):
        assert REPLICATION_PASSWORD not in text


def test_no_log_record_carries_the_password(mariadb: MariaDB, replication_user: DbUser, fresh_db: str,
                                            tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every logger at DEBUG (the binlog library logged passwords before 1.0.15) while tail connects and reads."""
    from cdc.capture import Filters, StartRequest, TailOptions, run_tail
    from cdc.config import load_settings

    file, pos = mariadb.binlog_position()
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    flags = {"mysql.host": mariadb.host, "mysql.port": mariadb.port, "mysql.user": replication_user.name,
             "mysql.server_id": 777006, "state_dir": str(tmp_path / "state")}
    settings = load_settings(flags, env={"HOME": str(tmp_path), "CDC_MYSQL_PASSWORD": REPLICATION_PASSWORD},
                             cwd=tmp_path)
    with caplog.at_level(logging.DEBUG):
        summary = run_tail(settings, TailOptions(StartRequest(position=f"{file}:{pos}"),
                                                 filters=Filters(databases=(fresh_db,))))
    assert summary.rows == 1
    assert REPLICATION_PASSWORD not in caplog.text
    assert all(REPLICATION_PASSWORD not in str(record.args) for record in caplog.records)


def _leaks(text: str) -> bool:
    """The password as it is, or as JSON or repr() write it (a quote escaped)."""
    return any(form in text for form in (REPLICATION_PASSWORD, json.dumps(REPLICATION_PASSWORD)[1:-1],
                                         repr(REPLICATION_PASSWORD)[1:-1]))


def _tailed_one_row(line: str) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return record.get("logger") == "cdc.commands.tail" and record.get("rows") == 1


def test_debug_json_logs_of_a_following_tail_never_carry_the_password(mariadb: MariaDB, replication_user: DbUser,
                                                                      fresh_db: str, tmp_path: Path) -> None:
    """`--log-level debug` lets every library log (pymysql, the binlog reader...), and still no line holds the password."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".my.cnf").write_text(f"[client]\npassword = \"{REPLICATION_PASSWORD}\"\n")  # the option file's way in
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_") and k != "MYSQL_PWD"}
    env |= {"HOME": str(home), "PYTHONPATH": str(ROOT)}
    file, pos = mariadb.binlog_position()
    argv = [sys.executable, "-m", "cdc", "tail", "--follow", "--log-level", "debug", "--log-format", "json",
            "--status-interval", "1", "--state-dir", str(tmp_path / "state"), "--host", mariadb.host,
            "--port", str(mariadb.port), "--user", replication_user.name, "--server-id", "777007",
            "--databases", fresh_db, "--start-position", f"{file}:{pos}"]
    out = tmp_path / "stdout"
    with out.open("w") as stdout_file:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=stdout_file, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
        # Stopped once its status says the row is written (a fixed 3 s once stopped it while it was still starting).
        deadline = time.monotonic() + 120
        while not any(_tailed_one_row(line) for line in list(said)) and proc.poll() is None:
            assert time.monotonic() < deadline, said
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        reader.join(60)
    stdout, stderr = out.read_text(), "".join(said)
    assert proc.returncode == 0, stderr
    records = [json.loads(line) for line in stderr.splitlines()]  # every line one JSON object
    assert any(_tailed_one_row(line) for line in said), stderr
    assert any(r["level"] == "debug" and r["logger"] == "cdc.capture.commit" for r in records), stderr  # debug is on
    assert not _leaks(stdout) and not _leaks(stderr)


def test_a_secret_logged_by_any_library_is_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever a third-party library logs at debug (a connect string, a repr of its settings) is redacted."""
    from cdc.commands import logs
    from cdc.config import LogSettings

    for fmt in ("json", "text"):
        logs.configure(LogSettings(level="debug", format=fmt), env={"SNOWFLAKE_PASSWORD": "sf-Pa55word"})
        logs.add_secrets([REPLICATION_PASSWORD, None, ""])
        try:
            logging.getLogger("pymysql.connections").debug("connect(password=%r)", REPLICATION_PASSWORD)
            logging.getLogger("snowflake.connector").debug("params %s", {"password": "sf-Pa55word"})
            logging.getLogger("cdc.x").info("failed", extra={"settings": {"password": REPLICATION_PASSWORD}})
        finally:
            logs.reset()
        err = capsys.readouterr().err
        # (text lines hold the message alone, not the record's fields)
        assert len(err.splitlines()) == 3 and err.count("***") == (3 if fmt == "json" else 2), err
        assert not _leaks(err) and "sf-Pa55word" not in err


def test_a_short_secret_is_redacted_where_it_stands_alone_not_inside_other_words() -> None:
    """The demo's stand-in password "snow" made every `snowflake.connector` record read `***flake.connector`."""
    from cdc.commands import logs

    before = set(logs._state.secrets)
    logs.add_secrets(["snow", "long-enough-secret"])
    try:
        assert logs.redact("snowflake.connector: connect(password='snow', user=snow)") == \
            "snowflake.connector: connect(password='***', user=***)"
        assert logs.redact("token=xlong-enough-secretx") == "token=x***x"  # long ones: wherever they occur
    finally:
        logs._state.secrets = before  # the secrets of one test must not redact another's output
