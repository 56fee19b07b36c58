"""`[mysql] hosts`: `cdc tail --follow` moves to the promoted replica by itself, after a kill -9 failover and a
planned switchover, through the real CLI (issue #27).

The change log, replayed in position order, must equal SELECT * of the new primary; every transaction is
captured from one server only (nothing doubled). An unrelated server in the list is refused (exit 5).
The same failover through `cdc run --follow` and every stage down to Snowflake: tests/pipeline/test_failover.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from cdc.errors import ExitCode
from tests.capture.conftest import ROOT, env_for
from tests.capture.test_tail_rebase import (
    Writer,
    a_stranger,
    checkpoint,
    lines_in_order,
    primary_and_replica,
    snapshot_after_writes,
    state_files,
)
from tests.capture.workload import create_all_types_table, expected_rows, replay, run_workload
from tests.rig import MariaDB
from tests.rig._process import stop_process, wait_until
from tests.rig.faultproxy import FaultProxy

DB = "shop"


@pytest.fixture
def topology(mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Any],
             tmp_path: Path) -> dict[str, Any]:
    """A primary with a read-only GTID replica (as replicas run in production), a snapshot of `shop` taken on the
    primary, and a cdc.toml that lists both servers."""
    primary, replica = primary_and_replica(mariadb_factory, **{"read-only": 1})
    state = tmp_path / "state"
    snapshot_after_writes(primary, DB, cli, state)
    config = write_config(tmp_path, primary, replica)
    return {"primary": primary, "replica": replica, "state": state, "config": config}


def write_config(tmp_path: Path, *servers: MariaDB) -> Path:
    config = tmp_path / "cdc.toml"
    listed = ", ".join(f'"{s.host}:{s.port}"' for s in servers)
    config.write_text(f"[mysql]\nhosts = [{listed}]\ndatabases = [\"{DB}\"]\n")
    return config


def spawn_follow(server: MariaDB, state: Path, config: Path) -> subprocess.Popen[bytes]:
    """`cdc tail --follow` as a user runs it, configured by cdc.toml's hosts (CDC_MYSQL_HOST names `server`)."""
    argv = [sys.executable, "-m", "cdc", "tail", "--follow", "--config", str(config), "--state-dir", str(state),
            "--flush-interval", "0.2", "--read-timeout", "4"]
    return subprocess.Popen(argv, cwd=ROOT, env=env_for(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_captured(state: Path, server: MariaDB, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    """Until tail's checkpoint holds every transaction of `server`'s binlog."""
    def caught_up() -> bool:
        assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
        return (state / "tail.json").exists() and checkpoint(state)["gtid_state"] == server.variable("gtid_binlog_pos")
    assert wait_until(caught_up, timeout, interval=0.2), checkpoint(state)


def stop_follow(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    return " ".join(err.decode().split())


def assert_exact(state: Path, new_primary: MariaDB, old_lines: int) -> None:
    lines = lines_in_order(state)
    files: dict[str, set[str]] = {}
    for line in lines:  # a transaction read twice (from both servers) would have lines in two binlog files
        files.setdefault(line["src"]["gtid"], set()).add(line["position"].split(":")[0])
    assert all(len(found) == 1 for found in files.values()), {g: f for g, f in files.items() if len(f) > 1}
    assert len(lines) > old_lines and any(line["src"]["server_id"] == 2 for line in lines[old_lines:])
    assert checkpoint(state)["gtid_state"] == new_primary.variable("gtid_binlog_pos")
    with new_primary.connect() as conn:
        assert replay(lines, DB, "all_types") == expected_rows(conn, DB, "all_types")


def test_follow_moves_to_the_promoted_replica_after_a_kill_9_mid_workload(topology: dict[str, Any]) -> None:
    primary, replica, state = topology["primary"], topology["replica"], topology["state"]
    proc = spawn_follow(primary, state, topology["config"])
    try:
        writer = Writer(primary, DB, seed=5, first_key=10_000)
        writer.start()
        assert wait_until(lambda: (state / "tail.json").exists() and len(lines_in_order(state)) > 300, 120, 0.2)
        # Tail frozen, the replica gets everything tail can have read; then the primary dies mid-workload.
        proc.send_signal(signal.SIGSTOP)
        replica.wait_for_gtids(str(primary.variable("gtid_binlog_pos")))
        primary.kill()
        writer.join(timeout=30)
        assert writer.ended is not None
        replica.promote()
        proc.send_signal(signal.SIGCONT)
        with replica.connect() as conn:
            run_workload(conn, DB, seed=9, transactions=40, first_key=50_000)
        old_lines = sum(1 for line in lines_in_order(state) if line["src"]["server_id"] == 1)
        wait_captured(state, replica, proc)
        err = stop_follow(proc)
    finally:
        stop_process(proc)
    assert f"tail moves from {primary.host}:{primary.port} to {replica.host}:{replica.port}" in err, err[-2000:]
    assert "rebased onto" in err
    assert_exact(state, replica, old_lines)


def test_follow_moves_to_the_new_primary_of_a_planned_switchover(topology: dict[str, Any]) -> None:
    primary, replica, state = topology["primary"], topology["replica"], topology["state"]
    proc = spawn_follow(primary, state, topology["config"])
    try:
        with primary.connect() as conn:
            run_workload(conn, DB, seed=5, transactions=60, first_key=10_000)
        wait_captured(state, primary, proc)
        # The switchover: writes stop on the old primary (read-only, still up), the replica catches up and is
        # promoted, the writes go on there. Tail's stream from the old primary stays open and silent.
        primary.execute("SET GLOBAL read_only = 1")
        replica.wait_for_gtids(str(primary.variable("gtid_binlog_pos")))
        replica.promote()
        with replica.connect() as conn:
            run_workload(conn, DB, seed=9, transactions=40, first_key=50_000)
        wait_captured(state, replica, proc)
        with replica.connect() as conn:  # and it stays there
            run_workload(conn, DB, seed=11, transactions=20, first_key=80_000)
        wait_captured(state, replica, proc)
        err = stop_follow(proc)
    finally:
        stop_process(proc)
    assert f"tail moves from {primary.host}:{primary.port} to {replica.host}:{replica.port}" in err, err[-2000:]
    old_lines = sum(1 for line in lines_in_order(state) if line["src"]["server_id"] == 1)
    assert old_lines > 0
    assert_exact(state, replica, old_lines)


def test_a_config_change_to_the_promoted_replica_resumes_without_rebase(
        topology: dict[str, Any], cli: Callable[..., Any], tmp_path: Path) -> None:
    primary, replica, state = topology["primary"], topology["replica"], topology["state"]
    with primary.connect() as conn:
        run_workload(conn, DB, seed=5, transactions=30, first_key=10_000)
    assert cli("tail", "--until-now", "--databases", DB, server=primary, state=state).exit_code == 0
    old_lines = len(lines_in_order(state))
    replica.wait_for_gtids(checkpoint(state)["gtid_state"])
    primary.kill()
    replica.promote()
    with replica.connect() as conn:
        run_workload(conn, DB, seed=9, transactions=30, first_key=50_000)
    config = write_config(tmp_path, replica)  # the operator points cdc.toml at the new primary, and restarts
    result = cli("tail", "--until-now", "--config", str(config), server=replica, state=state)
    assert result.exit_code == 0, result.output
    assert_exact(state, replica, old_lines)


def test_hosts_still_refuse_an_unrelated_server(
        topology: dict[str, Any], cli: Callable[..., Any], mariadb_factory: Callable[..., MariaDB],
        tmp_path: Path) -> None:
    primary, state = topology["primary"], topology["state"]
    assert cli("tail", "--until-now", "--databases", DB, server=primary, state=state).exit_code == 0
    stranger = a_stranger(mariadb_factory, DB)
    primary.kill()
    before = state_files(state)
    config = write_config(tmp_path, primary, stranger)
    result = cli("tail", "--until-now", "--config", str(config), server=primary, state=state)
    assert result.exit_code == ExitCode.POSITION, result.output
    assert "not a replica of it" in " ".join(result.output.split())
    assert state_files(state) == before


def fail_over(primary: MariaDB, replica: MariaDB, state: Path, proc: subprocess.Popen[bytes],
              then: Callable[[], None] = lambda: None) -> None:
    """Writes tail captures from the primary; the replica has them; the primary killed, the replica promoted
    (`then`: what else the failover does), writes on it until tail has captured them too."""
    with primary.connect() as conn:
        run_workload(conn, DB, seed=5, transactions=40, first_key=10_000)
    wait_captured(state, primary, proc)
    replica.wait_for_gtids(str(primary.variable("gtid_binlog_pos")))
    primary.kill()
    replica.promote()
    then()
    with replica.connect() as conn:
        run_workload(conn, DB, seed=9, transactions=40, first_key=50_000)
    wait_captured(state, replica, proc)


def test_follow_through_an_endpoint_that_moves_to_the_promoted_replica(topology: dict[str, Any],
                                                                        tmp_path: Path) -> None:
    primary, replica, state = topology["primary"], topology["replica"], topology["state"]
    with FaultProxy(primary.host, primary.port) as endpoint:  # one address for the topology, as RDS gives
        config = tmp_path / "endpoint.toml"
        config.write_text(f'[mysql]\nhosts = ["{endpoint.address}"]\ndatabases = ["{DB}"]\n')
        proc = spawn_follow(primary, state, config)
        try:
            fail_over(primary, replica, state, proc, then=lambda: endpoint.retarget(replica.host, replica.port))
            err = stop_follow(proc)
        finally:
            stop_process(proc)
    assert f"another server answers at 127.0.0.1:{endpoint.port} now" in err, err[-2000:]
    old_lines = sum(1 for line in lines_in_order(state) if line["src"]["server_id"] == 1)
    assert_exact(state, replica, old_lines)


def test_without_hosts_another_server_behind_the_address_stops_tail(topology: dict[str, Any], tmp_path: Path) -> None:
    """The same endpoint moved without `hosts`: tail stops (exit 5) rather than read the new server at the old
    file:pos, and says how to go on."""
    primary, replica, state = topology["primary"], topology["replica"], topology["state"]
    config = tmp_path / "plain.toml"
    config.write_text(f'[mysql]\ndatabases = ["{DB}"]\n')
    with FaultProxy(primary.host, primary.port) as endpoint:
        proc = spawn_follow(cast(MariaDB, endpoint), state, config)  # CDC_MYSQL_HOST/PORT: the endpoint's
        try:
            with primary.connect() as conn:
                run_workload(conn, DB, seed=5, transactions=20, first_key=10_000)
            wait_captured(state, primary, proc)
            before = state_files(state)
            replica.wait_for_gtids(str(primary.variable("gtid_binlog_pos")))
            primary.kill()
            replica.promote()
            endpoint.retarget(replica.host, replica.port)
            _, err = proc.communicate(timeout=90)
        finally:
            stop_process(proc)
    text = " ".join(err.decode().split())
    assert proc.returncode == ExitCode.POSITION, text[-2000:]
    assert f"another server answers at 127.0.0.1:{endpoint.port}" in text and "--rebase" in text
    assert state_files(state) == before
