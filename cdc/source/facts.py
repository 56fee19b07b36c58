"""Gather what check-binlog judges: one read-only pass over the server, no verdicts here.

Every statement is read-only. A statement the user may not run (SHOW SLAVE HOSTS needs
REPLICATION MASTER ADMIN on MariaDB) is recorded as an error text, not raised: the check
that needs it then says what is missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pymysql

from cdc.schema import ForeignKey
from cdc.source.binlog_filters import BinlogFilters, captured_databases, read_filters, unlogged
from cdc.source.connect import query, variables
from cdc.source.flavour import binlog_status_statement, replicas_statement
from cdc.source.replica_filters import ReplicaFilters, read_replica_filters, unreplicated
from cdc.source.replica_updates import NAMES as REPLICA_UPDATES
from cdc.source.replica_updates import is_replica, writes_replicated
from cdc.source.retention import RETENTION_VARIABLES, read_rds_config
from cdc.source.schema_reads import SYSTEM_SCHEMAS, read_table_schema, select_foreign_keys, user_databases
from cdc.source.server import ServerInfo, describe_server
from cdc.source.tables import SYSTEM_VERSIONED, is_captured

VARIABLES = [
    "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "binlog_row_value_options",
    "binlog_transaction_compression", "log_bin_compress", "gtid_mode", "enforce_gtid_consistency", "gtid_executed",
    "gtid_binlog_pos", "gtid_strict_mode", "read_only", *RETENTION_VARIABLES, *REPLICA_UPDATES,
]


@dataclass(frozen=True)
class Grants:
    """The current user's privileges from SHOW GRANTS (never the raw lines: they hold password hashes)."""

    user: str
    by_scope: Mapping[str, frozenset[str]]  # "*.*", "db.*" (LIKE patterns kept), "db.table" -> privileges
    roles: tuple[str, ...] = ()

    def has_global(self, *names: str) -> bool:
        held = self.by_scope.get("*.*", frozenset())
        return "ALL PRIVILEGES" in held or any(name in held for name in names)

    def can_write(self, database: str, table: str) -> bool:
        """INSERT and UPDATE on db.table, from a global, database (LIKE pattern) or table grant."""
        needed = {"INSERT", "UPDATE"}
        for scope, held in self.by_scope.items():
            db, _, name = scope.partition(".")
            matches = scope == "*.*" or (name == "*" and _like(db, database)) or (db, name) == (database, table)
            if matches and ("ALL PRIVILEGES" in held or needed <= held):
                return True
        return False

    def can_lock(self, databases: Iterable[str]) -> bool:
        """LOCK TABLES on every database (a locked re-snapshot read, cdc.lockedreads); global or database grants."""
        wanted = tuple(databases)
        if self.has_global("LOCK TABLES") or not wanted:  # no databases named: every one, so a global grant
            return self.has_global("LOCK TABLES")
        for database in wanted:
            if not any(scope.endswith(".*") and _like(scope[:-2], database)
                       and ("LOCK TABLES" in held or "ALL PRIVILEGES" in held) for scope, held in self.by_scope.items()):
                return False
        return True

    def can_select(self, database: str) -> bool:
        if self.has_global("SELECT"):
            return True
        for scope, held in self.by_scope.items():
            db, _, table = scope.partition(".")
            if table == "*" and _like(db, database) and ("SELECT" in held or "ALL PRIVILEGES" in held):
                return True
        return False


_GRANT = re.compile(r"^GRANT (?P<privs>.+?) ON (?:(?:TABLE|FUNCTION|PROCEDURE) )?(?P<scope>\S+) TO ", re.I)
_ROLE = re.compile(r"^GRANT (?P<roles>.+?) TO ", re.I)


def parse_grants(user: str, lines: Iterable[str]) -> Grants:
    """Parse SHOW GRANTS output of MySQL 5.7/8.x and MariaDB into privileges per scope."""
    by_scope: dict[str, set[str]] = {}
    roles: list[str] = []
    for line in lines:
        match = _GRANT.match(line)
        if match is None:
            role = _ROLE.match(line)
            if role and not line.upper().startswith("GRANT PROXY"):
                roles.append(role["roles"])
            continue
        scope = match["scope"].replace("`", "")
        # Column grants look like "SELECT (a, b)": drop the column list, keep the privilege.
        privileges = re.sub(r"\([^)]*\)", "", match["privs"])
        held = {" ".join(p.split()).upper() for p in privileges.split(",") if p.strip()}
        by_scope.setdefault(scope, set()).update(held)
    return Grants(user, {k: frozenset(v) for k, v in by_scope.items()}, tuple(roles))


def _like(pattern: str, name: str) -> bool:
    """Database grants are LIKE patterns (`shop\\_%`): % any run, _ one character, \\ escapes."""
    regex, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            regex, i = regex + re.escape(pattern[i + 1]), i + 2
            continue
        regex += ".*" if char == "%" else "." if char == "_" else re.escape(char)
        i += 1
    return re.fullmatch(regex, name) is not None


@dataclass(frozen=True)
class WatermarkTable:
    """The table `cdc resnapshot` writes its watermarks to: its name and columns (None: it does not exist)."""

    db: str
    table: str
    columns: tuple[str, ...] | None


@dataclass(frozen=True)
class Facts:
    server: ServerInfo
    variables: Mapping[str, str]
    rds_config: Mapping[str, str | None] | None
    grants: Grants
    databases: tuple[str, ...]
    missing_databases: tuple[str, ...]
    tables_without_pk: tuple[str, ...]
    binlogs: tuple[tuple[str, int], ...] | None
    position: tuple[str, int] | None
    position_statement: str
    replica_ids: tuple[int, ...] | None
    errors: Mapping[str, str] = field(default_factory=dict)  # what could not be read, and why
    # Tables without a primary key but with a UNIQUE NOT NULL key -> that key's columns (the key cdc uses);
    # tables_without_pk are the others: keyless, replicated as multisets of rows.
    unique_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Foreign keys whose child or parent is in scope, with ON DELETE / ON UPDATE rules (issue #24).
    foreign_keys: tuple[ForeignKey, ...] = ()
    watermark: WatermarkTable | None = None
    # binlog-do-db / binlog-ignore-db (None: binlog off or unreadable) and the captured databases they leave out.
    binlog_filters: BinlogFilters | None = None
    unlogged_databases: tuple[str, ...] = ()
    replica: bool | None = False  # set up to replicate (read only when it matters: log_slave_updates OFF); None: unknown
    # A replica's replicate-* filters (None: not a replica, or unreadable) and the captured tables they leave out.
    replica_filters: ReplicaFilters | None = None
    unreplicated_tables: tuple[str, ...] = ()
    versioned_tables: tuple[str, ...] = ()  # MariaDB's WITH SYSTEM VERSIONING tables in the captured databases


def _watermark(conn: pymysql.Connection, name: tuple[str, str] | None) -> WatermarkTable | None:
    if name is None:
        return None
    rows = query(conn, "SELECT COLUMN_NAME AS c FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                 "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", name)
    return WatermarkTable(name[0], name[1], tuple(str(r["c"]) for r in rows) or None)


def gather(conn: pymysql.Connection, databases: tuple[str, ...], watermark: tuple[str, str] | None = None) -> Facts:
    """Read everything check-binlog needs from an open connection (`watermark`: the table's db and name)."""
    server = describe_server(conn)
    errors: dict[str, str] = {}
    found = variables(conn, VARIABLES)
    rds_config = _try(errors, "rds_config", lambda: read_rds_config(conn)) if server.is_managed else None
    binlogs = _try(errors, "binlogs", lambda: _binlogs(conn)) if found.get("log_bin", "").upper() == "ON" else None
    status = binlog_status_statement(server)
    position = _try(errors, "position", lambda: _position(conn, status)) if binlogs is not None else None
    replica_ids = _try(errors, "replicas", lambda: _replica_ids(conn, replicas_statement(server)))
    user = str(query(conn, "SELECT CURRENT_USER() AS u")[0]["u"])
    grants = parse_grants(user, [str(next(iter(row.values()))) for row in query(conn, "SHOW GRANTS")])
    present = {str(r["s"]) for r in query(conn, "SELECT SCHEMA_NAME AS s FROM information_schema.SCHEMATA")}
    without_pk = _tables_without_pk(conn, databases)
    filters = _try(errors, "binlog_filters", lambda: read_filters(conn, status)) if binlogs is not None else None
    replica = False if writes_replicated(found) else _try(errors, "replica", lambda: is_replica(conn))
    captured = captured_databases(databases, (), sorted(present - set(SYSTEM_SCHEMAS)))
    lost = unlogged(filters, captured) if filters else []
    replicated = _try(errors, "replica_filters", lambda: read_replica_filters(conn))
    skipped = unreplicated(replicated, _tables(conn, captured)) if replicated is not None and replicated.any else []
    unique_keys = {f"{db}.{table}": key for db, table in without_pk
                   for key in [_unique_key(conn, db, table)] if key}
    return Facts(
        server=server, variables=found, rds_config=rds_config, grants=grants, databases=databases,
        missing_databases=tuple(db for db in databases if db not in present),
        tables_without_pk=tuple(name for name in (f"{db}.{table}" for db, table in without_pk)
                                if name not in unique_keys),
        binlogs=binlogs, position=position, position_statement=status, replica_ids=replica_ids, errors=errors,
        unique_keys=unique_keys, watermark=_watermark(conn, watermark),
        foreign_keys=_try(errors, "foreign_keys", lambda: _foreign_keys(conn, databases)) or (),
        binlog_filters=filters, unlogged_databases=tuple(lost), replica=replica,
        replica_filters=replicated, unreplicated_tables=tuple(skipped),
        versioned_tables=tuple(f"{db}.{table}" for db, table in _tables(conn, captured, SYSTEM_VERSIONED)),
    )


def in_scope(facts: Facts, databases: Sequence[str], tables: Sequence[str], exclude_tables: Sequence[str]) -> Facts:
    """The facts with their lists of tables narrowed to the ones tail captures (the settings' table filters): a
    table the user left out with `exclude_tables`, as the keyless and system-versioned warnings advise, is no
    longer warned of. Foreign keys stay whole: a cascade into a table left out is worth a note."""
    def kept(name: str) -> bool:
        db, _, table = name.partition(".")
        return is_captured(databases, tables, exclude_tables, db, table)

    return replace(facts, tables_without_pk=tuple(filter(kept, facts.tables_without_pk)),
                   unique_keys={name: key for name, key in facts.unique_keys.items() if kept(name)},
                   versioned_tables=tuple(filter(kept, facts.versioned_tables)),
                   # "db.table (rule)": the name is before the rule
                   unreplicated_tables=tuple(n for n in facts.unreplicated_tables if kept(n.rsplit(" (", 1)[0])))


def _unique_key(conn: pymysql.Connection, db: str, table: str) -> tuple[str, ...]:
    """The UNIQUE NOT NULL key snapshot and tail use for a table without a primary key (schema_reads' choice)."""
    schema = read_table_schema(conn, db, table)
    return () if schema is None else schema.primary_key


def _try(errors: dict[str, str], what: str, read: Any) -> Any:
    try:
        return read()
    except pymysql.err.MySQLError as exc:
        errors[what] = str(exc.args[-1]) if exc.args else str(exc)
        return None


def _binlogs(conn: pymysql.Connection) -> tuple[tuple[str, int], ...]:
    rows = query(conn, "SHOW BINARY LOGS")
    return tuple((str(row["Log_name"]), int(row["File_size"])) for row in rows)


def _position(conn: pymysql.Connection, statement: str) -> tuple[str, int] | None:
    rows = query(conn, statement)
    return (str(rows[0]["File"]), int(rows[0]["Position"])) if rows else None


def _replica_ids(conn: pymysql.Connection, statement: str) -> tuple[int, ...]:
    rows = query(conn, statement)
    # MySQL 8.0.22+ spells the column Server_Id, older servers and MariaDB Server_id.
    return tuple(int(value) for row in rows for key, value in row.items() if key.lower() == "server_id")


def _tables(conn: pymysql.Connection, databases: list[str], kind: str = "BASE TABLE") -> list[tuple[str, str]]:
    """The tables of `databases` of this TABLE_TYPE."""
    if not databases:
        return []
    rows = query(conn, "SELECT TABLE_SCHEMA AS db, TABLE_NAME AS tbl FROM information_schema.TABLES WHERE TABLE_TYPE = "
                 f"%s AND TABLE_SCHEMA IN ({', '.join(['%s'] * len(databases))}) ORDER BY 1, 2", [kind, *databases])
    return [(str(r["db"]), str(r["tbl"])) for r in rows]


def _tables_without_pk(conn: pymysql.Connection, databases: tuple[str, ...]) -> list[tuple[str, str]]:
    if databases:
        where, params = f"t.TABLE_SCHEMA IN ({', '.join(['%s'] * len(databases))})", list(databases)
    else:
        where, params = f"t.TABLE_SCHEMA NOT IN ({', '.join(['%s'] * len(SYSTEM_SCHEMAS))})", list(SYSTEM_SCHEMAS)
    # STATISTICS, not TABLE_CONSTRAINTS: MariaDB shows a user with SELECT but no table-level grant (the
    # least-privilege reader of examples/mysql-grants.sql) no TABLE_CONSTRAINTS rows at all, so every table
    # looked keyless. COLUMNS.COLUMN_KEY = 'PRI' is no better: it also marks a UNIQUE NOT NULL key.
    rows = query(
        conn,
        "SELECT t.TABLE_SCHEMA AS db, t.TABLE_NAME AS tbl FROM information_schema.TABLES t "
        "WHERE t.TABLE_TYPE = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS s "
        "WHERE s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME AND s.INDEX_NAME = 'PRIMARY') "
        f"AND {where} ORDER BY 1, 2",
        params,
    )
    return [(str(row["db"]), str(row["tbl"])) for row in rows]


def _foreign_keys(conn: pymysql.Connection, databases: tuple[str, ...]) -> tuple[ForeignKey, ...]:
    """Every foreign key with its child or its parent in `databases` (all non-system databases if none).

    A child may sit in any database, so every database is read, one at a time (select_foreign_keys says why)."""
    keys = (key for schema in user_databases(conn) for key in select_foreign_keys(conn, schema))
    return tuple(k for k in keys if not databases or k.db in databases or k.ref_db in databases)
