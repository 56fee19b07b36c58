"""A replica whose binlog lacks what it replicates: `log_slave_updates` / `log_replica_updates` OFF.

cdc may read a replica (to spare the primary; `cdc resnapshot --mode locked` is made for a read-only one). A
replica writes the transactions it applies to its own binlog only with log_slave_updates ON (MySQL 8.0.26+:
log_replica_updates; ON by default on MySQL 8.0, OFF on MariaDB and MySQL 5.7). Without it the binlog holds only
what was written on the replica itself: a snapshot taken there is right, and tail then reads none of the changes
after it and says "caught up". Refused as not ready (exit 4); check-binlog fails it.

Whether the server replicates is read from SHOW REPLICA STATUS (SHOW SLAVE STATUS before MySQL 8.0.22 and
MariaDB 10.5.1), which needs REPLICATION CLIENT (MySQL) or SLAVE MONITOR (MariaDB 10.5.9+): without it the answer
is unknown, and only check-binlog says so (a warning).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pymysql

from cdc.errors import PreconditionError
from cdc.source.connect import PRIVILEGE_DENIED

NAMES = ("log_replica_updates", "log_slave_updates")
UNKNOWN = None
FIX = ("add log_slave_updates=ON (MySQL 8.0.26+: log_replica_updates=ON) under [mysqld] and restart the replica (not "
       "settable at run time; RDS/Aurora: enable backups on the replica), or point cdc at the primary")


def writes_replicated(variables: Mapping[str, str]) -> bool:
    """The server writes the transactions it replicates to its binlog (or says nothing of it: an old flavour)."""
    found = [variables[n] for n in NAMES if n in variables]
    return not found or found[0].upper() in ("ON", "1")


def replica_status(conn: pymysql.Connection) -> dict[str, Any] | None:
    """SHOW REPLICA STATUS's row (SHOW SLAVE STATUS on flavours without that spelling); None: not a replica. A
    missing privilege raises OperationalError (PRIVILEGE_DENIED)."""
    for statement in ("SHOW REPLICA STATUS", "SHOW SLAVE STATUS"):
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cursor:
                cursor.execute(statement)
                row: dict[str, Any] | None = cursor.fetchone()
                return row
        except pymysql.err.ProgrammingError:  # a flavour without this spelling
            continue
    return None


def is_replica(conn: pymysql.Connection) -> bool | None:
    """The server is set up to replicate from a primary; None when that cannot be read (privilege)."""
    try:
        return replica_status(conn) is not None
    except pymysql.err.OperationalError as exc:
        if not exc.args or exc.args[0] not in PRIVILEGE_DENIED:
            raise
    return _slave_running(conn)  # the privilege is missing


def _slave_running(conn: pymysql.Connection) -> bool | None:
    """MariaDB's status variable Slave_running, which needs no privilege (MySQL 5.7+ has none: None)."""
    with conn.cursor() as cursor:
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Slave_running'")
        row = cursor.fetchone()
    return UNKNOWN if row is None else str(row[1]).upper() == "ON"


def require_replica_updates(conn: pymysql.Connection, variables: Mapping[str, str], where: str) -> None:
    """Refuse (exit 4) a replica that leaves what it replicates out of its binlog (`variables`: the server's)."""
    if writes_replicated(variables) or not is_replica(conn):
        return
    raise PreconditionError(
        f"{where} is a replica that does not write the changes it replicates to its binlog (log_slave_updates / "
        "log_replica_updates OFF): tail would see only writes made on the replica itself", hint=FIX)
