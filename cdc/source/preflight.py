"""check-binlog: is this server ready for row-based change capture? Verdicts with exact fixes.

`gather` (cdc.source.facts) reads the server once; `evaluate` is a pure function from those
facts to checks, so the MySQL 5.7/8.0/8.4, RDS and Aurora branches are unit-tested without
those servers. Nothing here writes, neither to the server nor to the state directory.
What a verdict is: cdc.source.verdicts; the verdicts on the tables' keys: cdc.source.key_checks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from cdc.checkpoints import TailCheckpoint
from cdc.config import Settings
from cdc.errors import CdcError
from cdc.gtid import GtidSet
from cdc.source import binlog_filters, flavour, replica_updates
from cdc.source.capturable import FORMAT_WHY
from cdc.source.connect import connection, tls_state
from cdc.source.facts import Facts, gather, in_scope
from cdc.source.key_checks import cascade_notes, check_foreign_keys, check_primary_keys, check_versioned
from cdc.source.replica_updates import NAMES as REPLICA_UPDATES
from cdc.source.replica_updates import writes_replicated
from cdc.source.retention import effective_retention, retention_fix, retention_limits
from cdc.source.server import AURORA_MYSQL, ServerInfo
from cdc.source.verdicts import FAIL, OK, WARN, Check, Report
from cdc.state import StateDir
from cdc.watermarks import CREATE_SQL, split_table_name


@dataclass(frozen=True)
class Options:
    min_retention_hours: float = 24
    reader_server_id: int = 1
    reader_id_source: str = "derived"


# The watermark table absent: cdc run --until-now exits 4 when such a repair cannot start (cdc.pipeline.auto_resnapshot).
MISSING = "does not exist (needed by cdc resnapshot, and by cdc run to repair a table after DDL the binlog cannot carry)"


def run(settings: Settings, *, min_retention_hours: float = 24, strict: bool = False) -> Report:
    """Connect, gather the facts, judge them; add read-only checks of an existing state directory."""
    mysql = settings.mysql
    options = Options(min_retention_hours, mysql.reader_server_id(), "configured" if mysql.server_id else "derived")
    databases = tuple(dict.fromkeys((*mysql.databases, *(t.split(".")[0] for t in mysql.tables if "." in t))))
    with connection(mysql) as conn:
        tls = tls_state(conn, mysql)
        facts = in_scope(gather(conn, databases, split_table_name(mysql.watermark_table)), mysql.databases,
                         mysql.tables, mysql.exclude_tables)
    checks = evaluate(facts, options) + state_checks(Path(settings.state_dir), facts)
    server = {k: v for k, v in asdict(facts.server).items() if k != "version_tuple"}
    return Report({**server, "address": mysql.describe(), "user": facts.grants.user}, tuple(checks), strict, tls,
                  tuple(cascade_notes(facts)))


def evaluate(facts: Facts, options: Options) -> list[Check]:
    """All verdicts, in the order a person fixes them."""
    checks = [check_server(facts.server)]
    if facts.server.flavour == AURORA_MYSQL:
        checks.append(check_aurora_writer(facts.server))
    checks += [check_log_bin(facts), *check_row_settings(facts), check_compression(facts), check_binlog_filters(facts),
               check_replica_updates(facts), check_replica_filters(facts),
               check_retention(facts, options), check_server_id(facts), check_reader_id(facts, options),
               check_gtid(facts), *check_grants(facts), check_primary_keys(facts), check_versioned(facts),
               check_foreign_keys(facts),
               check_binlogs(facts), check_position(facts)]
    if facts.watermark is not None:
        checks.append(check_watermark_table(facts))
    return checks


def check_watermark_table(facts: Facts) -> Check:
    """Which way `cdc resnapshot` will read: watermarks (a writable table) or locked chunk reads (cdc.lockedreads)."""
    mark = facts.watermark
    assert mark is not None
    name = f"{mark.db}.{mark.table}"
    quoted = "`" + mark.db.replace("`", "``") + "`.`" + mark.table.replace("`", "``") + "`"
    expected = ("for cdc resnapshot: table (slot, mark), INSERT and UPDATE on it, a writable server (watermarks); "
                "else LOCK TABLES and SELECT on the tables (locked chunk reads)")
    create = " ".join(CREATE_SQL.format(name=quoted).split())
    read_only = facts.variables.get("read_only", "OFF").upper() in ("ON", "1")
    if read_only or (mark.columns is not None and {"slot", "mark"} <= set(mark.columns)
                     and not facts.grants.can_write(mark.db, mark.table)):
        why = "the server is read-only (a replica?)" if read_only else f"{facts.grants.user} lacks INSERT, UPDATE on {name}"
        value = f"{why}: cdc resnapshot will read chunks under LOCK TABLES ... READ (--mode locked)"
        if facts.grants.can_lock(facts.databases):
            return Check("watermark_table", OK, value, expected)
        return Check("watermark_table", WARN, value + f"; {facts.grants.user} lacks LOCK TABLES", expected,
                     "GRANT SELECT, LOCK TABLES ON <db>.* TO " + _account(facts.grants.user) + "; for each captured "
                     "database" + ("" if read_only else f", or GRANT INSERT, UPDATE ON {quoted} (watermarks)"))
    if mark.columns is None:  # a pipeline that never re-snapshots needs none: no warning for --strict
        return Check("watermark_table", OK, f"{name} {MISSING}", expected,
                     create + "; "
                     f"GRANT INSERT, UPDATE ON {quoted} TO {_account(facts.grants.user)};")
    if not {"slot", "mark"} <= set(mark.columns):
        return Check("watermark_table", WARN, f"{name} has columns {list(mark.columns)}, not slot and mark", expected,
                     f"drop it and create it again: {create}")
    return Check("watermark_table", OK, f"{name} is writable: cdc resnapshot will use watermarks", expected)


def check_server(server: ServerInfo) -> Check:
    aurora = f" (Aurora {server.aurora_version})" if server.aurora_version else ""
    value = f"{server.flavour} {server.version}{aurora}"
    v = server.version_tuple
    if server.is_mariadb:
        status = FAIL if v < (10, 2, 0) else WARN if v < (10, 5, 0) else OK
        fix = "" if status == OK else "upgrade to MariaDB 10.5 or later"
        return Check("server", status, value, "MariaDB 10.5+", fix)
    if v < (5, 7, 0):
        return Check("server", FAIL, value, "MySQL 5.7, 8.0, 8.4", "upgrade to MySQL 8.0 or later")
    if v < (8, 0, 0):
        return Check("server", WARN, value, "MySQL 8.0+", "MySQL 5.7 is end of life and has no binlog_row_metadata; "
                     "upgrade to 8.0 or 8.4")
    return Check("server", OK, value, "MySQL 5.7, 8.0, 8.4")


def check_aurora_writer(server: ServerInfo) -> Check:
    if server.is_reader:
        return Check("aurora_writer", FAIL, f"reader instance {server.hostname}", "the writer (cluster endpoint)",
                     "connect to the cluster (writer) endpoint: Aurora readers have no binlog of their own")
    return Check("aurora_writer", OK, f"writer {server.hostname}", "the writer (cluster endpoint)")


def check_log_bin(facts: Facts) -> Check:
    value = facts.variables.get("log_bin", "OFF").upper()
    if value == "ON":
        return Check("log_bin", OK, value, "ON")
    return Check("log_bin", FAIL, value, "ON", flavour.log_bin_fix(facts.server))


def _expect(facts: Facts, name: str, wanted: str, why: str = "") -> Check:
    value = facts.variables.get(name, "")
    if value.upper() == wanted:
        return Check(name, OK, value, wanted)
    return Check(name, FAIL, value or "(not set)", wanted, flavour.variable_fix(facts.server, name, wanted) + why)


def check_row_settings(facts: Facts) -> list[Check]:
    server = facts.server
    checks = [
        _expect(facts, "binlog_format", "ROW", FORMAT_WHY),
        _expect(facts, "binlog_row_image", "FULL"),
    ]
    if "binlog_row_metadata" in facts.variables:
        checks.append(_expect(facts, "binlog_row_metadata", "FULL"))
    elif flavour.supports_row_metadata(server):
        checks.append(Check("binlog_row_metadata", FAIL, "(not reported)", "FULL",
                            flavour.variable_fix(server, "binlog_row_metadata", "FULL")))
    else:
        checks.append(Check("binlog_row_metadata", WARN, f"not available on {server.version}", "FULL",
                            "upgrade to MySQL 8.0.14+ or MariaDB 10.5+; until then column names come from "
                            "the schema history, which a DDL racing the reader can get wrong"))
    options = facts.variables.get("binlog_row_value_options")
    if options is not None and "PARTIAL_JSON" in options.upper():
        checks.append(Check("binlog_row_value_options", FAIL, options, "(empty)",
                            flavour.variable_fix(server, "binlog_row_value_options", "")
                            + "; partial JSON updates carry diffs, not the full after image"))
    else:
        shown = options if options is not None else "n/a"
        checks.append(Check("binlog_row_value_options", OK, shown, "not PARTIAL_JSON"))
    return checks


def check_compression(facts: Facts) -> Check:
    # Our binlog reader (python-mysql-replication 1.0) cannot decode MySQL's TRANSACTION_PAYLOAD
    # events nor MariaDB's compressed row events: rows inside them would be silently missing.
    for name in ("binlog_transaction_compression", "log_bin_compress"):
        value = facts.variables.get(name)
        if value is not None and value.upper() == "ON":
            return Check("binlog_compression", FAIL, f"{name}=ON", "OFF",
                         flavour.variable_fix(facts.server, name, "OFF"))
    found = [f"{n}={facts.variables[n]}" for n in ("binlog_transaction_compression", "log_bin_compress")
             if n in facts.variables]
    return Check("binlog_compression", OK, ", ".join(found) or "not available", "OFF")


def check_binlog_filters(facts: Facts) -> Check:
    """binlog-do-db / binlog-ignore-db (cdc.source.binlog_filters): a captured database left out loses every change."""
    found = facts.binlog_filters
    if found is None or not found.any:
        return Check("binlog_filters", OK, "none" if found is not None else "n/a", "none")
    if facts.unlogged_databases:
        return Check("binlog_filters", FAIL, found.describe(), "every captured database logged",
                     binlog_filters.FIX.format(databases=", ".join(facts.unlogged_databases)))
    return Check("binlog_filters", WARN, found.describe(), "none",
                 "DDL is filtered by the session's default database: ALTER, TRUNCATE or DROP a captured table only "
                 "while a logged database is the default (USE), or remove the filters")


def check_replica_updates(facts: Facts) -> Check:
    """A replica must write what it replicates to its binlog (cdc.source.replica_updates)."""
    shown = ", ".join(f"{n}={facts.variables[n]}" for n in REPLICA_UPDATES if n in facts.variables) or "n/a"
    if writes_replicated(facts.variables):
        return Check("replica_updates", OK, shown, "ON, or not a replica")
    if facts.replica is False:
        return Check("replica_updates", OK, f"{shown}, not a replica", "ON, or not a replica")
    if facts.replica:
        return Check("replica_updates", FAIL, f"{shown} on a replica", "ON, or not a replica",
                     replica_updates.FIX + "; without it the binlog lacks every replicated change")
    return Check("replica_updates", WARN, f"{shown}; replica or not unknown", "ON, or not a replica",
                 "GRANT SLAVE MONITOR (MariaDB) / REPLICATION CLIENT (MySQL) to let cdc see whether this is a "
                 "replica; if it is, " + replica_updates.FIX)


def check_replica_filters(facts: Facts) -> Check:
    """A replica that skips some of the primary's changes holds its own copy of those tables (cdc.source.replica_filters)."""
    found = facts.replica_filters
    expected = "none on the captured tables"
    if found is None or not found.any:
        unknown = facts.errors.get("replica_filters")  # no REPLICATION CLIENT / SLAVE MONITOR: replica_updates says so
        value = f"unknown: {unknown}" if unknown else "not a replica" if found is None else "none"
        return Check("replica_filters", OK, value, expected)
    if not facts.unreplicated_tables:
        return Check("replica_filters", OK, f"{found.describe()} (no captured table left out)", expected)
    shown = ", ".join(facts.unreplicated_tables[:5]) + (", ..." if len(facts.unreplicated_tables) > 5 else "")
    return Check("replica_filters", WARN, f"this replica does not apply the primary's changes to {shown}: cdc would copy "
                 "the replica's rows of them, not the primary's", expected,
                 "point cdc at the primary, remove those replicate-* filters from the replica's configuration, or leave "
                 "the tables out of capture ([mysql] exclude_tables)")


def check_retention(facts: Facts, options: Options) -> Check:
    expected = f">= {options.min_retention_hours:g}h"
    # The smallest whole number of hours that passes, within what the flavour accepts.
    hours = min(max(1, math.ceil(options.min_retention_hours)), retention_limits(facts.server)[1])
    fix = retention_fix(facts.server, hours)
    if facts.server.is_managed and facts.rds_config is None:
        return Check("binlog_retention", WARN, f"unknown: {facts.errors.get('rds_config', 'not read')}", expected,
                     "connect as the master user to read it (CALL mysql.rds_show_configuration); then " + fix)
    retention = effective_retention(facts.server, facts.variables, facts.rds_config)
    if retention.hours is None:
        return Check("binlog_retention", OK, f"{retention.describe()}: unlimited runway; watch disk space", expected)
    if retention.hours < options.min_retention_hours:
        return Check("binlog_retention", FAIL, f"{retention.describe()}: a stopped pipeline loses its position "
                     f"after {retention.hours:g}h", expected, fix)
    return Check("binlog_retention", OK, f"{retention.describe()}: runway {retention.hours:g}h for a stopped "
                 "pipeline", expected)


def check_server_id(facts: Facts) -> Check:
    if facts.server.server_id == 0:
        return Check("server_id", FAIL, "0", "non-zero", flavour.variable_fix(facts.server, "server_id", "1"))
    return Check("server_id", OK, str(facts.server.server_id), "non-zero")


def check_reader_id(facts: Facts, options: Options) -> Check:
    ours = options.reader_server_id
    value = f"{ours} ({options.reader_id_source})"
    expected = "unique among the server and its replicas"
    fix = "pick another id with --server-id (or CDC_MYSQL_SERVER_ID / [mysql] server_id in cdc.toml)"
    if ours == facts.server.server_id:
        return Check("reader_server_id", FAIL, value + " = the server's own server_id", expected, fix)
    if facts.replica_ids is None:
        return Check("reader_server_id", WARN, value + f"; cannot list replicas: {facts.errors.get('replicas', '')}",
                     expected, f"run {flavour.replicas_statement(facts.server)} as an admin and compare by hand")
    if ours in facts.replica_ids:
        return Check("reader_server_id", FAIL, value + " is used by a connected replica", expected,
                     fix + " (unless it is a running `cdc tail` of this same pipeline)")
    return Check("reader_server_id", OK, value + f"; replicas: {list(facts.replica_ids) or 'none'}", expected)


def check_gtid(facts: Facts) -> Check:
    found = facts.variables
    if facts.server.is_mariadb:
        value = (f"gtid_binlog_pos={found.get('gtid_binlog_pos') or '(empty)'}, "
                 f"gtid_strict_mode={found.get('gtid_strict_mode', '?')}")
    else:
        value = (f"gtid_mode={found.get('gtid_mode', '?')}, "
                 f"enforce_gtid_consistency={found.get('enforce_gtid_consistency', '?')}")
    return Check("gtid", OK, value, "informational: positions are file:pos; GTIDs are recorded when present")


def check_grants(facts: Facts) -> list[Check]:
    grants, server = facts.grants, facts.server
    account = _account(grants.user)
    # Roles are not expanded by SHOW GRANTS: a privilege held through a role is a warning, not a failure.
    missing = WARN if grants.roles else FAIL
    client = flavour.replication_client_privilege(server)
    checks = []
    for name, privilege, accepted in (
        ("grant_replication_slave", "REPLICATION SLAVE", ("REPLICATION SLAVE", "REPLICATION REPLICA")),
        ("grant_replication_client", client, ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER")),
    ):
        if grants.has_global(*accepted):
            checks.append(Check(name, OK, f"{privilege} held by {grants.user}", privilege))
        else:
            checks.append(Check(name, missing, f"{grants.user} lacks {privilege}", privilege,
                                f"GRANT {privilege} ON *.* TO {account};"))
    checks.append(_check_select(facts, account, missing))
    return checks


def _check_select(facts: Facts, account: str, missing: str) -> Check:
    grants, expected = facts.grants, "SELECT on the replicated databases"
    if facts.missing_databases:
        return Check("grant_select", FAIL, "database(s) not found or not visible: " + ", ".join(facts.missing_databases),
                     expected, "check --databases, or GRANT SELECT ON `db`.* TO " + account)
    if not facts.databases:
        if grants.has_global("SELECT"):
            return Check("grant_select", OK, "SELECT on *.*", expected)
        return Check("grant_select", WARN, "no SELECT on *.* and no --databases given", expected,
                     "pass --databases to check the schemas you replicate")
    lacking = [db for db in facts.databases if not grants.can_select(db)]
    if not lacking:
        return Check("grant_select", OK, f"SELECT on {', '.join(facts.databases)}", expected)
    fix = " ".join(f"GRANT SELECT ON `{db.replace('`', '``')}`.* TO {account};" for db in lacking)
    return Check("grant_select", missing, f"no SELECT on {', '.join(lacking)}", expected, fix)


def _account(user: str) -> str:
    name, _, host = user.rpartition("@") if "@" in user else (user, "", "%")
    return f"'{name.replace(chr(39), chr(39) * 2)}'@'{host.replace(chr(39), chr(39) * 2)}'"


def _binlog_access_fix(facts: Facts) -> str:
    if facts.variables.get("log_bin", "").upper() != "ON":
        return "turn on log_bin (see log_bin)"
    privilege = flavour.replication_client_privilege(facts.server)
    return f"GRANT {privilege} ON *.* TO {_account(facts.grants.user)};"


def check_binlogs(facts: Facts) -> Check:
    if facts.binlogs is None:
        why = facts.errors.get("binlogs", "binary logging is off")
        return Check("binlog_files", FAIL, why, "SHOW BINARY LOGS lists files", _binlog_access_fix(facts))
    size = sum(size for _, size in facts.binlogs)
    oldest = facts.binlogs[0][0] if facts.binlogs else "-"
    return Check("binlog_files", OK, f"{len(facts.binlogs)} file(s), {size / 2**20:.1f} MiB, oldest {oldest}",
                 "SHOW BINARY LOGS lists files")


def check_position(facts: Facts) -> Check:
    statement = facts.position_statement
    if facts.position is None:
        why = facts.errors.get("position") or facts.errors.get("binlogs") or "binary logging is off"
        return Check("binlog_position", FAIL, f"{statement}: {why}", "a current file:pos", _binlog_access_fix(facts))
    return Check("binlog_position", OK, f"{facts.position[0]}:{facts.position[1]} ({statement})", "a current file:pos")


def state_checks(root: Path, facts: Facts) -> list[Check]:
    """If the state directory exists, check (read-only) that it belongs to this server and its position lives."""
    if not root.is_dir():
        return []
    state = StateDir(root)
    try:
        known = state.read_server()
        tail = TailCheckpoint.read(state)
    except CdcError as exc:
        return [Check("state_dir", FAIL, exc.message, "readable state", exc.hint or "")]
    found = facts.server.identity()
    checks = []
    if known is None:
        checks.append(Check("state_server", OK, f"{root}: no server recorded yet", "this server"))
    elif known.is_same_server(found):
        checks.append(Check("state_server", OK, f"{root} belongs to this server", "this server"))
    else:
        checks.append(Check("state_server", FAIL, f"{root} belongs to {known.describe()}", found.describe(),
                            "point --state-dir at this server's state directory, or, after a failover to this "
                            "server, run `cdc tail --rebase` (see the rebase check)"))
        if tail is not None:  # its file:pos means nothing here: what counts is whether its GTIDs are here
            checks.append(_check_rebase(tail, facts))
            return checks
    if tail is not None:
        checks.append(_check_tail(tail, facts))
    return checks


def _check_rebase(tail: TailCheckpoint, facts: Facts) -> Check:
    """After a failover: does this server hold every transaction tail captured on the old one?"""
    captured = tail.gtid_state
    expected = "this server's binlogs hold every transaction tail captured"
    fix = "take a new `cdc snapshot` into a new state directory"
    if not captured:
        return Check("rebase", FAIL, "tail.json records no GTID state (an older cdc, or a server without GTIDs)",
                     expected, fix)
    held = facts.variables.get("gtid_binlog_pos" if facts.server.is_mariadb else "gtid_executed") or ""
    try:
        missing = GtidSet.parse(held).describe_missing(GtidSet.parse(captured))
    except CdcError as exc:
        return Check("rebase", FAIL, exc.message, expected, fix)
    if missing:
        return Check("rebase", FAIL, f"this server lacks {missing} (it holds {held or 'no GTIDs'})", expected, fix)
    return Check("rebase", OK, f"this server holds {captured}: `cdc tail --rebase` can go on here", expected)


def _check_tail(tail: TailCheckpoint, facts: Facts) -> Check:
    where = f"{tail.file}:{tail.pos}"
    if facts.binlogs is None:
        return Check("tail_position", WARN, f"{where}: cannot list the server's binlogs", "the checkpoint's binlog file exists",
                     _binlog_access_fix(facts))
    if tail.file in {name for name, _ in facts.binlogs}:
        return Check("tail_position", OK, f"{where} is still on the server", "the checkpoint's binlog file exists")
    return Check("tail_position", FAIL, f"{where}: file purged from the server", "the checkpoint's binlog file exists",
                 "the change log has a gap: take a new snapshot (cdc snapshot) and raise retention (cdc set-retention)")
