"""Pure decisions per server flavour and version: which statement to run, how to fix a setting.

Nothing here talks to a server, so every branch (MySQL 5.7 / 8.0 / 8.4, MariaDB, RDS, Aurora)
is covered by unit tests even though the test rig only runs MariaDB.
"""

from __future__ import annotations

from cdc.source.server import AURORA_MYSQL, MARIADB, RDS_MARIADB, RDS_MYSQL, ServerInfo


def is_mysql8(server: ServerInfo) -> bool:
    return not server.is_mariadb and server.version_tuple >= (8, 0, 0)


def binlog_status_statement(server: ServerInfo) -> str:
    """The statement that shows the current binlog file and position on this server.

    MySQL 8.2 added SHOW BINARY LOG STATUS and 8.4 removed SHOW MASTER STATUS;
    MariaDB 10.5.2 added SHOW BINLOG STATUS (SHOW MASTER STATUS still works there).
    """
    if server.is_mariadb:
        return "SHOW BINLOG STATUS" if server.version_tuple >= (10, 5, 2) else "SHOW MASTER STATUS"
    if server.version_tuple >= (8, 2, 0):
        return "SHOW BINARY LOG STATUS"
    return "SHOW MASTER STATUS"


def replicas_statement(server: ServerInfo) -> str:
    """The statement that lists connected replicas (MySQL 8.0.22 renamed SHOW SLAVE HOSTS, 8.4 removed it)."""
    if not server.is_mariadb and server.version_tuple >= (8, 0, 22):
        return "SHOW REPLICAS"
    return "SHOW SLAVE HOSTS"


def supports_row_metadata(server: ServerInfo) -> bool:
    """binlog_row_metadata exists on MySQL 8.0.14+ and MariaDB 10.5+."""
    if server.is_mariadb:
        return server.version_tuple >= (10, 5, 0)
    return server.version_tuple >= (8, 0, 14)


def replication_client_privilege(server: ServerInfo) -> str:
    """MariaDB 10.5.2 split REPLICATION CLIENT; BINLOG MONITOR is what SHOW BINARY LOGS needs there."""
    if server.is_mariadb and server.version_tuple >= (10, 5, 2):
        return "BINLOG MONITOR"
    return "REPLICATION CLIENT"


def sql_literal(value: str) -> str:
    """A value as it appears in a fix the user copies: keywords and numbers bare, the rest quoted."""
    if value.isdigit() or value.upper() in ("ON", "OFF"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def variable_fix(server: ServerInfo, name: str, value: str) -> str:
    """How to set a dynamic server variable for good on this flavour (a statement or a parameter group)."""
    if server.flavour == AURORA_MYSQL:
        return f"DB cluster parameter group: {name} = {value or '(empty)'}, then reboot the writer instance"
    if server.flavour in (RDS_MYSQL, RDS_MARIADB):
        return f"DB parameter group: {name} = {value or '(empty)'} (RDS has no SUPER; SET GLOBAL is refused)"
    if is_mysql8(server):
        return f"SET PERSIST {name} = {sql_literal(value)};"
    return (
        f"SET GLOBAL {name} = {sql_literal(value)}; and add {name}={value} under [mysqld] in the server's "
        "config file (SET GLOBAL does not survive a restart)"
    )


def log_bin_fix(server: ServerInfo) -> str:
    """Binary logging cannot be switched on at run time; each flavour turns it on differently."""
    if server.flavour == AURORA_MYSQL:
        return ("DB cluster parameter group: binlog_format = ROW, then reboot the writer "
                "(Aurora writes a binlog only when binlog_format is set)")
    if server.flavour in (RDS_MYSQL, RDS_MARIADB):
        return "enable automated backups (backup retention period >= 1 day): RDS turns on the binlog with them"
    base = "mariadb-bin" if server.flavour == MARIADB else "mysql-bin"
    return (f"add log_bin={base}, server_id=1 (any non-zero id unique among your servers) and binlog_format=ROW "
            "under [mysqld] in the server's config file, then restart the server")
