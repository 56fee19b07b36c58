"""Faults stop tail with a precise message and exit code, or are survived without loss."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pymysqlreplication import event as lib_event
from pymysqlreplication import row_event as lib_rows

from cdc.errors import DataError, ExitCode
from cdc.source.binlog import WriteRows, translate
from tests.capture.conftest import ROOT, binlog_start, changelog_lines, env_for, spawn_tail
from tests.rig import MariaDB
from tests.rig._process import wait_until


def _library_event(cls: type, event_type: int, **attrs: Any) -> Any:
    """An event object of the library as its stream would hand it over (without parsing a packet)."""
    raw = cls.__new__(cls)
    raw.packet = SimpleNamespace(log_pos=1500, event_size=300, server_id=1)
    raw.timestamp, raw.event_type = 1_700_000_000, event_type
    for name, value in attrs.items():
        setattr(raw, name, value)
    return raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_library_event(lib_rows.PartialUpdateRowsEvent, 39),
         "PARTIAL_UPDATE_ROWS event (partial JSON update image) at mysql-bin.000003:1200"),
        (_library_event(lib_event.NotImplementedEvent, 169),
         "unsupported binlog event WRITE_ROWS_COMPRESSED (type 169) at mysql-bin.000003:1200"),
        (_library_event(lib_event.NotImplementedEvent, 40), "unsupported binlog event TRANSACTION_PAYLOAD"),
        (_library_event(WriteRows, 30, unmapped=True, table_id=42),
         "rows event at mysql-bin.000003:1200 refers to table id 42 whose table map was not read"),
    ],
    ids=["partial-json", "mariadb-compressed", "mysql-payload", "no-table-map"],
)
def test_events_that_cannot_be_decoded_exactly_stop_with_coordinates(raw: Any, message: str) -> None:
    with pytest.raises(DataError) as caught:
        translate(raw, "mysql-bin.000003")
    assert message in caught.value.message
    assert caught.value.hint
    assert caught.value.exit_code == ExitCode.FAILURE  # through the CLI: exit 1, the message and the hint


def test_harmless_unknown_events_pass() -> None:
    assert translate(_library_event(lib_event.NotImplementedEvent, 160), "mysql-bin.000003").kind == "other"


def test_no_start_position_refuses(cli: Callable[..., Any]) -> None:
    result = cli("tail")
    assert result.exit_code == ExitCode.POSITION
    assert "never guesses a start position" in result.output and "--start-position" in result.output


@pytest.mark.parametrize(("name", "text"), [("tail.json", '{"version": 1, "file": "mariadb-bin.0000'),
                                            ("tail.json", '{"version": 1, "pos": 4}'),
                                            ("snapshot.json", "[1, 2")])
def test_corrupt_checkpoint_exits_5_naming_the_file(cli: Callable[..., Any], tmp_path: Path, name: str,
                                                    text: str) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / name).write_text(text)
    result = cli("tail", "--databases", "none_such")
    assert result.exit_code == ExitCode.POSITION, result.output
    assert f"{tmp_path / 'state' / name} is corrupt" in " ".join(result.output.split())
    assert (tmp_path / "state" / name).read_text() == text  # left as it was, for a person to look at


def test_unfinished_snapshot_refuses(cli: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "snapshot.json").write_text(json.dumps({"version": 1, "status": "running"}))
    result = cli("tail")
    assert result.exit_code == ExitCode.POSITION
    assert "status 'running', not 'done'" in result.output


def test_snapshot_handover_is_the_first_start(cli: Callable[..., Any], mariadb: MariaDB, fresh_db: str,
                                              tmp_path: Path) -> None:
    file, pos = mariadb.binlog_position()
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (7)")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "snapshot.json").write_text(json.dumps(
        {"version": 1, "status": "done", "handover": {"file": file, "pos": pos, "gtid": None}}))
    result = cli("tail", "--databases", fresh_db)
    assert result.exit_code == 0, result.output
    assert [line["op"] for line in changelog_lines(tmp_path / "state")] == ["ddl", "c"]


def test_foreign_checkpoint_refuses_and_rebase_without_a_gtid_state_too(cli: Callable[..., Any], mariadb: MariaDB,
                                                                         tmp_path: Path) -> None:
    file, pos = mariadb.binlog_position()
    (tmp_path / "state").mkdir()
    checkpoint = {"version": 1, "file": file, "pos": pos, "gtid": None, "last_segment": None,
                  "server_uuid": "mariadb-0123456789abcdef0123456789abcdef"}
    (tmp_path / "state" / "tail.json").write_text(json.dumps(checkpoint))
    refused = cli("tail", "--databases", "none_such")
    assert refused.exit_code == ExitCode.POSITION
    assert "was written against server mariadb-0123456789abcdef0123456789abcdef" in refused.output
    assert "--rebase" in refused.output
    # Without the GTIDs cdc captured there is no telling where to go on: the old file:pos is never applied.
    rebased = cli("tail", "--databases", "none_such", "--rebase")
    assert rebased.exit_code == ExitCode.POSITION, rebased.output
    assert "has no GTID state" in " ".join(rebased.output.split())
    assert json.loads((tmp_path / "state" / "tail.json").read_text()) == checkpoint
    assert not (tmp_path / "state" / "server.json").exists()


def test_start_flag_with_a_checkpoint_is_refused(cli: Callable[..., Any], mariadb: MariaDB) -> None:
    assert cli("tail", "--from-now", "--databases", "none_such").exit_code == 0
    result = cli("tail", "--from-now", "--databases", "none_such")
    assert result.exit_code == ExitCode.USAGE
    assert "tail already has a checkpoint" in result.output


def test_purged_position_exits_5_with_the_fix(cli: Callable[..., Any], mariadb_factory: Callable[..., MariaDB],
                                              tmp_path: Path) -> None:
    server = mariadb_factory()
    start = binlog_start(server)
    server.execute("FLUSH BINARY LOGS")
    server.execute("FLUSH BINARY LOGS")
    file, _ = server.binlog_position()
    server.purge_binlogs_to(file)
    # Given on the command line (checked against SHOW BINARY LOGS), and from a checkpoint (refused by the server's
    # binlog dump): both name the file, the position and the retention fix.
    first = cli("tail", "--start-position", start, server=server)
    assert not (tmp_path / "state").exists()  # a failed first run leaves no state directory behind
    name, pos = start.rsplit(":", 1)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "tail.json").write_text(json.dumps(
        {"version": 1, "file": name, "pos": int(pos), "gtid": None, "last_segment": None, "server_uuid": None}))
    resumed = cli("tail", server=server)
    for result in (first, resumed):
        assert result.exit_code == ExitCode.POSITION, result.output
        text = " ".join(result.output.split())
        assert f"cannot send the binlog from {start}" in text
        assert "raise retention (`cdc set-retention`)" in text


def test_duplicate_server_id_stops_without_a_reconnect_loop(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    first = spawn_tail(mariadb, tmp_path / "a", "--follow", "--databases", fresh_db, "--start-position", start,
                       "--server-id", "4242")
    time.sleep(2)
    second = spawn_tail(mariadb, tmp_path / "b", "--follow", "--databases", fresh_db, "--start-position", start,
                        "--server-id", "4242")
    try:
        _, err = first.communicate(timeout=20)
        assert first.returncode == ExitCode.FAILURE
        text = " ".join(err.decode().split())
        assert "with our server_id 4242, and the server dropped us" in text
        assert "give each reader its own --server-id" in text
        assert second.poll() is None  # the newer reader keeps reading
    finally:
        second.terminate()
        second.communicate(timeout=20)


def test_frozen_server_is_detected_and_survived_or_given_up(mariadb_factory: Callable[..., MariaDB], tmp_path: Path) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE f")
    server.execute("CREATE TABLE f.t (id INT PRIMARY KEY)")
    start = binlog_start(server)
    argv = ["--follow", "--databases", "f", "--start-position", start, "--read-timeout", "2",
            "--reconnect-timeout", "6", "--flush-interval", "0.2"]
    env = env_for(server, CDC_MYSQL_CONNECT_TIMEOUT="1")
    proc = subprocess.Popen([*_cdc_tail(tmp_path), *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        # Frozen only once tail streams: its first connection is not retried (a server hung at start is exit 10
        # after connect_timeout), and on a loaded machine the start alone can take seconds.
        deadline = time.monotonic() + 60
        while not (tmp_path / "server.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        server.freeze()
        time.sleep(4)  # detected after ~2 s of silence, retried
        server.thaw()
        server.execute("INSERT INTO f.t VALUES (1)")
        wait_until(lambda: bool(changelog_lines(tmp_path)) or proc.poll() is not None, timeout=30)
        assert proc.poll() is None
        assert [line["key"] for line in changelog_lines(tmp_path)] == [{"id": 1}]
        server.freeze()
        _, err = proc.communicate(timeout=30)
    finally:
        server.thaw()
        if proc.poll() is None:
            proc.kill()
    text = " ".join(err.decode().split())
    assert proc.returncode == ExitCode.TRANSIENT
    assert "reconnecting at" in text and "gave up after 6s of retries" in text
    assert [line["key"] for line in changelog_lines(tmp_path)] == [{"id": 1}]  # and nothing twice until the end


def _cdc_tail(state: Path) -> list[str]:
    import sys

    return [sys.executable, "-m", "cdc", "tail", "--state-dir", str(state)]


def test_rotation_and_server_restart_are_followed(mariadb_factory: Callable[..., MariaDB], tmp_path: Path) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE r")
    server.execute("CREATE TABLE r.t (id INT PRIMARY KEY)")
    start = binlog_start(server)
    proc = subprocess.Popen([*_cdc_tail(tmp_path / "follow"), "--follow", "--databases", "r", "--start-position", start,
                             "--read-timeout", "2", "--flush-interval", "0.2"], cwd=ROOT, env=env_for(server),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        server.execute("INSERT INTO r.t VALUES (1)")
        server.execute("FLUSH BINARY LOGS")
        server.execute("INSERT INTO r.t VALUES (2)")
        deadline = time.monotonic() + 20
        while len(changelog_lines(tmp_path / "follow")) < 2:  # started and caught up before the restart
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        server.restart()
        server.execute("INSERT INTO r.t VALUES (3)")
        wait_until(lambda: len(changelog_lines(tmp_path / "follow")) >= 3 or proc.poll() is not None, timeout=30)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err.decode()
    lines = changelog_lines(tmp_path / "follow")
    assert [line["key"]["id"] for line in lines] == [1, 2, 3]
    assert len({line["src"]["file"] for line in lines}) == 3  # rotated by FLUSH, then by the restart
    assert "reconnecting at" in err.decode()


def test_start_inside_a_transaction_is_refused(cli: Callable[..., Any], mariadb: MariaDB, fresh_db: str,
                                               tmp_path: Path) -> None:
    """A position at the second statement of a transaction would record half of it: stop, never write a partial one."""
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    file, _ = mariadb.binlog_position()
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
        cur.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2)")
        cur.execute("COMMIT")
    maps = [int(e[1]) for e in mariadb.execute(f"SHOW BINLOG EVENTS IN '{file}'") if e[2] == "Table_map"]
    inside = f"{file}:{maps[-1]}"  # the second INSERT's table map
    result = cli("tail", "--databases", fresh_db, "--start-position", inside)
    assert result.exit_code == ExitCode.FAILURE, result.output
    assert f"table map at {inside} outside a transaction" in " ".join(result.output.split())
    changelog = tmp_path / "state" / "changelog"
    assert not changelog.exists() or changelog_lines(tmp_path / "state") == []


@pytest.mark.parametrize("where", ["mid-event", "beyond-the-end"])
def test_a_position_that_is_no_event_start_is_not_called_purged(cli: Callable[..., Any], mariadb: MariaDB,
                                                                fresh_db: str, where: str) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    file, pos = mariadb.binlog_position()
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    bad = f"{file}:{pos + 5 if where == 'mid-event' else pos + 10_000_000}"
    result = cli("tail", "--databases", fresh_db, "--start-position", bad)
    text = " ".join(result.output.split())
    assert result.exit_code == ExitCode.POSITION, result.output
    assert f"cannot send the binlog from {bad}" in text
    assert "purged" not in text and "SHOW BINLOG EVENTS" in text
