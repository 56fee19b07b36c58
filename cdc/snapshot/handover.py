"""Start a consistent snapshot and find the binlog position it corresponds to (the hand-over).

Every change committed before the hand-over position is in the snapshot; every change after it
is in the binlog from that position on. Ways to get there, by --lock:

- `auto`: MariaDB -> `mariadb` below (no lock at all); MySQL -> `global`, falling back to `tables`
  when FLUSH TABLES WITH READ LOCK is not allowed (RDS/Aurora: no RELOAD/SUPER).
- `mariadb`: START TRANSACTION WITH CONSISTENT SNAPSHOT, then the status variables
  Binlog_snapshot_file/_position, which MariaDB keeps consistent with the transaction's view
  (https://mariadb.com/kb/en/enhancements-for-start-transaction-with-consistent-snapshot/).
- `global`: FLUSH TABLES WITH READ LOCK on a second connection (blocks every write on the server),
  START TRANSACTION WITH CONSISTENT SNAPSHOT on the reading connection, read the position,
  UNLOCK TABLES. The lock lasts milliseconds plus the wait for running statements to finish.
- `tables`: the same with LOCK TABLES ... READ on the selected tables only (blocks writes to them).
  Held on a second connection because on the reading connection START TRANSACTION would release it.
- `none`: no lock; exact on MariaDB (same as `mariadb`); on MySQL only if nothing writes to the
  selected tables while the snapshot starts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pymysql

from cdc.checkpoints import Handover as Handover  # re-exported: part of snapshot.json, owned by cdc.checkpoints
from cdc.config import MySQLSettings
from cdc.errors import PreconditionError, UsageError
from cdc.source.connect import open_connection, query
from cdc.source.server import ServerInfo
from cdc.source.tables import TableInfo, qualified

LOCK_MODES = ("auto", "mariadb", "global", "tables", "none")
# How long FTWRL / LOCK TABLES may wait for running statements: while it waits, it already
# blocks new writes, so a long wait is worse than failing and retrying later.
LOCK_WAIT_SECONDS = 30
# ER_SPECIFIC_ACCESS_DENIED_ERROR (no RELOAD), ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR,
# ER_TABLEACCESS_DENIED_ERROR: the privilege errors that make `auto` fall back.
_PRIVILEGE_ERRORS = {1227, 1044, 1045, 1142}


@dataclass(frozen=True)
class HandoverResult:
    handover: Handover
    lock: str  # the mode actually used
    lock_seconds: float
    warnings: list[str] = field(default_factory=list)


def status_statement(info: ServerInfo) -> str:
    """SHOW MASTER STATUS was renamed in MySQL 8.2 and removed in 8.4."""
    if not info.is_mariadb and info.version_tuple >= (8, 2, 0):
        return "SHOW BINARY LOG STATUS"
    return "SHOW MASTER STATUS"


def gtid_statement(info: ServerInfo) -> str:
    return "SELECT @@GLOBAL.gtid_binlog_pos" if info.is_mariadb else "SELECT @@GLOBAL.gtid_executed"


def resolve_mode(mode: str, info: ServerInfo) -> str:
    if mode not in LOCK_MODES:
        raise UsageError(f"--lock {mode!r} is not one of {', '.join(LOCK_MODES)}")
    if mode == "mariadb" and not info.is_mariadb:
        raise UsageError("--lock mariadb needs MariaDB (Binlog_snapshot_* status); this is " + info.flavour,
                         hint="use --lock auto, global or tables")
    if mode in ("auto", "none") and info.is_mariadb:
        return "mariadb"
    return "global" if mode == "auto" else mode


def begin_snapshot(conn: pymysql.Connection) -> None:
    """Open the REPEATABLE READ transaction whose view every chunk is read from."""
    with conn.cursor() as cursor:
        cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")


def take_handover(
    settings: MySQLSettings, reader: pymysql.Connection, info: ServerInfo, tables: Sequence[TableInfo], mode: str
) -> HandoverResult:
    """Start the snapshot transaction on `reader` and return its hand-over position."""
    chosen = resolve_mode(mode, info)
    if chosen == "mariadb":
        begin_snapshot(reader)
        return HandoverResult(_mariadb_snapshot_position(reader), "mariadb", 0.0)
    if chosen == "none":
        begin_snapshot(reader)
        warning = ("--lock none on MySQL: the hand-over position is read after the snapshot started; "
                   "it is exact only if nothing wrote to the selected tables meanwhile")
        return HandoverResult(read_position(reader, info), "none", 0.0, [warning])
    try:
        return _locked(settings, reader, info, tables, chosen)
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        if mode == "auto" and chosen == "global" and code in _PRIVILEGE_ERRORS:
            result = _locked(settings, reader, info, tables, "tables")
            note = f"FLUSH TABLES WITH READ LOCK was refused ({exc.args[1]}); locked the selected tables instead"
            return HandoverResult(result.handover, result.lock, result.lock_seconds, [note])
        raise _lock_error(chosen, exc) from None


def _locked(
    settings: MySQLSettings, reader: pymysql.Connection, info: ServerInfo, tables: Sequence[TableInfo], mode: str
) -> HandoverResult:
    locker = open_connection(settings)
    try:
        with locker.cursor() as cursor:
            cursor.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_SECONDS}")
            started = time.monotonic()
            cursor.execute(lock_statement(mode, tables))
            try:
                begin_snapshot(reader)
                handover = read_position(locker, info)
            finally:
                cursor.execute("UNLOCK TABLES")
            held = time.monotonic() - started
    finally:
        locker.close()
    return HandoverResult(handover, mode, held)


def lock_statement(mode: str, tables: Sequence[TableInfo]) -> str:
    if mode == "global":
        return "FLUSH TABLES WITH READ LOCK"
    return "LOCK TABLES " + ", ".join(f"{qualified(t.db, t.table)} READ" for t in tables)


def read_position(conn: pymysql.Connection, info: ServerInfo) -> Handover:
    """The server's current binlog position (under a lock, it is the snapshot's)."""
    with conn.cursor() as cursor:
        cursor.execute(status_statement(info))
        row = cursor.fetchone()
        if not row:
            raise _binlog_off()
        file, pos = str(row[0]), int(row[1])
        cursor.execute(gtid_statement(info))
        gtid = cursor.fetchone()[0]
    # MySQL prints long GTID sets over several lines; an empty set means GTIDs are off.
    text = "" if gtid is None else str(gtid).replace("\n", "")
    return Handover(file, pos, text or None)


def _mariadb_snapshot_position(conn: pymysql.Connection) -> Handover:
    rows = {str(r["Variable_name"]).lower(): r["Value"] for r in query(conn, "SHOW STATUS LIKE 'binlog_snapshot_%'")}
    file = rows.get("binlog_snapshot_file")
    if not file:
        raise _binlog_off()
    pos = int(rows["binlog_snapshot_position"])
    quiet, gtid = _gtid_if_binlog_still_at(conn, str(file), pos)
    if not quiet:
        found = query(conn, "SELECT BINLOG_GTID_POS(%s, %s) AS g", (file, pos))
        gtid = found[0]["g"] if found else None
    return Handover(str(file), pos, str(gtid) if gtid else None)


def _gtid_if_binlog_still_at(conn: pymysql.Connection, file: str, pos: int) -> tuple[bool, str | None]:
    """(True, the server's GTID position) if nothing was written to the binlog since `file:pos`; else (False, None).

    BINLOG_GTID_POS reads the binlog file from its start up to the position: up to max_binlog_size
    (1 GB by default) per snapshot, and on a quiet server most of a small snapshot's time. When the
    binlog still ends at the snapshot's position, the server's GTID position is the snapshot's. The
    check brackets the GTID read with two reads of the binlog's end: MariaDB updates its GTID state
    while it writes a transaction to the binlog, holding the binlog's lock, and SHOW MASTER STATUS
    takes that lock, so a GTID read here whose transaction was being written shows as an end past the
    snapshot's. A group written to the binlog but not yet committed in InnoDB (outside the snapshot) does too.
    """
    if _binlog_end(conn) != (file, pos):
        return False, None
    found = query(conn, "SELECT @@GLOBAL.gtid_binlog_pos AS g")
    if _binlog_end(conn) != (file, pos):
        return False, None
    gtid = found[0]["g"] if found else None
    return True, str(gtid) if gtid else None


def _binlog_end(conn: pymysql.Connection) -> tuple[str, int] | None:
    """Where the binlog ends now, or None where the server will not say: a user without BINLOG MONITOR, a
    server that no longer knows the statement. BINLOG_GTID_POS, which needs neither, is read then."""
    try:
        with conn.cursor() as cursor:
            cursor.execute("SHOW MASTER STATUS")
            row = cursor.fetchone()
    except pymysql.err.MySQLError as exc:
        if exc.args and isinstance(exc.args[0], int) and exc.args[0] < 2000:  # the server's answer, not a lost link
            return None
        raise
    return (str(row[0]), int(row[1])) if row else None


def _binlog_off() -> PreconditionError:
    return PreconditionError("binary logging is off on the server: there is no position to hand over to tail",
                             hint="enable log_bin (run `cdc check-binlog` for the full list of settings)")


def _lock_error(mode: str, exc: pymysql.err.MySQLError) -> PreconditionError:
    code, text = (exc.args + (None, None))[:2]
    what = "FLUSH TABLES WITH READ LOCK" if mode == "global" else "LOCK TABLES ... READ"
    return PreconditionError(
        f"{what} failed (error {code}: {text})",
        hint="grant RELOAD (global) or LOCK TABLES (tables) to the cdc user, or choose another --lock; "
        f"a lock wait over {LOCK_WAIT_SECONDS}s means a long-running statement: retry when it is done",
    )
