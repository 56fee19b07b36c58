"""GTIDs on a server: its state, the state at a binlog position, and where a GTID state resumes in its binlogs.

Used by tail to record the GTID state with every checkpoint, and by `tail --rebase` to continue on another
server of the same replication topology (a promoted replica) without guessing: the new server's binlog files
and offsets have nothing to do with the old one's, its GTIDs are the same transactions.

Everything is read with SHOW BINLOG EVENTS (BINLOG MONITOR / REPLICATION CLIENT), a page at a time, so
scanning a large binlog costs little memory. The scan itself (`find_resume`) is a pure function of the rows, so
the MySQL path is tested on rows as MySQL 8 prints them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.changelog import file_seq
from cdc.errors import PositionError, PreconditionError
from cdc.gtid import GtidSet
from cdc.source.binlog import Position
from cdc.source.connect import query

_MARIADB_GTID = re.compile(r"\b(\d+-\d+-\d+)\b")
_MYSQL_GTID = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'", re.IGNORECASE)
# Events that belong to the file, not to a transaction (a file's header, its end).
_FILE_EVENTS = {"Format_desc", "Gtid_list", "Previous_gtids", "Binlog_checkpoint", "Rotate", "Stop",
                "Start_encryption"}
_PAGE = 5000  # events per SHOW BINLOG EVENTS
_HEADER_EVENTS = 6  # Format_desc, Start_encryption, Gtid_list / Previous_gtids, Binlog_checkpoint: all within these


@dataclass(frozen=True)
class EventRow:
    """One row of SHOW BINLOG EVENTS."""

    file: str
    pos: int
    kind: str  # Event_type
    end: int  # End_log_pos
    info: str

    @classmethod
    def from_row(cls, file: str, row: dict[str, Any]) -> EventRow:
        return cls(file, int(row["Pos"]), str(row["Event_type"]), int(row["End_log_pos"]), str(row.get("Info") or ""))


@dataclass(frozen=True)
class Resume:
    """Where a GTID state continues on a server: a transaction boundary, and the already-seen transactions
    that still follow it (several GTID domains may interleave differently on two servers)."""

    position: Position
    skip: tuple[str, ...] = ()


def server_state(conn: pymysql.Connection, is_mariadb: bool) -> GtidSet:
    """The transactions in the server's binlogs (MariaDB gtid_binlog_pos; MySQL gtid_executed)."""
    name = "gtid_binlog_pos" if is_mariadb else "gtid_executed"
    rows = query(conn, f"SELECT @@GLOBAL.{name} AS g")
    return GtidSet.parse(str(rows[0]["g"] or "") if rows else "")


def state_at(conn: pymysql.Connection, is_mariadb: bool, position: Position) -> GtidSet | None:
    """The GTID state at a transaction boundary of this server, or None where the server cannot tell."""
    try:
        if is_mariadb:
            rows = query(conn, "SELECT BINLOG_GTID_POS(%s, %s) AS g", (position.file, position.pos))
            text = rows[0]["g"] if rows else None
            return None if text is None else GtidSet.parse(str(text))
        state = header_state(conn, position.file)
        for row in binlog_events(conn, position.file):
            if row.pos >= position.pos:
                break
            if row.kind == "Anonymous_Gtid":  # a transaction without a GTID: no GTID set can say it was read
                return None
            state.add(transaction_gtid(row))
        return state
    except pymysql.err.MySQLError:
        return None  # no BINLOG MONITOR, or the file is gone: the state stays unknown (and --rebase refuses)


def binlog_files(conn: pymysql.Connection) -> list[str]:
    return sorted((str(row["Log_name"]) for row in query(conn, "SHOW BINARY LOGS")), key=file_seq)


def binlog_events(conn: pymysql.Connection, file: str, limit: int | None = None) -> Iterator[EventRow]:
    """SHOW BINLOG EVENTS of one file, a page at a time: a big file never sits in memory, and a caller that
    stops early leaves no half-read result on the connection."""
    pos, left = 4, limit
    while left is None or left > 0:
        page = _PAGE if left is None else min(left, _PAGE)
        rows = query(conn, "SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (file, pos, page))
        for row in rows:
            yield EventRow.from_row(file, row)
        if len(rows) < page:
            return
        pos = int(rows[-1]["End_log_pos"])  # the next event starts where the last one ended
        left = None if left is None else left - len(rows)


def header_state(conn: pymysql.Connection, file: str) -> GtidSet:
    """The GTID state at the start of a binlog file (MariaDB Gtid_list, MySQL Previous_gtids)."""
    for row in binlog_events(conn, file, limit=_HEADER_EVENTS):
        if row.kind in ("Gtid_list", "Previous_gtids"):
            return GtidSet.parse(row.info.strip().strip("[]"))
    return GtidSet()


def transaction_gtid(row: EventRow) -> str | None:
    """The GTID a Gtid event starts (None for other events and for MySQL's anonymous transactions)."""
    if row.kind != "Gtid":
        return None
    found = _MYSQL_GTID.search(row.info) or _MARIADB_GTID.search(row.info)
    if found is None or found[1].upper() == "ANONYMOUS":
        return None
    return found[1]


def locate(conn: pymysql.Connection, is_mariadb: bool, seen: GtidSet, where: str) -> Resume:
    """Where `seen` continues on this server; PositionError naming what is missing when it cannot."""
    held = server_state(conn, is_mariadb)
    if not held.contains(seen):
        raise PositionError(
            f"{where} does not have every transaction cdc already captured: {held.describe_missing(seen)} "
            f"(its binlogs hold {held or 'no GTIDs'}, cdc has seen {seen})",
            hint="these changes never reached this server (lost in the failover, a replica without "
            "log_slave_updates / log_replica_updates, or not a replica of the old server at all); the change "
            "log holds them and this server does not: take a new `cdc snapshot` into a new state directory",
        )
    files = binlog_files(conn)
    headers = [(name, header_state(conn, name)) for name in files]
    first = _first_file(headers, seen, where)
    events = (row for name in files[files.index(first):] for row in binlog_events(conn, name))
    return find_resume(events, seen, dict(headers)[first], where)


def _first_file(headers: list[tuple[str, GtidSet]], seen: GtidSet, where: str) -> str:
    """The last binlog file that starts inside `seen`: everything after `seen` is in it or after it."""
    inside = [name for name, state in headers if seen.contains(state)]
    if inside:
        return inside[-1]
    if not headers:
        raise PreconditionError(f"{where} has no binlog files", hint="enable log_bin on the server")
    name, state = headers[0]
    raise PositionError(
        f"{where} cannot send every transaction after cdc's checkpoint: its oldest binlog {name} starts after "
        f"{seen.describe_missing(state)}, which cdc never captured (purged, or written with binlogging off)",
        hint="take a new `cdc snapshot` into a new state directory; raise retention (`cdc set-retention`) so "
        "the next failover finds the binlogs",
    )


def find_resume(events: Iterable[EventRow], seen: GtidSet, start: GtidSet, where: str) -> Resume:
    """The first transaction not in `seen`, reading `events` from a file that starts with state `start`.

    Every transaction of `seen` after `start` must be met, with its exact GTID: MariaDB allows the same
    domain and sequence number with another server id on an unrelated history, and that is refused here.
    Seen transactions after the resume point are returned to be skipped when tail reads them.
    """
    remaining = start.missing(seen)
    resume: Position | None = None
    skip: list[str] = []
    last: EventRow | None = None
    for row in events:
        gtid = transaction_gtid(row)
        if row.kind in ("Gtid", "Anonymous_Gtid") and gtid is None:
            raise PositionError(f"anonymous transaction at {row.file}:{row.pos} on {where}: transactions without "
                                "a GTID cannot be matched to cdc's checkpoint",
                                hint="run the server with gtid_mode=ON, or take a new `cdc snapshot`")
        if gtid is not None:
            if seen.contains_gtid(gtid):
                _check_same(gtid, seen, row, where)
                _met(remaining, gtid)
                if resume is not None:
                    skip.append(gtid)
            else:
                _check_not_passed(gtid, remaining, row, where)
                if resume is None:
                    resume = Position(row.file, row.pos)
            if resume is not None and remaining.is_empty:
                break
        last = row
    if not remaining.is_empty:
        raise PositionError(f"{where}'s binlogs lack transactions cdc already captured: "
                            f"{GtidSet().describe_missing(remaining)}",
                            hint="take a new `cdc snapshot` into a new state directory")
    if resume is None:  # every transaction scanned was seen: continue at the end of what was scanned
        if last is None:
            raise PositionError(f"{where} shows no binlog events to resume from", hint="check SHOW BINLOG EVENTS")
        resume = Position(last.file, last.end)
    return Resume(resume, tuple(skip))


def _check_same(gtid: str, seen: GtidSet, row: EventRow, where: str) -> None:
    """MariaDB: the domain's last seen transaction must carry the same server id here as where cdc read it."""
    if ":" in gtid:  # MySQL: the source uuid is part of the GTID, so equal GTIDs are the same transaction
        return
    domain, server, seq = (int(x) for x in gtid.split("-"))
    held = seen.domains.get(domain)
    if held is not None and held[1] == seq and held[0] != server:
        raise PositionError(
            f"{where} has {gtid} at {row.file}:{row.pos}, where cdc captured {domain}-{held[0]}-{seq}: the same "
            "sequence number written by another server, so a different history (not a replica of the old server)",
            hint="point tail at a server replicated from the old one, or take a new `cdc snapshot` into a new "
            "state directory",
        )


def _check_not_passed(gtid: str, remaining: GtidSet, row: EventRow, where: str) -> None:
    """MariaDB: a later transaction of a domain before its last seen one means that one is missing here."""
    if ":" in gtid:
        return
    domain = int(gtid.split("-")[0])
    if domain in remaining.domains:
        server, seq = remaining.domains[domain]
        raise PositionError(
            f"{where} has {gtid} at {row.file}:{row.pos} but never {domain}-{server}-{seq}, the last transaction "
            "cdc captured in that domain", hint="take a new `cdc snapshot` into a new state directory")


def _met(remaining: GtidSet, gtid: str) -> None:
    if ":" in gtid:
        remaining.remove(gtid)
        return
    domain, server, seq = (int(x) for x in gtid.split("-"))
    if remaining.domains.get(domain) == (server, seq):
        del remaining.domains[domain]
