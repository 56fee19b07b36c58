"""`cdc tail --rebase` after a failover: a real primary and a GTID replica, the primary killed mid-workload.

The change log, replayed in position order, must equal SELECT * of the new primary: nothing lost, nothing twice.
Every refusal (an unrelated server, a replica missing transactions cdc captured) exits 5 and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from cdc.capture import Filters, TailOptions, run_tail
from cdc.errors import ExitCode
from tests.capture.conftest import changelog_lines, settings_for
from tests.capture.workload import create_all_types_table, expected_rows, replay, run_workload
from tests.rig import MariaDB

GTID_SERVER = {"gtid-strict-mode": 1, "log-slave-updates": 1}


def primary_and_replica(mariadb_factory: Callable[..., MariaDB], **replica_options: Any) -> tuple[MariaDB, MariaDB]:
    """A primary (server_id 1) ahead by a few binlog files, and its GTID replica (server_id 2)."""
    primary = mariadb_factory({**GTID_SERVER, "server-id": 1})
    replica = mariadb_factory({**GTID_SERVER, "server-id": 2, **replica_options})
    for _ in range(4):  # the replica's binlog numbers start lower, as after a failover in production
        primary.execute("FLUSH BINARY LOGS")
    replica.replicate_from(primary)
    return primary, replica


def snapshot_after_writes(primary: MariaDB, db: str, cli: Callable[..., Any], state: Path) -> None:
    """`db`.all_types with 40 transactions of the workload, then `cdc snapshot` of it into `state`."""
    primary.execute(f"CREATE DATABASE {db}")
    with primary.connect() as conn:
        create_all_types_table(conn, db)
        run_workload(conn, db, seed=3, transactions=40)
    assert cli("snapshot", "--databases", db, server=primary, state=state).exit_code == 0


@pytest.fixture
def topology(mariadb_factory: Callable[..., MariaDB]) -> tuple[MariaDB, MariaDB]:
    return primary_and_replica(mariadb_factory)


def state_files(state: Path) -> dict[str, str]:
    """Every file of a state directory (but lock files and the last error recorded for `cdc status`) with a digest
    of its bytes."""
    return {str(p.relative_to(state)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(state.rglob("*")) if p.is_file() and not {"locks", "errors"} & set(p.parts)}


def checkpoint(state: Path) -> dict[str, Any]:
    return dict(json.loads((state / "tail.json").read_text()))


class Writer(threading.Thread):
    """The workload on a server until it dies under it (kill -9): the error is the expected end."""

    def __init__(self, server: MariaDB, db: str, seed: int, first_key: int) -> None:
        super().__init__(daemon=True)
        self.server, self.db, self.seed, self.first_key = server, db, seed, first_key
        self.ended: BaseException | None = None

    def run(self) -> None:
        try:
            with self.server.connect() as conn:
                run_workload(conn, self.db, seed=self.seed, transactions=100_000, first_key=self.first_key)
        except pymysql.err.MySQLError as exc:
            self.ended = exc


def rebase_check(cli: Callable[..., Any], server: MariaDB, state: Path) -> dict[str, Any]:
    """What `cdc check-binlog` says, before any rebase, about going on at `server` with this state directory."""
    result = cli("check-binlog", "--json", server=server, state=state)
    return next(check for check in json.loads(result.stdout)["checks"] if check["name"] == "rebase")


def lines_in_order(state: Path) -> list[dict[str, Any]]:
    """The change log in file order; it must already be in position order, each position once."""
    lines = changelog_lines(state)
    positions = [line["position"] for line in lines]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    return lines


@pytest.fixture
def captured(topology: tuple[MariaDB, MariaDB], cli: Callable[..., Any], tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Snapshot + tail on the primary while it takes writes; the replica has everything tail captured."""
    primary, replica = topology
    db, state = "shop", tmp_path / "state"
    snapshot_after_writes(primary, db, cli, state)
    yield {"primary": primary, "replica": replica, "db": db, "state": state}


def test_rebase_after_a_kill_9_failover_loses_nothing_and_doubles_nothing(
        captured: dict[str, Any], cli: Callable[..., Any]) -> None:
    primary, replica, db, state = captured["primary"], captured["replica"], captured["db"], captured["state"]
    writer = Writer(primary, db, seed=5, first_key=10_000)
    writer.start()
    for _ in range(2):
        result = cli("tail", "--until-now", "--databases", db, server=primary, state=state)
        assert result.exit_code == 0, result.output
    old = checkpoint(state)
    assert old["gtid_state"], old
    replica.wait_for_gtids(old["gtid_state"])  # the replica has what tail captured, and goes on receiving
    primary.kill()  # mid-workload: transactions after the checkpoint, replicated or not, are the new truth
    writer.join(timeout=30)
    assert writer.ended is not None
    replica.promote()
    with replica.connect() as conn:
        run_workload(conn, db, seed=9, transactions=40, first_key=50_000)
    new_file = replica.binlog_position()[0]
    assert int(new_file.rsplit(".", 1)[1]) < int(old["file"].rsplit(".", 1)[1])  # numbers went down

    before, old_lines = state_files(state), lines_in_order(state)
    assert rebase_check(cli, replica, state)["status"] == "ok"
    refused = cli("tail", "--until-now", "--databases", db, server=replica, state=state)
    assert refused.exit_code == ExitCode.POSITION and "--rebase" in refused.output, refused.output
    assert state_files(state) == before

    rebased = cli("tail", "--until-now", "--databases", db, "--rebase", server=replica, state=state)
    assert rebased.exit_code == 0, rebased.output
    with replica.connect() as conn:  # and it goes on from there, on the new server, without --rebase
        run_workload(conn, db, seed=11, transactions=20, first_key=80_000)
    assert cli("tail", "--until-now", "--databases", db, server=replica, state=state).exit_code == 0

    new = checkpoint(state)
    assert new["file"].startswith("mariadb-bin.") and new["seq_offset"] > 0
    assert new["gtid_state"] == replica.variable("gtid_binlog_pos")
    lines = lines_in_order(state)
    assert lines[:len(old_lines)] == old_lines  # what was captured on the new server sorts after all of it
    assert any(line["src"]["server_id"] == 2 for line in lines[len(old_lines):])
    with replica.connect() as conn:
        assert replay(lines, db, "all_types") == expected_rows(conn, db, "all_types")


def test_rebase_refuses_a_replica_that_lacks_captured_transactions(
        captured: dict[str, Any], cli: Callable[..., Any]) -> None:
    primary, replica, db, state = captured["primary"], captured["replica"], captured["db"], captured["state"]
    replica.wait_for_gtids(str(primary.variable("gtid_binlog_pos")))
    replica.execute("STOP SLAVE")  # replication breaks: what tail reads next never reaches the replica
    with primary.connect() as conn:
        run_workload(conn, db, seed=5, transactions=10, first_key=10_000)
    assert cli("tail", "--until-now", "--databases", db, server=primary, state=state).exit_code == 0
    primary.kill()
    replica.promote()
    before = state_files(state)
    check = rebase_check(cli, replica, state)
    assert check["status"] == "fail" and "this server lacks domain 0 seq" in check["value"], check
    result = cli("tail", "--until-now", "--databases", db, "--rebase", server=replica, state=state)
    assert result.exit_code == ExitCode.POSITION, result.output
    text = " ".join(result.output.split())
    assert "does not have every transaction cdc already captured: domain 0 seq" in text
    assert "new `cdc snapshot`" in text
    assert state_files(state) == before


def test_rebase_refuses_an_unrelated_server_whose_gtids_look_alike(
        captured: dict[str, Any], cli: Callable[..., Any], mariadb_factory: Callable[..., MariaDB]) -> None:
    primary, db, state = captured["primary"], captured["db"], captured["state"]
    assert cli("tail", "--until-now", "--databases", db, server=primary, state=state).exit_code == 0
    stranger = a_stranger(mariadb_factory, db)
    mine = checkpoint(state)["gtid"]
    assert int(str(stranger.variable("gtid_binlog_pos")).split("-")[2]) >= int(mine.split("-")[2])
    before = state_files(state)
    result = cli("tail", "--until-now", "--databases", db, "--rebase", server=stranger, state=state)
    assert result.exit_code == ExitCode.POSITION, result.output
    assert "not a replica of it" in " ".join(result.output.split())
    assert state_files(state) == before


def a_stranger(mariadb_factory: Callable[..., MariaDB], db: str) -> MariaDB:
    """An unrelated server with the same server_id and domain (GTIDs 0-1-N too) and the same table, more written."""
    stranger = mariadb_factory({**GTID_SERVER, "server-id": 1})
    stranger.execute(f"CREATE DATABASE {db}")
    with stranger.connect() as conn:
        create_all_types_table(conn, db)
        run_workload(conn, db, seed=3, transactions=80)
    return stranger


def fail_over_after_a_replica_s_own_writes(captured: dict[str, Any], cli: Callable[..., Any]) -> None:
    """The replica writes in a GTID domain of its own, then receives more of the primary's transactions, which
    tail captures; then the primary dies. On the replica the captured transactions follow its own writes."""
    primary, replica, db, state = captured["primary"], captured["replica"], captured["db"], captured["state"]
    primary.execute(f"CREATE TABLE `{db}`.notes (id INT PRIMARY KEY, note VARCHAR(50))")
    primary.execute(f"INSERT INTO `{db}`.notes VALUES (1, 'from the primary'), (2, 'x')")
    replica.wait_for_gtids(str(primary.variable("gtid_binlog_pos")))
    # Domains are independent by MariaDB's rule (parallel replication relies on it), so the replica's own
    # writes touch data no other domain does.
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION gtid_domain_id = 7")
        cur.execute(f"INSERT INTO `{db}`.notes VALUES (3, 'the replica''s own')")
        cur.execute(f"UPDATE `{db}`.notes SET note = 'changed on the replica' WHERE id = 2")
    with primary.connect() as conn:
        run_workload(conn, db, seed=5, transactions=15, first_key=10_000)
    assert cli("tail", "--until-now", "--databases", db, server=primary, state=state).exit_code == 0
    replica.wait_for_gtids(checkpoint(state)["gtid_state"])
    primary.kill()
    replica.promote()


def assert_exact(captured: dict[str, Any]) -> None:
    replica, db, state = captured["replica"], captured["db"], captured["state"]
    assert checkpoint(state)["gtid_state"] == replica.variable("gtid_binlog_pos")
    assert "skip_gtids" not in checkpoint(state)  # every captured transaction after the resume point was passed
    lines = lines_in_order(state)
    with replica.connect() as conn:
        for table in ("all_types", "notes"):
            assert replay(lines, db, table) == expected_rows(conn, db, table), table


def test_rebase_reads_the_replica_s_own_domain_and_skips_what_was_captured_after_it(
        captured: dict[str, Any], cli: Callable[..., Any]) -> None:
    fail_over_after_a_replica_s_own_writes(captured, cli)
    rebased = cli("tail", "--until-now", "--databases", captured["db"], "--rebase", "--json",
                  server=captured["replica"], state=captured["state"])
    assert rebased.exit_code == 0, rebased.output
    summary = json.loads(rebased.stdout.splitlines()[-1])
    # Only the two domain-7 transactions are new; the captured ones after them were skipped, not written twice.
    assert summary["origin"] == "rebase (checkpoint)" and summary["transactions"] == 2, summary
    assert "captured transaction(s) further on are skipped" in summary["notes"][0]
    assert_exact(captured)


def test_a_rebase_stopped_among_the_transactions_to_skip_resumes_skipping_them(
        captured: dict[str, Any], cli: Callable[..., Any]) -> None:
    fail_over_after_a_replica_s_own_writes(captured, cli)
    replica, db, state = captured["replica"], captured["db"], captured["state"]
    events = [0]

    def stop_midway() -> bool:  # asked before every event: past the domain-7 writes, inside the captured ones
        events[0] += 1
        return events[0] > 60

    options = TailOptions(rebase=True, filters=Filters(databases=(db,)), decode_workers=0)
    assert run_tail(settings_for(replica, state), options, should_stop=stop_midway).stopped == "stopped by signal"
    left = checkpoint(state)["skip_gtids"]
    assert left and checkpoint(state)["seq_offset"] > 0  # persisted with the position they lie ahead of
    resumed = run_tail(settings_for(replica, state), TailOptions(filters=Filters(databases=(db,))))
    assert resumed.transactions == 0 and resumed.origin == "checkpoint"
    assert_exact(captured)


def test_rebase_without_binlog_monitor_names_the_grant_and_writes_nothing(
        captured: dict[str, Any], cli: Callable[..., Any]) -> None:
    primary, replica, db, state = captured["primary"], captured["replica"], captured["db"], captured["state"]
    assert cli("tail", "--until-now", "--databases", db, server=primary, state=state).exit_code == 0
    replica.wait_for_gtids(checkpoint(state)["gtid_state"])
    primary.kill()
    replica.promote()
    replica.create_user("cdc_weak", "", ("REPLICATION SLAVE", "SELECT"))  # no BINLOG MONITOR: no SHOW BINLOG EVENTS
    before = state_files(state)
    result = cli("tail", "--until-now", "--databases", db, "--rebase", "-u", "cdc_weak", server=replica, state=state)
    assert result.exit_code == ExitCode.PRECONDITION, result.output
    assert "GRANT BINLOG MONITOR ON *.* TO" in " ".join(result.output.split())
    assert state_files(state) == before


def test_a_checkpoint_without_server_uuid_belongs_to_the_server_of_server_json(tmp_path: Path) -> None:
    from cdc.capture.start import StartRequest, resolve_start
    from cdc.state import ServerIdentity, StateDir

    state = StateDir(tmp_path).ensure()
    state.bind_server(ServerIdentity("mariadb-old", 1, "mariadb", "10.11.19-MariaDB"))
    (tmp_path / "tail.json").write_text(json.dumps({"version": 1, "file": "mariadb-bin.000005", "pos": 4,
                                                    "gtid": "0-1-9", "last_segment": None, "server_uuid": None}))
    start = resolve_start(state, StartRequest(), None, "mariadb-new", rebase=True)  # type: ignore[arg-type]
    assert start.foreign  # so --rebase goes through the GTID checks instead of adopting the old file:pos
    assert not resolve_start(state, StartRequest(), None, "mariadb-old", rebase=True).foreign  # type: ignore[arg-type]
