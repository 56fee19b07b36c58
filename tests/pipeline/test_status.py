"""`cdc status` on hand-made state directories, against the session MariaDB and a server of its own for the runway."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc.pipeline.probe import BinlogFile, ServerView, bytes_behind
from cdc.state import StateDir
from tests.pipeline.cli import run
from tests.pipeline.conftest import BINLOG, change, checkpoint, sealed_batch, write_segments
from tests.rig import MariaDB


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
