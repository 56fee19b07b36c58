"""The SQL snapshot issues on flavours the rig cannot start (MySQL 8.0/8.4, RDS), and its pure helpers."""

from __future__ import annotations

import pytest

from cdc.errors import UsageError
from cdc.schema import Column, TableSchema
from cdc.snapshot.handover import gtid_statement, lock_statement, resolve_mode, status_statement
from cdc.snapshot.runway import RDS_NULL_RETENTION_SECONDS, Runway, retention_from
from cdc.source.server import MARIADB, MYSQL, RDS_MYSQL, ServerInfo, parse_version
from cdc.source.tables import TableInfo, TablePlan, bindable_key, keyset_params, keyset_predicate, select_sql


def _server(flavour: str, version: str) -> ServerInfo:
    return ServerInfo(flavour, version, parse_version(version), 1, "uuid", "host")


@pytest.mark.parametrize(("flavour", "version", "status", "gtid"), [
    (MYSQL, "8.0.36", "SHOW MASTER STATUS", "SELECT @@GLOBAL.gtid_executed"),
    (MYSQL, "8.2.0", "SHOW BINARY LOG STATUS", "SELECT @@GLOBAL.gtid_executed"),
    (MYSQL, "8.4.3", "SHOW BINARY LOG STATUS", "SELECT @@GLOBAL.gtid_executed"),
    (RDS_MYSQL, "8.0.39", "SHOW MASTER STATUS", "SELECT @@GLOBAL.gtid_executed"),
    (MARIADB, "11.4.2-MariaDB", "SHOW MASTER STATUS", "SELECT @@GLOBAL.gtid_binlog_pos"),
])
def test_position_statements_per_flavour(flavour: str, version: str, status: str, gtid: str) -> None:
    server = _server(flavour, version)
    assert (status_statement(server), gtid_statement(server)) == (status, gtid)


def test_lock_modes_resolve_per_flavour() -> None:
    mysql, maria = _server(MYSQL, "8.4.3"), _server(MARIADB, "10.11.9-MariaDB")
    assert [resolve_mode(m, mysql) for m in ("auto", "global", "tables", "none")] == ["global", "global", "tables", "none"]
    assert [resolve_mode(m, maria) for m in ("auto", "mariadb", "global", "none")] == ["mariadb", "mariadb", "global",
                                                                                       "mariadb"]
    with pytest.raises(UsageError, match="needs MariaDB"):
        resolve_mode("mariadb", mysql)
    with pytest.raises(UsageError, match="not one of"):
        resolve_mode("shared", mysql)


def test_lock_statement_quotes_hostile_names() -> None:
    tables = [TableInfo("shop", "order", 0, 0), TableInfo("we`ird db", "t 'x'", 0, 0)]
    assert lock_statement("global", tables) == "FLUSH TABLES WITH READ LOCK"
    assert lock_statement("tables", tables) == "LOCK TABLES `shop`.`order` READ, `we``ird db`.`t 'x'` READ"


def _plan(*columns: Column, key: tuple[str, ...]) -> TablePlan:
    return TablePlan(TableInfo("d`b", "t", 0, 0), TableSchema("d`b", "t", columns, key), key, bool(key))


def test_chunk_query_is_a_range_over_the_key() -> None:
    plan = _plan(Column("a", "int", "int"), Column("b`", "varchar(5)", "varchar"), Column("c", "text", "text"),
                 key=("a", "b`"))
    assert keyset_predicate(plan.key) == "(`a` > %s) OR (`a` = %s AND `b``` > %s)"
    assert keyset_params([1, "x"]) == [1, 1, "x"]
    assert select_sql(plan, after_key=False, limit=10) == "SELECT `a`, `b```, `c` FROM `d``b`.`t` ORDER BY `a`, `b``` LIMIT 10"
    assert select_sql(plan, after_key=True, limit=10) == (
        "SELECT `a`, `b```, `c` FROM `d``b`.`t` WHERE (`a` > %s) OR (`a` = %s AND `b``` > %s) "
        "ORDER BY `a`, `b``` LIMIT 10")
    assert keyset_predicate(("x", "y", "z")) == (
        "(`x` > %s) OR (`x` = %s AND `y` > %s) OR (`x` = %s AND `y` = %s AND `z` > %s)")


def test_saved_keys_bind_back_as_the_server_compares_them() -> None:
    from datetime import date, datetime
    from decimal import Decimal

    plan = _plan(Column("bin", "varbinary(4)", "varbinary"), Column("dec", "decimal(5,2)", "decimal", scale=2),
                 Column("ts", "timestamp(3)", "timestamp", fsp=3), Column("e", "enum('b','a')", "enum",
                                                                          enum_values=("b", "a")),
                 Column("s", "set('x','y')", "set", set_values=("x", "y")), Column("dt", "datetime", "datetime"),
                 Column("d", "date", "date"), Column("z", "date", "date"), Column("i", "int", "int"),
                 key=("bin", "dec", "ts", "e", "s", "dt", "d", "z", "i"))
    saved = ["AP8=", "-1.50", "2026-11-22T07:00:01.123000Z", "a", ["x", "y"], "2026-11-22 07:00:01", "2026-11-22",
             "0000-00-00", 7]
    assert bindable_key(plan, saved) == [b"\x00\xff", Decimal("-1.50"), "2026-11-22 07:00:01.123000", 2, 3,
                                         datetime(2026, 11, 22, 7, 0, 1), date(2026, 11, 22), "0000-00-00", 7]


@pytest.mark.parametrize(("found", "rds_hours", "managed", "expected"), [
    ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "0.000000"}, None, False, None),
    ({"binlog_expire_logs_seconds": "2592000", "expire_logs_days": "0"}, None, False, 2592000.0),
    ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "1.5"}, None, False, 129600.0),
    ({"binlog_expire_logs_seconds": "0"}, "24", True, 86400.0),
    ({"binlog_expire_logs_seconds": "0"}, None, True, RDS_NULL_RETENTION_SECONDS),
])
def test_retention_sources(found: dict[str, str], rds_hours: str | None, managed: bool, expected: float | None) -> None:
    assert retention_from(found, rds_hours, managed)[0] == expected


def test_runway_is_short_beyond_half_the_retention() -> None:
    assert Runway(1000, 0, 10.0, 100.0, 201.0, "x").is_short is False
    assert Runway(1000, 0, 10.0, 100.0, 199.0, "x").is_short is True
    assert Runway(1000, 0, None, None, 1.0, "x").is_short is False  # unmeasured: no verdict
    assert Runway(1000, 0, 10.0, 100.0, None, "x").is_short is False  # never purged
