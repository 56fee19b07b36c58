"""Binlog retention: how long the server keeps binlogs, and how to change that on each flavour.

Retention is the pipeline's runway: a reader stopped for longer than it finds its position
purged and must start over from a new snapshot. The decisions (range, statement, notes) are
pure functions of the server; only read_retention and change_retention talk to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.config import MySQLSettings
from cdc.errors import PreconditionError, UsageError
from cdc.source.connect import connection, query, variables
from cdc.source.flavour import is_mysql8
from cdc.source.server import AURORA_MYSQL, ServerInfo, describe_server, parse_version

RDS_RETENTION_KEY = "binlog retention hours"
RETENTION_VARIABLES = ["binlog_expire_logs_seconds", "expire_logs_days", "binlog_expire_logs_auto_purge"]
# https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/mysql-stored-proc-configuring.html
RDS_MAX_HOURS = 168
# Aurora MySQL 3 and 2.11+ allow 90 days; older Aurora 2 the RDS limit.
AURORA_MAX_HOURS = 2160
# binlog_expire_logs_seconds is a 32-bit unsigned on MySQL 8; MariaDB caps it at 99 days.
MYSQL8_MAX_HOURS = 4294967295 // 3600
DAYS_MAX_HOURS = 99 * 24


@dataclass(frozen=True)
class Retention:
    """How long binlogs live now. hours=None: they never expire automatically."""

    hours: float | None
    setting: str
    raw: str

    def describe(self) -> str:
        if self.hours is None:
            return f"never expire ({self.setting}={self.raw})"
        return f"{self.hours:g}h ({self.setting}={self.raw})"

    def to_dict(self) -> dict[str, Any]:
        return {"hours": self.hours, "setting": self.setting, "raw": self.raw}


def _number(text: str | None) -> float:
    try:
        return float(text or 0)
    except ValueError:
        return 0.0


def effective_retention(
    server: ServerInfo, found: Mapping[str, str], rds_config: Mapping[str, str | None] | None
) -> Retention:
    """The retention that really applies, from the variables (and RDS configuration) of the server."""
    if server.is_managed and rds_config is not None:
        raw = rds_config.get(RDS_RETENTION_KEY)
        if raw is None or raw.strip().upper() in ("", "NULL"):
            # NULL on RDS means "keep binlogs only until they are uploaded", i.e. minutes.
            return Retention(0.0, RDS_RETENTION_KEY, "NULL")
        return Retention(_number(raw), RDS_RETENTION_KEY, raw)
    if found.get("binlog_expire_logs_auto_purge", "").upper() == "OFF":
        return Retention(None, "binlog_expire_logs_auto_purge", "OFF")
    seconds = _number(found.get("binlog_expire_logs_seconds"))
    if seconds > 0:
        return Retention(seconds / 3600, "binlog_expire_logs_seconds", found["binlog_expire_logs_seconds"])
    days = _number(found.get("expire_logs_days"))
    if days > 0:
        return Retention(days * 24, "expire_logs_days", found["expire_logs_days"])
    name = "binlog_expire_logs_seconds" if "binlog_expire_logs_seconds" in found else "expire_logs_days"
    return Retention(None, name, found.get(name, "0"))


def uses_seconds_variable(server: ServerInfo) -> bool:
    """binlog_expire_logs_seconds exists on MySQL 8.0 and MariaDB 10.6+; older ones count whole days."""
    if server.is_mariadb:
        return server.version_tuple >= (10, 6, 0)
    return server.version_tuple >= (8, 0, 0)


def retention_limits(server: ServerInfo) -> tuple[int, int]:
    """The range of hours the flavour accepts (0 would disable retention or expiry, so never)."""
    if server.flavour == AURORA_MYSQL:
        aurora = parse_version(server.aurora_version or "")
        return 1, AURORA_MAX_HOURS if aurora >= (2, 11, 0) else RDS_MAX_HOURS
    if server.is_managed:
        return 1, RDS_MAX_HOURS
    if is_mysql8(server):
        return 1, MYSQL8_MAX_HOURS
    return 1, DAYS_MAX_HOURS


def retention_statement(server: ServerInfo, hours: int) -> tuple[str, tuple[int, ...]]:
    """The statement (with bound parameters) that sets retention to `hours` on this flavour."""
    if server.is_managed:
        return "CALL mysql.rds_set_configuration('binlog retention hours', %s)", (hours,)
    if is_mysql8(server):
        # PERSIST survives a restart (mysqld-auto.cnf); MySQL 5.7 and MariaDB have no PERSIST.
        return "SET PERSIST binlog_expire_logs_seconds = %s", (hours * 3600,)
    if uses_seconds_variable(server):
        return "SET GLOBAL binlog_expire_logs_seconds = %s", (hours * 3600,)
    return "SET GLOBAL expire_logs_days = %s", (math.ceil(hours / 24),)


def statement_text(sql: str, params: tuple[int, ...]) -> str:
    """A statement as the user reads it (params are validated ints, never user text)."""
    return sql % params


def retention_fix(server: ServerInfo, hours: int) -> str:
    return f"cdc set-retention --hours {hours}  (runs: {statement_text(*retention_statement(server, hours))})"


@dataclass(frozen=True)
class RetentionPlan:
    server: ServerInfo
    current: Retention
    hours: int
    sql: str
    params: tuple[int, ...]
    notes: tuple[str, ...]

    @property
    def statement(self) -> str:
        return statement_text(self.sql, self.params)

    def to_dict(self) -> dict[str, Any]:
        return {"flavour": self.server.flavour, "version": self.server.version, "current": self.current.to_dict(),
                "hours": self.hours, "statement": self.statement, "notes": list(self.notes)}


def plan_retention(server: ServerInfo, current: Retention, hours: int) -> RetentionPlan:
    """Decide what set-retention runs; refuse hours the flavour does not accept."""
    low, high = retention_limits(server)
    if not low <= hours <= high:
        raise UsageError(
            f"--hours {hours} is outside what {server.flavour} {server.version} accepts ({low}..{high} hours)",
            hint=f"pick a value between {low} and {high}",
        )
    sql, params = retention_statement(server, hours)
    return RetentionPlan(server, current, hours, sql, params, _notes(server, current, hours, sql))


def _notes(server: ServerInfo, current: Retention, hours: int, sql: str) -> tuple[str, ...]:
    notes: list[str] = []
    if "expire_logs_days" in sql and hours % 24:
        notes.append(f"expire_logs_days counts whole days: {hours}h becomes {math.ceil(hours / 24)} day(s)")
    if sql.startswith("SET GLOBAL"):
        variable = sql.split()[2]
        value = statement_text("%s", _value(sql, hours))
        notes.append(f"SET GLOBAL does not survive a restart: also put {variable}={value} "
                     "under [mysqld] in the server's config file")
    if current.hours is None or current.hours > hours:
        notes.append(f"this shortens retention ({current.describe()} -> {hours}h): older binlogs are purged "
                     "at the next log rotation, and a stopped pipeline gets less runway")
    if server.is_managed:
        notes.append("binlogs kept longer use the instance's storage; watch FreeStorageSpace")
    return tuple(notes)


def _value(sql: str, hours: int) -> tuple[int]:
    return (math.ceil(hours / 24),) if "expire_logs_days" in sql else (hours * 3600,)


def read_rds_config(conn: pymysql.Connection) -> dict[str, str | None]:
    """mysql.rds_show_configuration as {name: value} (value None for NULL)."""
    rows = query(conn, "CALL mysql.rds_show_configuration")
    return {str(row["name"]).lower(): None if row["value"] is None else str(row["value"]) for row in rows}


def read_retention(conn: pymysql.Connection, server: ServerInfo) -> Retention:
    rds_config = None
    if server.is_managed:
        try:
            rds_config = read_rds_config(conn)
        except pymysql.err.MySQLError as exc:
            raise PreconditionError(
                f"cannot read the binlog retention of {server.flavour} {server.version}: "
                f"CALL mysql.rds_show_configuration failed ({exc.args[-1]})",
                hint="connect as the master user or a user with EXECUTE on the mysql schema",
            ) from None
    return effective_retention(server, variables(conn, RETENTION_VARIABLES), rds_config)


@dataclass(frozen=True)
class RetentionResult:
    plan: RetentionPlan
    applied: bool
    after: Retention | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.plan.to_dict(), "applied": self.applied,
                "after": None if self.after is None else self.after.to_dict()}


def change_retention(
    settings: MySQLSettings, hours: int, *, dry_run: bool, confirm: Callable[[RetentionPlan], bool]
) -> RetentionResult:
    """Plan the change, ask `confirm` (unless dry_run), run it and read the value back."""
    with connection(settings) as conn:
        server = describe_server(conn)
        plan = plan_retention(server, read_retention(conn, server), hours)
        if dry_run or not confirm(plan):
            return RetentionResult(plan, applied=False, after=None)
        try:
            with conn.cursor() as cursor:
                cursor.execute(plan.sql, plan.params)
        except pymysql.err.MySQLError as exc:
            raise PreconditionError(
                f"`{plan.statement}` failed on {settings.describe()} as user {settings.user!r}: {exc.args[-1]}",
                hint="run set-retention as a user allowed to change it (MySQL: SYSTEM_VARIABLES_ADMIN; "
                "MariaDB: SUPER or BINLOG ADMIN; RDS/Aurora: the master user)",
            ) from None
        return RetentionResult(plan, applied=True, after=read_retention(conn, server))
