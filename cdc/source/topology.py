"""`[mysql] hosts`: the servers of one replication topology, and which of them tail should read (issue #27).

After a failover (the primary killed and a replica promoted) or a planned switchover (the primary set read-only,
a caught-up replica promoted) the server that takes writes is another one of the list. Tail reads the first
server of the list, in order, that answers and is writable (`read_only` off): replicas run read-only (RDS,
Aurora and most set-ups do; the MySQL manual recommends it), a promoted one no longer is. When none is
writable (mid-promotion) the current server is kept if it answers, else the first that answers.

The server chosen is never trusted by its place in the list: tail continues on it only by GTIDs, with the
checks of `cdc tail --rebase` (cdc.capture.rebase), so an unrelated server listed by mistake is refused (exit 5).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import pymysql

from cdc.config import MySQLSettings
from cdc.errors import CdcError, TransientError
from cdc.settings import parse_host
from cdc.source.connect import open_connection, query
from cdc.source.server import describe_server

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 5  # seconds to connect to and ask one candidate: a dead host must not hold the choice long


@dataclass(frozen=True)
class Candidate:
    settings: MySQLSettings
    answered: bool
    writable: bool
    why: str = ""  # what failed, for the message when no server answers

    @property
    def where(self) -> str:
        return self.settings.describe()


def candidates(mysql: MySQLSettings) -> list[MySQLSettings]:
    """The servers of `mysql.hosts` (host or host:port, the port defaulting to `mysql.port`); [mysql] alone without."""
    if not mysql.hosts:
        return [mysql]
    return [replace(mysql, host=host, port=port, socket=None) for host, port in
            (parse_host(entry, mysql.port) for entry in mysql.hosts)]


def probe(settings: MySQLSettings) -> Candidate:
    """Whether the server answers and takes writes (read_only, innodb_read_only and MySQL's super_read_only off)."""
    try:
        conn = open_connection(replace(settings, connect_timeout=min(settings.connect_timeout, PROBE_TIMEOUT)),
                               read_timeout=PROBE_TIMEOUT)
    except CdcError as exc:
        return Candidate(settings, False, False, exc.message)
    try:
        # Aurora's reader instances run innodb_read_only (their read_only may be off); MySQL's super_read_only
        # turns read_only on by itself.
        row = query(conn, "SELECT @@GLOBAL.read_only AS ro, @@GLOBAL.innodb_read_only AS iro")[0]
        return Candidate(settings, True, not int(row["ro"] or 0) and not int(row["iro"] or 0))
    except pymysql.err.MySQLError as exc:
        return Candidate(settings, False, False, str(exc.args[-1]))
    finally:
        conn.close()


def choose(mysql: MySQLSettings, current: MySQLSettings | None = None) -> MySQLSettings:
    """The server tail should read now (see the module docstring); TransientError when none answers."""
    found = [probe(settings) for settings in candidates(mysql)]
    for candidate in found:
        if candidate.writable:
            return candidate.settings
    answering = [c for c in found if c.answered]
    for candidate in answering:
        if current is not None and _same(candidate.settings, current):
            return candidate.settings
    if answering:
        return answering[0].settings
    raise TransientError("no server of mysql.hosts answers: " + "; ".join(f"{c.where}: {c.why}" for c in found),
                         hint="check that one of them runs and takes writes (the promoted primary)")


def switch_to(mysql: MySQLSettings, current: MySQLSettings) -> MySQLSettings | None:
    """A writable server of the list other than `current`, when `current` itself no longer takes writes or is gone."""
    if not mysql.hosts:
        return None
    now = probe(current)
    if now.writable:
        return None
    chosen = choose(mysql, current)
    return None if _same(chosen, current) else chosen


def is_replaced(settings: MySQLSettings, server_uuid: str) -> bool:
    """Whether the address now leads to another server than `server_uuid`: an endpoint (RDS, Aurora, a DNS name or
    virtual IP) moved to the promoted replica. TransientError when it cannot tell (no answer): the caller retries,
    and must not read the address meanwhile (it may answer with the other server at its next try)."""
    conn = open_connection(replace(settings, connect_timeout=min(settings.connect_timeout, PROBE_TIMEOUT)),
                           read_timeout=PROBE_TIMEOUT)
    try:
        return describe_server(conn).server_uuid != server_uuid
    except pymysql.err.MySQLError as exc:
        raise TransientError(f"cannot tell which server answers at {settings.describe()}: {exc.args[-1]}") from None
    finally:
        conn.close()


def _same(a: MySQLSettings, b: MySQLSettings) -> bool:
    return (a.host, a.port) == (b.host, b.port)
