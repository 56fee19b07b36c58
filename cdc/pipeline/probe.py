"""Ask the source server where it is: binlog files and sizes, its current end, event times, retention.

Event times: neither SHOW BINARY LOGS nor SHOW BINLOG EVENTS shows a timestamp, so we read event
headers through a short, non-blocking binlog dump (COM_BINLOG_DUMP with BINLOG_DUMP_NON_BLOCK, the
request `mysqlbinlog --read-from-remote-server` sends) and close the connection after the first
event we need. Only the 19-byte v4 event header is parsed (timestamp, type, server_id, size,
next position, flags), so checksums and event bodies never matter. Works on MariaDB 10.11 and
MySQL 5.7-8.4; needs the REPLICATION SLAVE privilege, which tail needs anyway. Without it the
times are reported as unknown (with the reason), never guessed.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from dataclasses import dataclass

import pymysql

from cdc.changelog import file_seq
from cdc.config import MySQLSettings
from cdc.errors import CdcError, PositionError, PreconditionError
from cdc.snapshot import read_retention
from cdc.source.connect import map_error, open_connection, query
from cdc.source.flavour import binlog_status_statement
from cdc.source.server import describe_server

COM_BINLOG_DUMP = 0x12
BINLOG_DUMP_NON_BLOCK = 1
# https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication_binlog_event.html
_HEADER = struct.Struct("<IBIIIH")
FORMAT_DESCRIPTION_EVENT = 15
# Events that open a file (and the dump's artificial ones) rather than a transaction:
# ROTATE, FORMAT_DESCRIPTION, HEARTBEAT, PREVIOUS_GTIDS (MySQL), BINLOG_CHECKPOINT, GTID_LIST,
# START_ENCRYPTION (MariaDB). https://mariadb.com/kb/en/2-binlog-event-header/
_FILE_HEADER_EVENTS = {4, 15, 27, 35, 161, 163, 164}
_MAX_PROBE_EVENTS = 64
_PROBE_TIMEOUT = 10
ER_MASTER_FATAL_READING_BINLOG = 1236


@dataclass(frozen=True)
class BinlogFile:
    name: str
    size: int


@dataclass(frozen=True)
class ServerView:
    """The server's binlog as of one status call."""

    describe: str
    flavour: str
    file: str
    pos: int
    gtid: str | None
    binlogs: tuple[BinlogFile, ...]
    retention_seconds: float | None  # None: binlogs are never purged by age
    retention_source: str
    server_uuid: str = ""  # whose binlog positions these are (cdc.source derives one for MariaDB)

    def has_file(self, name: str) -> bool:
        return any(b.name == name for b in self.binlogs)

    def next_file(self, name: str) -> str | None:
        names = [b.name for b in self.binlogs]
        index = names.index(name) if name in names else -1
        return names[index + 1] if 0 <= index < len(names) - 1 else None


def read_server_view(settings: MySQLSettings) -> ServerView:
    conn = open_connection(settings, read_timeout=_PROBE_TIMEOUT)
    try:
        info = describe_server(conn)
        rows = query(conn, binlog_status_statement(info))
        if not rows:
            raise PreconditionError(f"binary logging is off on {settings.describe()}: there is no position to compare with",
                                    hint="run `cdc check-binlog`; pass --offline to see the local state only")
        status = list(rows[0].values())
        binlogs = tuple(BinlogFile(str(r["Log_name"]), int(r["File_size"])) for r in query(conn, "SHOW BINARY LOGS"))
        gtid_sql = "SELECT @@GLOBAL.gtid_binlog_pos AS g" if info.is_mariadb else "SELECT @@GLOBAL.gtid_executed AS g"
        gtid = query(conn, gtid_sql)[0]["g"] or None
        retention, source = read_retention(conn, info)
    except pymysql.err.MySQLError as exc:
        raise map_error(exc, settings) from None
    finally:
        conn.close()
    return ServerView(settings.describe(), info.flavour, str(status[0]), int(status[1]), gtid, binlogs, retention, source,
                      info.server_uuid)


def bytes_behind(view: ServerView, file: str, pos: int) -> tuple[int, int]:
    """(bytes, files) of binlog from file:pos to the server's current end (SHOW BINARY LOGS sizes)."""
    start, end = file_seq(file), file_seq(view.file)
    total = 0
    for binlog in view.binlogs:
        seq = file_seq(binlog.name)
        if seq < start or seq > end:
            continue
        size = view.pos if seq == end else binlog.size
        total += max(size - (pos if seq == start else 0), 0)
    return total, max(end - start, 0)


def probe_server_id(settings: MySQLSettings) -> int:
    """The server_id our short dumps announce: never tail's (a dump with tail's id would kick tail off).

    Tail's derived ids lie in 1e9..2e9; ours in 2e9..3e9, and differ per process so that two probes
    (status from cron and a wait in a runbook) do not kick each other off either.
    """
    seed = f"cdc-probe:{settings.reader_server_id()}:{os.getpid()}".encode()
    return 2_000_000_000 + int.from_bytes(hashlib.sha256(seed).digest()[:4], "big") % 1_000_000_000


def event_time(settings: MySQLSettings, file: str, pos: int, *, file_start: bool = False) -> float | None:
    """Unix time of the first transaction at or after file:pos (None: nothing there yet).

    With file_start, the time of the file's FORMAT_DESCRIPTION event instead: when the server
    started writing `file`, i.e. when the file before it stopped growing.
    """
    conn = open_connection(settings, read_timeout=_PROBE_TIMEOUT)
    try:
        with conn.cursor() as cursor:
            # MySQL refuses to dump checksummed events to a reader that does not say it copes;
            # MariaDB capability 4 = send GTID events as they are. Both are harmless elsewhere.
            cursor.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cursor.execute("SET @mariadb_slave_capability = 4")
        request = struct.pack("<IHI", 4 if file_start else pos, BINLOG_DUMP_NON_BLOCK, probe_server_id(settings))
        conn._execute_command(COM_BINLOG_DUMP, request + file.encode())
        for _ in range(_MAX_PROBE_EVENTS):
            packet = conn._read_packet()
            if packet.is_eof_packet():
                return None
            timestamp, kind, _server, _size, next_pos, _flags = _HEADER.unpack_from(packet.get_all_data(), 1)
            if file_start and kind == FORMAT_DESCRIPTION_EVENT and timestamp:
                return float(timestamp)
            # next_pos 0 marks the dump's artificial events (fake ROTATE, re-sent FORMAT_DESCRIPTION).
            if not file_start and next_pos and timestamp and kind not in _FILE_HEADER_EVENTS:
                return float(timestamp)
        return None
    except pymysql.err.MySQLError as exc:
        raise _probe_error(exc, settings, file, pos) from None
    finally:
        conn.close()


def _probe_error(exc: pymysql.err.MySQLError, settings: MySQLSettings, file: str, pos: int) -> CdcError:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if code == ER_MASTER_FATAL_READING_BINLOG:
        return PositionError(f"the server at {settings.describe()} cannot send {file}:{pos}: {exc.args[1]}",
                             hint="the binlog may have been purged: `cdc resnapshot --all` recovers online; raise "
                             "retention (`cdc set-retention`)")
    if code in (1227, 1045):
        return PreconditionError(f"reading binlog event times on {settings.describe()} needs REPLICATION SLAVE: "
                                 f"{exc.args[1]}", hint="GRANT REPLICATION SLAVE ON *.* TO the cdc user (tail needs it too)")
    mapped = map_error(exc, settings)
    return mapped if isinstance(mapped, CdcError) else CdcError(str(mapped))


@dataclass(frozen=True)
class RunwayView:
    """How long until the server purges the oldest binlog file the pipeline still needs."""

    needed_file: str
    retention_seconds: float | None
    retention_source: str
    file_closed_at: float | None  # when the next file started; None while `needed_file` is still written
    purged: bool
    seconds: float | None  # None: never purged (no age-based expiry), or unknown (see `unknown`)
    unknown: str | None = None  # why the runway could not be measured


def measure_runway(settings: MySQLSettings, view: ServerView, needed_file: str, now: float | None = None) -> RunwayView:
    """Runway = retention - age of `needed_file`, its age counted from when the server moved on to the next file.

    Servers purge by age at rotation/startup using the file's last write (~ the next file's start), so a
    file that is still being written has its whole retention ahead of it.
    """
    now = time.time() if now is None else now
    base = dict(needed_file=needed_file, retention_seconds=view.retention_seconds, retention_source=view.retention_source)
    if not view.has_file(needed_file):
        return RunwayView(**base, file_closed_at=None, purged=True, seconds=0.0)  # type: ignore[arg-type]
    following = view.next_file(needed_file)
    if following is None or view.retention_seconds is None:
        return RunwayView(**base, file_closed_at=None, purged=False, seconds=view.retention_seconds)  # type: ignore[arg-type]
    try:
        closed_at = event_time(settings, following, 4, file_start=True)
    except CdcError as exc:
        return RunwayView(**base, file_closed_at=None, purged=False, seconds=None, unknown=exc.message)  # type: ignore[arg-type]
    if closed_at is None:
        return RunwayView(**base, file_closed_at=None, purged=False, seconds=None,  # type: ignore[arg-type]
                          unknown=f"{following} has no FORMAT_DESCRIPTION event with a timestamp")
    seconds = max(view.retention_seconds - (now - closed_at), 0.0)
    return RunwayView(**base, file_closed_at=closed_at, purged=False, seconds=seconds)  # type: ignore[arg-type]
