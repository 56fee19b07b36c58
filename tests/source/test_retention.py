"""Binlog retention: per-flavour statements and limits (pure), and a real change on a throwaway server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cdc.config import MySQLSettings
from cdc.errors import ExitCode, UsageError
from cdc.source import retention
from cdc.source.retention import Retention, effective_retention, plan_retention, retention_limits
from cdc.source.server import AURORA_MYSQL, MARIADB, MYSQL, RDS_MARIADB, RDS_MYSQL, ServerInfo, parse_version
from tests.rig import MariaDB

NEVER = Retention(None, "binlog_expire_logs_seconds", "0")


def server(flavour: str, version: str, **kw: Any) -> ServerInfo:
    return ServerInfo(flavour, version, parse_version(version), 1, "uuid", "db1", **kw)


@pytest.mark.parametrize(("info", "statement", "limits"), [
    (server(RDS_MYSQL, "8.0.36"), "CALL mysql.rds_set_configuration('binlog retention hours', 72)", (1, 168)),
    (server(RDS_MARIADB, "10.11.8-MariaDB"), "CALL mysql.rds_set_configuration('binlog retention hours', 72)", (1, 168)),
    (server(AURORA_MYSQL, "8.0.mysql_aurora.3.05.2", aurora_version="3.05.2"),
     "CALL mysql.rds_set_configuration('binlog retention hours', 72)", (1, 2160)),
    (server(AURORA_MYSQL, "5.7.mysql_aurora.2.10.2", aurora_version="2.10.2"),
     "CALL mysql.rds_set_configuration('binlog retention hours', 72)", (1, 168)),
    (server(MYSQL, "8.0.36"), "SET PERSIST binlog_expire_logs_seconds = 259200", (1, 1193046)),
    (server(MYSQL, "8.4.3"), "SET PERSIST binlog_expire_logs_seconds = 259200", (1, 1193046)),
    (server(MYSQL, "5.7.44"), "SET GLOBAL expire_logs_days = 3", (1, 2376)),
    (server(MARIADB, "10.11.19-MariaDB"), "SET GLOBAL binlog_expire_logs_seconds = 259200", (1, 2376)),
    (server(MARIADB, "10.5.22-MariaDB"), "SET GLOBAL expire_logs_days = 3", (1, 2376)),
], ids=lambda v: v.flavour + " " + v.version if isinstance(v, ServerInfo) else None)
def test_statement_and_limits_per_flavour(info: ServerInfo, statement: str, limits: tuple[int, int]) -> None:
    plan = plan_retention(info, Retention(24.0, "x", "24"), 72)
    assert plan.statement == statement
    assert retention_limits(info) == limits


def test_out_of_range_is_refused_with_the_range() -> None:
    with pytest.raises(UsageError) as caught:
        plan_retention(server(RDS_MYSQL, "8.0.36"), NEVER, 169)
    assert str(caught.value) == ("--hours 169 is outside what rds-mysql 8.0.36 accepts (1..168 hours)\n"
                                 "  fix: pick a value between 1 and 168")
    assert caught.value.exit_code == ExitCode.USAGE
    with pytest.raises(UsageError):
        plan_retention(server(MYSQL, "8.0.36"), NEVER, 0)


def test_notes_say_what_a_person_must_know() -> None:
    mariadb = plan_retention(server(MARIADB, "10.11.19-MariaDB"), NEVER, 72)
    assert mariadb.notes == (
        "SET GLOBAL does not survive a restart: also put binlog_expire_logs_seconds=259200 under [mysqld] "
        "in the server's config file",
        "this shortens retention (never expire (binlog_expire_logs_seconds=0) -> 72h): older binlogs are purged "
        "at the next log rotation, and a stopped pipeline gets less runway",
    )
    days = plan_retention(server(MYSQL, "5.7.44"), Retention(24.0, "expire_logs_days", "1"), 30)
    assert days.notes[0] == "expire_logs_days counts whole days: 30h becomes 2 day(s)"
    assert plan_retention(server(MYSQL, "8.0.36"), Retention(24.0, "x", "1"), 72).notes == ()


@pytest.mark.parametrize(("info", "found", "rds", "expected"), [
    (server(MYSQL, "8.0.36"), {"binlog_expire_logs_seconds": "2592000", "expire_logs_days": "0"}, None,
     Retention(720.0, "binlog_expire_logs_seconds", "2592000")),
    (server(MYSQL, "8.0.36"), {"binlog_expire_logs_seconds": "0", "expire_logs_days": "3"}, None,
     Retention(72.0, "expire_logs_days", "3")),
    (server(MYSQL, "8.0.36"), {"binlog_expire_logs_seconds": "86400", "binlog_expire_logs_auto_purge": "OFF"}, None,
     Retention(None, "binlog_expire_logs_auto_purge", "OFF")),
    (server(MARIADB, "10.11.1"), {"binlog_expire_logs_seconds": "0", "expire_logs_days": "0.000000"}, None,
     Retention(None, "binlog_expire_logs_seconds", "0")),
    (server(RDS_MYSQL, "8.0.36"), {"binlog_expire_logs_seconds": "2592000"}, {"binlog retention hours": None},
     Retention(0.0, "binlog retention hours", "NULL")),
    (server(AURORA_MYSQL, "8.0.mysql_aurora.3.05.2"), {}, {"binlog retention hours": "2160"},
     Retention(2160.0, "binlog retention hours", "2160")),
])
def test_effective_retention(info: ServerInfo, found: dict[str, str], rds: dict[str, str | None] | None,
                             expected: Retention) -> None:
    assert effective_retention(info, found, rds) == expected


def test_change_on_a_throwaway_server(mariadb_factory: Callable[..., MariaDB]) -> None:
    db = mariadb_factory()  # its own server: the session server's retention stays as it is
    settings = MySQLSettings(host=db.host, port=db.port)
    asked: list[str] = []

    def confirm(plan: retention.RetentionPlan) -> bool:
        asked.append(plan.statement)
        return True

    dry = retention.change_retention(settings, 72, dry_run=True, confirm=confirm)
    assert (dry.applied, dry.after, asked) == (False, None, [])
    assert db.variable("binlog_expire_logs_seconds") == 0
    declined = retention.change_retention(settings, 72, dry_run=False, confirm=lambda plan: False)
    assert (declined.applied, db.variable("binlog_expire_logs_seconds")) == (False, 0)
    done = retention.change_retention(settings, 72, dry_run=False, confirm=confirm)
    assert asked == ["SET GLOBAL binlog_expire_logs_seconds = 259200"]
    assert done.after == Retention(72.0, "binlog_expire_logs_seconds", "259200")
    assert db.variable("binlog_expire_logs_seconds") == 259200
