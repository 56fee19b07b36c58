"""`cdc check-binlog` as a user runs it: exit codes, the table, --json, read-only state dir, bad credentials."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from tests.commands.conftest import flat, server_args
from tests.rig import MariaDB

# option overrides -> the checks that fail, and the fix the first of them names
BAD_SERVERS = {
    "binlog off": ({"skip-log-bin": True}, ["log_bin", "binlog_files", "binlog_position"], "add log_bin=mariadb-bin"),
    "statement": ({"binlog-format": "STATEMENT"}, ["binlog_format"],
                  "SET GLOBAL binlog_format = 'ROW'; and add binlog_format=ROW under [mysqld]"),
    "minimal": ({"binlog-row-image": "MINIMAL"}, ["binlog_row_image"], "SET GLOBAL binlog_row_image = 'FULL';"),
    "no_log": ({"binlog-row-metadata": "NO_LOG"}, ["binlog_row_metadata"], "SET GLOBAL binlog_row_metadata = 'FULL';"),
}
# A configured reader id: a tail test elsewhere in the session may hold the derived one.
READER_ID = ["--server-id", "777003"]


@pytest.mark.parametrize("case", list(BAD_SERVERS))
def test_misconfigured_server_exits_4_and_names_the_fix(
    case: str, mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result]
) -> None:
    options, failures, fix = BAD_SERVERS[case]
    db = mariadb_factory(options)
    as_json = cli("check-binlog", "--json", *server_args(db))
    assert as_json.exit_code == 4, as_json.output
    report = json.loads(as_json.stdout)
    bad = [c for c in report["checks"] if c["status"] == "fail"]
    assert report["ok"] is False
    assert [c["name"] for c in bad] == failures
    assert bad[0]["fix"].startswith(fix)
    assert all(set(c) == {"name", "status", "value", "expected", "fix"} for c in report["checks"])
    assert all(c["fix"] for c in bad)  # every failure names its fix, not only the first
    human = cli("check-binlog", *server_args(db), env={"COLUMNS": "400"})  # wide enough that no cell wraps mid-word
    assert human.exit_code == 4
    assert human.stdout.count("FAIL") == len(failures)
    assert f"{len(failures)} failed" in flat(human.stderr)
    # The table carries the same verdict and the same fix as --json, check by check.
    assert table_rows(human.stdout) == {c["name"]: (c["status"].upper(), c["fix"] or "") for c in report["checks"]}


def table_rows(text: str) -> dict[str, tuple[str, str]]:
    """check name -> (status, fix) from the rich table (a long fix continues on rows with an empty name)."""
    rows: dict[str, tuple[str, str]] = {}
    name = ""
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if cells[0]:
            name = cells[0]
            rows[name] = (cells[1], cells[4])
        else:
            status, fix = rows[name]
            rows[name] = (status, " ".join(part for part in (fix, cells[4]) if part))
    return rows


def test_ready_server_exits_0_and_strict_fails_on_warnings(
    mariadb: MariaDB, fresh_db: str, cli: Callable[..., Result]
) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.loose (a INT)")
    args = [*server_args(mariadb), *READER_ID, "--databases", fresh_db]
    result = cli("check-binlog", *args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert report["ok"] is True and statuses["primary_keys"] == "warn"
    assert {s for n, s in statuses.items() if n != "primary_keys"} == {"ok"}
    assert report["server"]["flavour"] == "mariadb" and report["server"]["server_id"] == 1
    strict = cli("check-binlog", *args, "--strict")
    assert strict.exit_code == 4
    assert "0 failed, 1 warning(s): not ready (--strict)" in flat(strict.stderr)


def test_state_dir_is_never_written(mariadb: MariaDB, cli: Callable[..., Result], tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    assert cli("check-binlog", *server_args(mariadb), *READER_ID, "--state-dir", str(absent)).exit_code == 0
    assert not absent.exists()
    present = tmp_path / "present"
    present.mkdir()
    result = cli("check-binlog", *server_args(mariadb), *READER_ID, "--state-dir", str(present), "--json")
    names = [c["name"] for c in json.loads(result.stdout)["checks"]]
    assert names[-1] == "state_server"
    assert list(present.iterdir()) == []


def test_wrong_password_exits_1_without_printing_it(mariadb: MariaDB, cli: Callable[..., Result]) -> None:
    mariadb.create_user("cdc_pw_test", "right-Pa55")
    wrong = "wr0ng-Pa55-zz"
    result = cli("check-binlog", "--json", *server_args(mariadb, user="cdc_pw_test"), env={"CDC_MYSQL_PASSWORD": wrong})
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"error: MySQL at {mariadb.host}:{mariadb.port} as user 'cdc_pw_test': access denied" in flat(result.stderr)
    assert wrong not in result.output and "right-Pa55" not in result.output


def test_unreachable_server_exits_10(cli: Callable[..., Result]) -> None:
    from tests.rig._process import free_port

    result = cli("check-binlog", "--host", "127.0.0.1", "--port", str(free_port()))
    assert result.exit_code == 10  # TRANSIENT
    assert "cannot reach MySQL at 127.0.0.1:" in flat(result.stderr)


@pytest.mark.parametrize("columns", [None, "60"])
def test_piped_output_keeps_every_fix_on_one_line(mariadb_factory: Callable[..., MariaDB], tmp_path: Path,
                                                  columns: str | None) -> None:
    """Piped or logged (no terminal, no COLUMNS), a table is as wide as its cells: rich's default of 80 columns folded
    the SQL fixes mid-word. A COLUMNS the user sets is still obeyed."""
    import os
    import subprocess
    import sys

    db = mariadb_factory({"binlog-format": "STATEMENT", "binlog-row-image": "MINIMAL"})
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES") and not k.startswith("CDC_")}
    env |= {"HOME": str(tmp_path)} | ({"COLUMNS": columns} if columns else {})
    argv = [sys.executable, "-m", "cdc", "check-binlog", *server_args(db), *READER_ID]
    shown = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    report = json.loads(subprocess.run([*argv, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path,
                                       timeout=60).stdout)
    assert shown.returncode == 4, shown.stderr
    fixes = [c["fix"] for c in report["checks"] if c["fix"]]
    assert any(len(fix) > 80 for fix in fixes)  # else this test tests nothing
    lines = shown.stdout.splitlines()
    if columns is None:
        missing = [fix for fix in fixes if not any(fix in line for line in lines)]
        assert not missing, "\n".join(lines)
    else:  # rich fits the table to the width it is given (as near as five columns allow)
        assert max(len(line) for line in lines) < 100


def test_primary_keys_are_seen_by_the_least_privilege_reader(mariadb: MariaDB, fresh_db: str,
                                                             replication_user: Any, cli: Callable[..., Result]) -> None:
    """MariaDB shows a user without table grants no TABLE_CONSTRAINTS rows: every table looked keyless (a warning,
    exit 4 with --strict) with README's own grants. A UNIQUE NOT NULL key is not a primary key, but it is the key
    cdc uses for its table (issue #24): that table is named apart, with its key."""
    mariadb.execute("CREATE TABLE keyed (id INT PRIMARY KEY)", database=fresh_db)
    mariadb.execute("CREATE TABLE uniq (id INT NOT NULL, UNIQUE KEY (id))", database=fresh_db)
    mariadb.execute("CREATE TABLE bare (id INT)", database=fresh_db)
    result = cli("check-binlog", "--json", "--databases", fresh_db, *server_args(mariadb, user=replication_user.name),
                 *READER_ID, env={"CDC_MYSQL_PASSWORD": replication_user.password})
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "primary_keys")
    assert (check["status"], check["value"]) == ("warn", f"1 table(s) without a primary key: {fresh_db}.bare; keyed "
                                                         f"by their UNIQUE NOT NULL key instead: {fresh_db}.uniq (id)"), check
    # Tables left out of the capture (mysql.exclude_tables, mysql.tables) are not warned of.
    result = cli("check-binlog", "--json", "--databases", fresh_db, *server_args(mariadb, user=replication_user.name),
                 *READER_ID, env={"CDC_MYSQL_PASSWORD": replication_user.password,
                                  "CDC_MYSQL_EXCLUDE_TABLES": f"{fresh_db}.bare, {fresh_db}.uniq"})
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "primary_keys")
    assert check["status"] == "ok", check


def test_a_captured_database_left_out_of_the_binlog_fails_check_binlog_and_tail(
    mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result], tmp_path: Path
) -> None:
    """binlog-ignore-db / binlog-do-db (start-up options): a captured database's row changes never reach the
    binlog, and tail would report "caught up" with none of them. Refused (exit 4) with the fix; a database the
    filters log passes with a warning (DDL is filtered by the session's default database)."""
    db = mariadb_factory({"binlog-ignore-db": "skip me"})
    for name in ("skip me", "kept"):
        db.execute(f"CREATE DATABASE `{name}`")
        db.execute(f"CREATE TABLE `{name}`.t (id INT PRIMARY KEY)")
    args = [*server_args(db), *READER_ID]

    def verdict(database: str) -> tuple[int, dict[str, Any]]:
        result = cli("check-binlog", *args, "--databases", database, "--json")
        return result.exit_code, next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "binlog_filters")

    code, check = verdict("skip me")
    assert code == 4 and check["status"] == "fail" and check["value"] == "binlog_ignore_db=skip me", check
    assert "leave skip me out of [mysql] databases" in check["fix"]
    code, check = verdict("kept")
    assert code == 0 and check["status"] == "warn" and "default database" in check["fix"], check

    state = tmp_path / "state"
    refused = cli("tail", "--until-now", "--from-now", *args, "--databases", "skip me", "--state-dir", str(state))
    assert refused.exit_code == 4, refused.output
    assert "leaves skip me out of its binlog (binlog_ignore_db=skip me)" in flat(refused.stderr)
    assert not (state / "tail.json").exists()
    db.execute("INSERT INTO `kept`.t VALUES (1)")
    kept = cli("tail", "--until-now", *args, "--databases", "kept", "--state-dir", str(state), "--from-now")
    assert kept.exit_code == 0, kept.output


def test_a_replica_without_log_slave_updates_fails_check_binlog_and_tail(
    mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result], tmp_path: Path
) -> None:
    """MariaDB's default: a replica writes only its own writes to its binlog. A snapshot there is right, and tail
    would then read none of the primary's changes and say "caught up". Refused (exit 4) with the fix, also for
    the least-privilege user, who may not read SHOW SLAVE STATUS (MariaDB's Slave_running tells)."""
    from tests.capture.test_tail_rebase import primary_and_replica

    primary, replica = primary_and_replica(mariadb_factory, **{"log-slave-updates": 0})
    primary.execute("CREATE DATABASE shop")
    primary.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    replica.wait_for_gtids(primary.execute("SELECT @@gtid_binlog_pos")[0][0])
    result = cli("check-binlog", *server_args(replica), *READER_ID, "--databases", "shop", "--json")
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "replica_updates")
    assert result.exit_code == 4 and check["status"] == "fail" and "log_slave_updates=ON" in check["fix"], check

    user = replica.create_replication_user("cdc_least", "pw-least")
    primary.execute("INSERT INTO shop.t VALUES (1)")
    refused = cli("tail", "--until-now", "--from-now", *server_args(replica, user=user.name), *READER_ID, "--databases", "shop",
                  "--state-dir", str(tmp_path / "state"), env={"CDC_MYSQL_PASSWORD": user.password})
    assert refused.exit_code == 4, refused.output
    assert "is a replica that does not write the changes it replicates to its binlog" in flat(refused.stderr)
    assert not (tmp_path / "state" / "tail.json").exists()


def test_check_binlog_warns_of_a_replica_that_skips_a_captured_table(
        mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result]) -> None:
    """A replica whose replicate-* filters skip a captured table holds its own copy of it, not the primary's."""
    from tests.capture.test_tail_rebase import primary_and_replica

    primary, replica = primary_and_replica(mariadb_factory, **{"log-slave-updates": 1,
                                                                "replicate-wild-ignore-table": "shop.secret%"})
    primary.execute("CREATE DATABASE shop")
    primary.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY)")
    primary.execute("CREATE TABLE shop.secrets (id INT PRIMARY KEY)")
    replica.wait_for_gtids(primary.execute("SELECT @@gtid_binlog_pos")[0][0])

    def check(server: MariaDB) -> tuple[int, dict[str, Any]]:
        result = cli("check-binlog", *server_args(server), *READER_ID, "--databases", "shop", "--json")
        return result.exit_code, next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "replica_filters")

    code, verdict = check(replica)
    # The replica never created shop.secrets: only what it has can be named, and its orders are replicated.
    assert code == 0 and verdict["status"] == "ok", verdict
    replica.execute("CREATE TABLE shop.secrets_local (id INT PRIMARY KEY)")  # as an operator's copy would be
    code, verdict = check(replica)
    assert code == 0 and verdict["status"] == "warn", verdict
    assert "shop.secrets_local (replicate_wild_ignore_table=shop.secret%)" in verdict["value"], verdict
    assert "shop.orders" not in verdict["value"] and "point cdc at the primary" in verdict["fix"]
    assert check(primary)[1]["value"] == "not a replica"
