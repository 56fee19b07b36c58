"""check-binlog's verdicts: pure decisions per flavour/version, and real MariaDB servers (good and bad)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdc.config import MySQLSettings, Settings
from cdc.schema import ForeignKey
from cdc.source import flavour, preflight
from cdc.source.binlog_filters import BinlogFilters, captured_databases, unlogged
from cdc.source.facts import Facts, parse_grants
from cdc.source.key_checks import cascade_notes
from cdc.source.preflight import Options, evaluate
from cdc.source.server import AURORA_MYSQL, MARIADB, MYSQL, RDS_MYSQL, ServerInfo, parse_version
from cdc.source.verdicts import Check, Report
from cdc.state import ServerIdentity, StateDir, write_json_atomic
from tests.rig import MariaDB


def server(flavour_: str = MYSQL, version: str = "8.0.36", **kw: Any) -> ServerInfo:
    return ServerInfo(flavour=flavour_, version=version, version_tuple=parse_version(version), server_id=1,
                      server_uuid="uuid-1", hostname="db1", **kw)


GOOD_VARIABLES = {
    "log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL",
    "binlog_row_value_options": "", "binlog_transaction_compression": "OFF", "gtid_mode": "ON",
    "binlog_expire_logs_seconds": "2592000",
}
ALL_GRANTS = ["GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO `cdc`@`%`"]


def facts(info: ServerInfo | None = None, variables: dict[str, str] | None = None, *, without: tuple[str, ...] = (),
          **kw: Any) -> Facts:
    info = info or server()
    found = {k: v for k, v in {**GOOD_VARIABLES, **(variables or {})}.items() if k not in without}
    values: dict[str, Any] = dict(
        server=info, variables=found, rds_config=None,
        grants=parse_grants("cdc@%", ALL_GRANTS), databases=(), missing_databases=(), tables_without_pk=(),
        binlogs=(("binlog.000001", 1000),), position=("binlog.000001", 1000),
        position_statement=flavour.binlog_status_statement(info), replica_ids=(), errors={},
    )
    values.update(kw)
    return Facts(**values)


def verdicts(f: Facts, **options: Any) -> dict[str, Check]:
    return {check.name: check for check in evaluate(f, Options(**{"reader_server_id": 4242, **options}))}


def failed(f: Facts, **options: Any) -> set[str]:
    return {name for name, check in verdicts(f, **options).items() if check.status == "fail"}


# Pure decisions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("flavour_", "version", "statement"), [
    (MYSQL, "5.7.44", "SHOW MASTER STATUS"),
    (MYSQL, "8.0.36", "SHOW MASTER STATUS"),
    (MYSQL, "8.2.0", "SHOW BINARY LOG STATUS"),
    (MYSQL, "8.4.3", "SHOW BINARY LOG STATUS"),
    (RDS_MYSQL, "8.4.3", "SHOW BINARY LOG STATUS"),
    (AURORA_MYSQL, "8.0.mysql_aurora.3.05.2", "SHOW MASTER STATUS"),
    (MARIADB, "10.4.30-MariaDB", "SHOW MASTER STATUS"),
    (MARIADB, "10.5.2-MariaDB", "SHOW BINLOG STATUS"),
    (MARIADB, "10.11.19-MariaDB-log", "SHOW BINLOG STATUS"),
])
def test_binlog_status_statement_per_flavour(flavour_: str, version: str, statement: str) -> None:
    assert flavour.binlog_status_statement(server(flavour_, version)) == statement


@pytest.mark.parametrize(("flavour_", "version", "statement"), [
    (MYSQL, "5.7.44", "SHOW SLAVE HOSTS"), (MYSQL, "8.0.21", "SHOW SLAVE HOSTS"),
    (MYSQL, "8.0.22", "SHOW REPLICAS"), (MYSQL, "8.4.0", "SHOW REPLICAS"), (MARIADB, "10.11.2", "SHOW SLAVE HOSTS"),
])
def test_replicas_statement_per_flavour(flavour_: str, version: str, statement: str) -> None:
    assert flavour.replicas_statement(server(flavour_, version)) == statement


def test_aurora_version_string_parses() -> None:
    assert parse_version("8.0.mysql_aurora.3.05.2") == (8, 0, 0)
    assert parse_version("10.11.19-MariaDB-0+deb12u1-log") == (10, 11, 19)


def test_good_mysql8_passes_every_check() -> None:
    checks = verdicts(facts())
    assert {c.status for c in checks.values()} == {"ok"}
    assert list(checks) == [
        "server", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "binlog_row_value_options",
        "binlog_compression", "binlog_filters", "replica_updates", "replica_filters", "binlog_retention", "server_id",
        "reader_server_id", "gtid",
        "grant_replication_slave", "grant_replication_client", "grant_select", "primary_keys", "system_versioned",
        "foreign_keys",
        "binlog_files", "binlog_position"]
    assert checks["binlog_retention"].value == "720h (binlog_expire_logs_seconds=2592000): runway 720h for a stopped pipeline"


@pytest.mark.parametrize(("filters", "lost", "status"), [
    (BinlogFilters(), (), "ok"),
    (None, (), "ok"),  # binlog off: log_bin fails instead
    (BinlogFilters(ignore=("scratch",)), (), "warn"),  # logged, but DDL follows the session's default database
    (BinlogFilters(do=("shop",)), ("crm",), "fail"),
])
def test_binlog_filters_fail_when_a_captured_database_is_left_out(filters: BinlogFilters | None, lost: tuple[str, ...],
                                                                  status: str) -> None:
    check = verdicts(facts(binlog_filters=filters, unlogged_databases=lost))["binlog_filters"]
    assert check.status == status and (status == "ok") == (check.fix == "")
    if lost:
        assert "leave crm out of [mysql] databases" in check.fix and check.value == "binlog_do_db=shop"


@pytest.mark.parametrize(("variables", "replica", "status"), [
    ({"log_replica_updates": "ON"}, False, "ok"),  # MySQL 8.0.26+'s name
    ({"log_slave_updates": "ON"}, True, "ok"),
    ({}, None, "ok"),  # a flavour without the variable
    ({"log_slave_updates": "OFF"}, False, "ok"),  # a primary: nothing to replicate
    ({"log_slave_updates": "OFF"}, True, "fail"),
    ({"log_replica_updates": "OFF"}, None, "warn"),  # no privilege to tell
])
def test_a_replica_must_write_what_it_replicates(variables: dict[str, str], replica: bool | None, status: str) -> None:
    check = verdicts(facts(variables=variables, replica=replica))["replica_updates"]
    assert check.status == status, check
    assert check.value.endswith("not a replica") == (variables == {"log_slave_updates": "OFF"} and replica is False)
    if status == "fail":
        assert "log_slave_updates=ON" in check.fix and check.value == "log_slave_updates=OFF on a replica"


def test_binlog_filters_left_out_databases() -> None:
    both = BinlogFilters(do=("a", "b"), ignore=("b",))
    assert unlogged(both, ["a", "b", "c"]) == ["b", "c"] and unlogged(BinlogFilters(), ["a"]) == []
    present = ["crm", "shop", "shop_eu"]
    assert captured_databases((), (), present) == present  # no filter: every user database
    assert captured_databases(("shop*",), (), present) == ["shop", "shop_eu"]
    assert captured_databases((), ("crm.orders", "shop_??.t"), present) == ["crm", "shop_eu"]


def test_mysql8_fixes_use_set_persist() -> None:
    checks = verdicts(facts(variables={"binlog_format": "MIXED", "binlog_row_image": "MINIMAL",
                                       "binlog_row_metadata": "MINIMAL"}))
    assert checks["binlog_format"].fix.startswith("SET PERSIST binlog_format = 'ROW';")
    assert checks["binlog_row_image"].fix == "SET PERSIST binlog_row_image = 'FULL';"
    assert checks["binlog_row_metadata"].fix == "SET PERSIST binlog_row_metadata = 'FULL';"


def test_mysql57_warns_and_uses_set_global_with_config_file() -> None:
    info = server(MYSQL, "5.7.44")
    absent = ("binlog_row_metadata", "binlog_row_value_options", "binlog_transaction_compression")
    checks = verdicts(facts(info, {"binlog_format": "STATEMENT"}, without=absent))
    assert checks["server"].status == "warn"
    assert checks["binlog_row_metadata"].status == "warn"
    assert checks["binlog_format"].fix.startswith("SET GLOBAL binlog_format = 'ROW'; and add binlog_format=ROW under [mysqld]")
    assert checks["binlog_position"].value == "binlog.000001:1000 (SHOW MASTER STATUS)"


def test_mysql84_position_statement() -> None:
    checks = verdicts(facts(server(MYSQL, "8.4.3")))
    assert checks["binlog_position"].value == "binlog.000001:1000 (SHOW BINARY LOG STATUS)"


def test_partial_json_and_compression_fail() -> None:
    f = facts(variables={"binlog_row_value_options": "PARTIAL_JSON", "binlog_transaction_compression": "ON"})
    checks = verdicts(f)
    assert failed(f) == {"binlog_row_value_options", "binlog_compression"}
    assert checks["binlog_row_value_options"].fix.startswith("SET PERSIST binlog_row_value_options = '';")
    assert checks["binlog_compression"].fix == "SET PERSIST binlog_transaction_compression = OFF;"


def test_mariadb_compressed_binlog_fails() -> None:
    f = facts(server(MARIADB, "10.11.5-MariaDB"), {"log_bin_compress": "ON"})
    assert verdicts(f)["binlog_compression"].fix.startswith("SET GLOBAL log_bin_compress = OFF; and add")


def test_rds_uses_parameter_group_and_rds_retention() -> None:
    info = server(RDS_MYSQL, "8.0.36")
    f = facts(info, {"binlog_format": "MIXED"}, rds_config={"binlog retention hours": None})
    checks = verdicts(f)
    assert failed(f) == {"binlog_format", "binlog_retention"}
    assert checks["binlog_format"].fix.startswith("DB parameter group: binlog_format = ROW")
    assert checks["binlog_retention"].value.startswith("0h (binlog retention hours=NULL)")
    assert checks["binlog_retention"].fix == (
        "cdc set-retention --hours 24  (runs: CALL mysql.rds_set_configuration('binlog retention hours', 24))")
    ok = verdicts(facts(info, rds_config={"binlog retention hours": "72"}))["binlog_retention"]
    assert (ok.status, ok.value) == ("ok", "72h (binlog retention hours=72): runway 72h for a stopped pipeline")


def test_rds_log_bin_off_fix_is_backups() -> None:
    checks = verdicts(facts(server(RDS_MYSQL, "8.0.36"), {"log_bin": "OFF"}, binlogs=None, position=None,
                            rds_config={"binlog retention hours": "24"}))
    assert checks["log_bin"].fix.startswith("enable automated backups")


def test_aurora_reader_fails_and_fixes_use_cluster_parameter_group() -> None:
    info = server(AURORA_MYSQL, "8.0.mysql_aurora.3.05.2", aurora_version="3.05.2", is_reader=True)
    f = facts(info, {"binlog_row_image": "MINIMAL"}, rds_config={"binlog retention hours": "2160"})
    checks = verdicts(f)
    assert failed(f) == {"aurora_writer", "binlog_row_image"}
    assert checks["aurora_writer"].fix.startswith("connect to the cluster (writer) endpoint")
    assert checks["binlog_row_image"].fix.startswith("DB cluster parameter group: binlog_row_image = FULL")


def test_retention_below_minimum_fails_with_runway() -> None:
    f = facts(variables={"binlog_expire_logs_seconds": "7200"})
    check = verdicts(f, min_retention_hours=24)["binlog_retention"]
    assert check.status == "fail"
    assert check.value == "2h (binlog_expire_logs_seconds=7200): a stopped pipeline loses its position after 2h"
    assert check.fix == "cdc set-retention --hours 24  (runs: SET PERSIST binlog_expire_logs_seconds = 86400)"
    assert verdicts(f, min_retention_hours=2)["binlog_retention"].status == "ok"


def test_reader_server_id_collisions() -> None:
    assert failed(facts(replica_ids=(7, 4242))) == {"reader_server_id"}
    assert failed(facts(), reader_server_id=1) == {"reader_server_id"}  # the server's own id
    unknown = verdicts(facts(replica_ids=None, errors={"replicas": "Access denied"}))["reader_server_id"]
    assert (unknown.status, unknown.fix) == ("warn", "run SHOW REPLICAS as an admin and compare by hand")


def test_server_id_zero_fails() -> None:
    assert failed(facts(replace(server(), server_id=0)), reader_server_id=5) == {"server_id"}


def test_grants_missing_and_per_database() -> None:
    grants = parse_grants("cdc@10.0.0.%", [
        "GRANT USAGE ON *.* TO `cdc`@`10.0.0.%` IDENTIFIED BY PASSWORD '*ABC'",
        "GRANT SELECT ON `shop\\_%`.* TO `cdc`@`10.0.0.%`",
        "GRANT SELECT (a, b), INSERT ON `crm`.`people` TO `cdc`@`10.0.0.%`",
    ])
    assert grants.can_select("shop_eu") and not grants.can_select("shopxeu") and not grants.can_select("crm")
    f = facts(grants=grants, databases=("shop_eu", "crm"))
    checks = verdicts(f)
    assert failed(f) == {"grant_replication_slave", "grant_replication_client", "grant_select"}
    assert checks["grant_replication_slave"].fix == "GRANT REPLICATION SLAVE ON *.* TO 'cdc'@'10.0.0.%';"
    assert checks["grant_select"].fix == "GRANT SELECT ON `crm`.* TO 'cdc'@'10.0.0.%';"
    mariadb = verdicts(facts(server(MARIADB, "10.11.5-MariaDB"), grants=grants))
    assert mariadb["grant_replication_client"].fix == "GRANT BINLOG MONITOR ON *.* TO 'cdc'@'10.0.0.%';"


def test_grants_through_roles_only_warn() -> None:
    grants = parse_grants("cdc@%", ["GRANT USAGE ON *.* TO `cdc`@`%`", "GRANT `replicator`@`%` TO `cdc`@`%`"])
    checks = verdicts(facts(grants=grants))
    assert checks["grant_replication_slave"].status == "warn"
    assert grants.roles == ("`replicator`@`%`",)


def _key(child: str, on_delete: str, on_update: str = "RESTRICT", db: str = "shop") -> ForeignKey:
    return ForeignKey(f"fk_{child}", db, child, ("parent_id",), "shop", "parent", ("id",), on_delete, on_update)


def test_cascading_foreign_keys_are_listed_with_how_cdc_handles_them() -> None:
    keys = (_key("lines", "CASCADE"), _key("notes", "SET NULL"), _key("audit", "RESTRICT"),
            _key("log", "NO ACTION", "CASCADE", db="other"),
            ForeignKey("fk_x", "shop", "x", ("a",), "other", "p", ("id",), "CASCADE", "CASCADE"))
    found = facts(databases=("shop",), foreign_keys=keys)
    check = verdicts(found)["foreign_keys"]
    assert (check.status, check.value) == ("warn", "4 cascading foreign key(s): spark-merge reproduces them (the "
                                          "binlog omits their rows); not reproduced: other.log.fk_log, shop.x.fk_x")
    notes = cascade_notes(found)
    assert [(n["table"], n["handling"].split(":")[0]) for n in notes] == [
        ("lines", "reproduced by spark-merge"), ("notes", "reproduced by spark-merge"),
        ("log", "child table other.log is not captured"), ("x", "parent table other.p is not captured")]
    report = Report({}, (check,), cascades=tuple(notes))
    assert report.to_dict()["cascading_foreign_keys"][0] == {
        "name": "fk_lines", "db": "shop", "table": "lines", "columns": ["parent_id"], "ref_db": "shop",
        "ref_table": "parent", "ref_columns": ["id"], "on_delete": "CASCADE", "on_update": "RESTRICT",
        "handling": notes[0]["handling"]}


def test_foreign_keys_on_mysql84_are_in_the_binlog_and_none_cascading_is_ok() -> None:
    mysql84 = server(version="8.4.3")
    check = verdicts(facts(mysql84, foreign_keys=(_key("lines", "CASCADE"),)))["foreign_keys"]
    assert (check.status, check.value) == ("ok", "1 cascading foreign key(s): the binlog carries their rows")
    check = verdicts(facts(foreign_keys=(_key("lines", "RESTRICT"),)))["foreign_keys"]
    assert (check.status, check.value) == ("ok", "1 foreign key(s), none cascading")
    assert cascade_notes(facts(mysql84, foreign_keys=(_key("lines", "SET NULL"),)))[0]["handling"] == (
        "the binlog carries the changed child rows; spark-merge applies them once, as they are")


def test_tables_without_pk_warn_and_strict_fails() -> None:
    tables = tuple(f"shop.t{i:02d}" for i in range(12))
    check = verdicts(facts(tables_without_pk=tables))["primary_keys"]
    assert check.status == "warn"
    assert check.value.endswith("shop.t09 and 2 more")
    report = Report({}, tuple(evaluate(facts(tables_without_pk=tables), Options(reader_server_id=9))))
    assert report.ok and not replace(report, strict=True).ok


def test_a_unique_not_null_key_is_named_as_the_key_used_and_is_no_warning() -> None:
    check = verdicts(facts(unique_keys={"shop.orders": ("code", "n")}))["primary_keys"]
    assert (check.status, check.value) == (
        "ok", "every captured table in all non-system databases has a primary key or a UNIQUE NOT NULL key; keyed by their "
        "UNIQUE NOT NULL key instead: shop.orders (code, n)")


# Real MariaDB ---------------------------------------------------------------------------------


def settings_for(db: MariaDB, state_dir: Path, **mysql: Any) -> Settings:
    return Settings(state_dir=str(state_dir), mysql=MySQLSettings(host=db.host, port=db.port, **mysql))


def test_session_server_is_ready(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.keyed (id INT PRIMARY KEY)")
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.loose (a INT)")
    # A configured reader id: a tail test elsewhere in the session may hold the derived one.
    report = preflight.run(settings_for(mariadb, tmp_path / "absent", databases=(fresh_db,), server_id=777001))
    checks = {c.name: c for c in report.checks}
    assert report.ok
    assert checks["primary_keys"].value == f"1 table(s) without a primary key: {fresh_db}.loose"
    file, pos = mariadb.binlog_position()
    assert checks["binlog_position"].value == f"{file}:{pos} (SHOW BINLOG STATUS)"
    assert checks["grant_select"].value == f"SELECT on {fresh_db}"
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize("gtid_state", [None, "0-1-999999", "0-1-1"])
def test_state_dir_checks_are_read_only(mariadb: MariaDB, tmp_path: Path, gtid_state: str | None) -> None:
    state = StateDir(tmp_path / "state").ensure()
    settings = settings_for(mariadb, state.root)
    write_json_atomic(state.checkpoint_path("tail"), {"version": 2, "file": "mariadb-bin.000000", "pos": 4,
                                                     "gtid_state": gtid_state})
    before = sorted((p.name, p.stat().st_mtime_ns) for p in state.root.iterdir())
    checks = {c.name: c for c in preflight.run(settings).checks}
    assert checks["state_server"].value == f"{state.root}: no server recorded yet"
    assert checks["tail_position"].value == "mariadb-bin.000000:4: file purged from the server"
    # A state directory of another server: its file:pos means nothing here, its GTIDs do (tail --rebase).
    other = ServerIdentity("another-uuid", 9, "mysql", "8.0.36")
    write_json_atomic(state.root / "server.json", other.to_dict())
    before = sorted((p.name, p.stat().st_mtime_ns) for p in state.root.iterdir())
    checks = {c.name: c for c in preflight.run(settings).checks}
    assert checks["state_server"].status == "fail"
    assert checks["state_server"].value == f"{state.root} belongs to {other.describe()}"
    assert "tail_position" not in checks
    rebase = checks["rebase"]
    if gtid_state is None:
        assert (rebase.status, rebase.value) == ("fail", "tail.json records no GTID state (an older cdc, or a "
                                                         "server without GTIDs)")
    elif gtid_state == "0-1-999999":
        assert rebase.status == "fail" and rebase.value.startswith("this server lacks domain 0 seq ")
    else:
        assert rebase.status == "ok" and "`cdc tail --rebase` can go on here" in rebase.value
    assert sorted((p.name, p.stat().st_mtime_ns) for p in state.root.iterdir()) == before


def test_binlog_listing_denied_names_the_grant() -> None:
    f = facts(server(MARIADB, "10.11.5-MariaDB"), binlogs=None, position=None,
              errors={"binlogs": "Access denied; you need BINLOG MONITOR"})
    checks = verdicts(f)
    assert failed(f) == {"binlog_files", "binlog_position"}
    assert checks["binlog_files"].fix == checks["binlog_position"].fix == "GRANT BINLOG MONITOR ON *.* TO 'cdc'@'%';"


def test_retention_fix_stays_within_the_flavour_limit() -> None:
    f = facts(server(RDS_MYSQL, "8.0.36"), rds_config={"binlog retention hours": "24"})
    assert verdicts(f, min_retention_hours=500)["binlog_retention"].fix.startswith("cdc set-retention --hours 168 ")


def test_watermark_table_is_reported_for_resnapshot() -> None:
    from cdc.source.facts import WatermarkTable
    from cdc.source.preflight import MISSING

    def check(mark: WatermarkTable, grants: list[str] = ALL_GRANTS, **variables: str) -> Check:
        return verdicts(facts(variables=variables, watermark=mark, grants=parse_grants("cdc@%", grants)))[
            "watermark_table"]

    missing = check(WatermarkTable("cdc", "watermarks", None))
    assert (missing.status, missing.value) == ("ok", f"cdc.watermarks {MISSING}")
    assert "cdc run" in MISSING
    assert missing.fix.startswith("CREATE TABLE `cdc`.`watermarks` ( slot VARCHAR(64) NOT NULL PRIMARY KEY, mark")
    assert "GRANT INSERT, UPDATE ON `cdc`.`watermarks` TO 'cdc'@'%';" in missing.fix
    good = WatermarkTable("cdc", "watermarks", ("slot", "mark"))
    # ALL_GRANTS has no INSERT/UPDATE on it: re-snapshots read chunks under a lock, which needs LOCK TABLES.
    no_write = check(good)
    assert no_write.status == "warn" and "--mode locked" in no_write.value and "lacks LOCK TABLES" in no_write.value
    locker = ALL_GRANTS + ["GRANT LOCK TABLES ON *.* TO `cdc`@`%`"]
    assert check(good, locker).status == "ok" and "--mode locked" in check(good, locker).value
    writer = ALL_GRANTS + ["GRANT INSERT, UPDATE ON `cdc`.`watermarks` TO `cdc`@`%`"]
    assert check(good, writer).status == "ok"
    assert check(good, ["GRANT ALL PRIVILEGES ON `cdc`.* TO `cdc`@`%`"]).status == "ok"
    assert "read-only" in check(good, writer, read_only="ON").value
    assert (check(good, locker, read_only="ON").status, check(good, writer, read_only="ON").status) == ("ok", "warn")
    assert "will use watermarks" in check(good, writer).value
    assert check(WatermarkTable("cdc", "watermarks", ("id",)), writer).status == "warn"
    assert "watermark_table" not in verdicts(facts())  # no table named: nothing to say
