"""The one adapter around python-mysql-replication (1.0.17): every behaviour of the library we rely on or guard against.

Verified against MariaDB 10.11 (see tests/capture/test_tail_binlog.py):
- `is_mariadb=True` without auto_position ignores log_file/log_pos and starts at the first binlog, and its
  non-blocking MariaDB dump request is malformed: we always use the classic file/position dump
  (`is_mariadb=False`, `log_file`, `log_pos`, `resume_stream=True`), which MariaDB serves correctly.
- `resume_stream=False` replays the whole file and a missing position runs SHOW MASTER STATUS (gone in
  MySQL 8.4): we always pass an explicit position at a transaction boundary.
- On error 2013/2006 the library silently reconnects at the position of the *last event* (mid-transaction),
  where rows events whose table map it has not seen are dropped without a word. We refuse its reconnect
  (our connect wrapper raises on a second stream connection) and restart from our last commit instead.
- Rows events whose table map was not seen are dropped silently: our rows events (cdc.source.binlog_rows) raise
  instead, and hand full-image bodies over as bytes for our own decoder.
- `blocking=True` without `read_timeout` hangs forever on a frozen server: we always set a read timeout and ask
  the server for heartbeats (MASTER_HEARTBEAT_PERIOD) well inside it.
- Values the library decodes lossily (zero and partial-zero dates, negative TIME fractions, strings decoded
  with Python's latin1 instead of MySQL's cp1252) are read by our overrides (cdc.rows.exact_reads), returning raw
  bytes for strings; the rest is fixed per type (cdc.rows.mysql_types' fixes, applied by cdc.rows.decode).
  MySQL 8's JSON documents, whose temporal and opaque values parse_json loses, are read as MySQL's text by our
  packet wrapper's read_binary_json (cdc.source.binlog_rows, cdc.rows.json_binary).
- Per event, PyMySQL reads a packet in two reads and the library builds a wrapper and an event object: half of
  tail's CPU at binlog rates (issue 28). Once the dump has started, packets are cut from 256 KiB blocks
  (cdc.source.binlog_blocks) and common rows events skip the library's constructor (cdc.source.binlog_rows).
- PARTIAL_UPDATE_ROWS (MySQL partial JSON images) and row events the library does not implement (MariaDB
  compressed events, MySQL transaction payloads) would be skipped or decoded to NULL: we stop with coordinates.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication import event as lib_event
from pymysqlreplication import row_event as lib_rows
from pymysqlreplication.packet import BinLogPacketWrapper

from cdc.changelog import file_seq
from cdc.config import MySQLSettings
from cdc.errors import CdcError, ConnectError, DataError, PositionError, PreconditionError, TransientError
from cdc.source.binlog_blocks import BlockPackets
from cdc.source.binlog_rows import DeleteRows, UpdateRows, WriteRows
from cdc.source.connect import Connection, connection_kwargs, is_tls_failure, map_error, tls_error

ER_MASTER_FATAL_READING_BINLOG = 1236
ER_SLAVE_SAME_ID = 4052  # MariaDB: sent to the *older* reader when another connects with its server_id
# Lost connection, server gone/shutting down, our connection KILLed: worth a reconnect at the last commit.
_TRANSIENT = {1053, 1927, 2003, 2006, 2013, 2055}
# Event types the library does not decode but which carry row changes or statements: skipping them loses data.
# https://mariadb.com/kb/en/2-binlog-event-header/ (types 160-171), MySQL TRANSACTION_PAYLOAD_EVENT = 40.
_DATA_EVENT_TYPES = {
    40: "TRANSACTION_PAYLOAD (binlog_transaction_compression)",
    165: "QUERY_COMPRESSED", 166: "WRITE_ROWS_COMPRESSED_V1", 167: "UPDATE_ROWS_COMPRESSED_V1",
    168: "DELETE_ROWS_COMPRESSED_V1", 169: "WRITE_ROWS_COMPRESSED", 170: "UPDATE_ROWS_COMPRESSED",
    171: "DELETE_ROWS_COMPRESSED", 4: "ROWS_EVENT_V0", 20: "WRITE_ROWS_V0", 21: "UPDATE_ROWS_V0",
    22: "DELETE_ROWS_V0",
}


@dataclass(frozen=True, order=True)
class Position:
    """A binlog coordinate: the start of an event (a reader may start only at a transaction boundary)."""

    file: str
    pos: int

    def key(self) -> tuple[int, int]:
        return (file_seq(self.file), self.pos)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"

    @classmethod
    def parse(cls, text: str) -> Position:
        name, _, pos = text.rpartition(":")
        if not name or not pos.isdigit():
            raise PositionError(f"start position {text!r} is not FILE:POS", hint="e.g. --start-position mariadb-bin.000003:4")
        file_seq(name)  # validates the numeric extension
        return cls(name, int(pos))


@dataclass(slots=True)
class Event:
    """One binlog event as the tail loop sees it. `pos` is its start, `next_pos` the start of the next one."""

    kind: str  # gtid | begin | commit | query | table_map | rows | heartbeat | rotate | other
    file: str
    pos: int
    next_pos: int
    timestamp: int
    server_id: int
    gtid: str | None = None
    xid: int | None = None
    sql: str | None = None
    db: str | None = None
    table: str | None = None
    op: str | None = None  # c / u / d for rows events
    table_id: int | None = None
    fk_checks: bool = True  # rows events: False when written with foreign_key_checks=0 (NO_FOREIGN_KEY_CHECKS)
    # MariaDB GTID events: the group is one statement without COMMIT (DDL); False: it ends with COMMIT/Xid, even
    # when it starts with a statement (CREATE TABLE ... SELECT). None: not known (MySQL).
    standalone: bool | None = None
    sql_mode: int | None = None  # query events: the statement's session sql_mode (how an ALTER converted values)
    partial: bool = False  # rows events: an image leaves columns out (binlog_row_image MINIMAL/NOBLOB in its session)
    raw: Any = field(default=None, repr=False)  # the library's event, for table maps and rows


# Every event class the library knows (plus ours): one it filters out never advances our position, and
# --until-now would wait forever for a target behind a trailing GTID-list or checkpoint event.
_EVENTS = [
    *{cls for cls in BinLogPacketWrapper._BinLogPacketWrapper__event_map.values()
      if cls not in (lib_rows.WriteRowsEvent, lib_rows.UpdateRowsEvent, lib_rows.DeleteRowsEvent)},
    lib_event.NotImplementedEvent, WriteRows, UpdateRows, DeleteRows,
]
_OPS = {WriteRows: "c", UpdateRows: "u", DeleteRows: "d"}
# A rows event's flag for a statement run with foreign_key_checks=0: InnoDB cascaded nothing for it (issue #24).
# The same bit in MySQL and MariaDB: https://dev.mysql.com/doc/dev/mysql-server/latest/classmysql_1_1binlog_1_1event_1_1Rows__event.html
# (enum_flag NO_FOREIGN_KEY_CHECKS_F); the library reads the flags word of v1 and v2 rows events as `flags`.
NO_FOREIGN_KEY_CHECKS = 0x0002
# MariaDB's GTID event flag FL_STANDALONE (https://mariadb.com/kb/en/gtid_event/): set on a DDL statement's own group.
# CREATE TABLE ... SELECT has it clear: its CREATE is followed by the rows it inserted and an Xid, one transaction.
MARIADB_GTID_STANDALONE = 0x01


def translate(raw: Any, file: str) -> Event:
    """Our view of one library event; DataError (with coordinates) for events we must not skip."""
    packet = raw.packet
    next_pos = packet.log_pos
    pos = next_pos - packet.event_size if next_pos else 0
    base: tuple[str, int, int, int, int] = (file, pos, next_pos, raw.timestamp, packet.server_id)
    kind = type(raw)
    if kind in _OPS:
        if raw.unmapped:
            raise DataError(
                f"rows event at {file}:{pos} refers to table id {raw.table_id} whose table map was not read",
                hint="restart tail from its checkpoint (a transaction boundary); never from a position inside a transaction",
            )
        return Event("rows", *base, db=raw.schema, table=raw.table, op=_OPS[kind], table_id=raw.table_id, raw=raw,
                     fk_checks=not raw.flags & NO_FOREIGN_KEY_CHECKS, partial=raw.complete and raw.partial_images())
    if kind is lib_rows.TableMapEvent:
        return Event("table_map", *base, db=raw.schema, table=raw.table, table_id=raw.table_id, raw=raw)
    if kind is lib_event.XidEvent:
        return Event("commit", *base, xid=raw.xid)
    if kind is lib_event.MariadbGtidEvent:
        return Event("gtid", *base, gtid=raw.gtid, standalone=bool(raw.flags & MARIADB_GTID_STANDALONE))
    if kind is lib_event.GtidEvent:
        return Event("gtid", *base, gtid=raw.gtid)
    if kind is lib_event.QueryEvent:
        return _query_event(raw, base)
    if kind is lib_event.RotateEvent:
        return Event("rotate", *base, sql=raw.next_binlog, xid=raw.position)
    if kind is lib_event.HeartbeatLogEvent:
        return Event("heartbeat", *base)
    _refuse_unknown(raw, kind, file, pos)
    return Event("other", *base)


def _query_event(raw: Any, base: tuple[str, int, int, int, int]) -> Event:
    sql = raw.query if isinstance(raw.query, str) else bytes(raw.query).decode("utf-8", "replace")
    db = raw.schema.decode("utf-8") if isinstance(raw.schema, (bytes, bytearray)) else str(raw.schema)
    word = sql.strip().upper()
    if word in ("BEGIN", "XA START"):
        return Event("begin", *base, db=db, sql=sql)
    # ROLLBACK ends a transaction that touched non-transactional tables: their rows did change, so it commits
    # what the binlog holds (rolled-back InnoDB changes never reach the binlog at all).
    if word in ("COMMIT", "ROLLBACK"):
        return Event("commit", *base, db=db, sql=sql)
    return Event("query", *base, db=db, sql=sql, sql_mode=getattr(raw, "sql_mode", None))


def _refuse_unknown(raw: Any, kind: type, file: str, pos: int) -> None:
    if kind is lib_rows.PartialUpdateRowsEvent:
        raise DataError(
            f"PARTIAL_UPDATE_ROWS event (partial JSON update image) at {file}:{pos}: the full after-image is "
            "not in the binlog, and writing NULL or the before-image would be wrong",
            hint="SET GLOBAL binlog_row_value_options = '' on the server, then restart tail from its checkpoint",
        )
    if kind is lib_event.XAPrepareEvent:
        raise DataError(f"XA PREPARE event at {file}:{pos}: XA transactions are not supported",
                        hint="avoid XA transactions on the captured tables")
    name = _DATA_EVENT_TYPES.get(raw.event_type)
    if name is not None:
        raise DataError(
            f"unsupported binlog event {name} (type {raw.event_type}) at {file}:{pos}; skipping it would lose changes",
            hint="disable binlog compression (MariaDB log_bin_compress=OFF, MySQL binlog_transaction_compression=OFF)",
        )


@dataclass
class ReaderOptions:
    heartbeat: float = 1.0  # seconds; the server sends a heartbeat when idle this long
    read_timeout: float = 10.0  # seconds without any byte (event or heartbeat) = the server is gone


class BinlogReader:
    """Read events from an explicit position at a transaction boundary, blocking, with heartbeats."""

    def __init__(self, settings: MySQLSettings, start: Position, options: ReaderOptions | None = None) -> None:
        self.settings = settings
        self.start = start
        self.options = options or ReaderOptions()
        self._stream: BinLogStreamReader | None = None
        self._stream_connects = 0
        self._blocks: BlockPackets | None = None

    def _connect(self, **kwargs: Any) -> pymysql.Connection:
        # Called by the library for its control and its stream connections. A second stream connection is the
        # library's own silent reconnect at a mid-transaction position: refuse it, the caller restarts cleanly.
        if kwargs.get("db") != "information_schema":
            self._stream_connects += 1
            if self._stream_connects > 1:
                raise TransientError(f"lost the binlog connection to {self.settings.describe()}")
        return Connection(**kwargs)

    def events(self) -> Iterator[Event]:
        """Yield events from `start`; raise TransientError on a lost/frozen connection, PositionError if purged."""
        timeout = self.options.read_timeout
        kwargs = connection_kwargs(self.settings) | {"read_timeout": timeout, "write_timeout": timeout}
        kwargs.pop("autocommit", None)
        self._stream = BinLogStreamReader(
            connection_settings=kwargs, server_id=self.settings.reader_server_id(), blocking=True,
            resume_stream=True, log_file=self.start.file, log_pos=self.start.pos, is_mariadb=False,
            only_events=_EVENTS, filter_non_implemented_events=False, slave_heartbeat=self.options.heartbeat,
            pymysql_wrapper=self._connect, enable_logging=False,
        )
        file = self.start.file
        try:
            while True:
                raw = self._fetch()
                if raw is None:
                    raise TransientError(f"the server at {self.settings.describe()} ended the binlog stream")
                if self._blocks is None:  # the dump has started: read its packets in blocks from here on
                    self._blocks = BlockPackets(self._stream._stream_connection)
                    self._blocks.install()
                # The library's packet and its event refer to each other: a cycle only the garbage collector
                # frees, so a long transaction's events (packet + row bytes, ~16 KB each) pile up between
                # collections. Breaking it frees each event as soon as tail is done with it.
                raw.packet.event = None
                if type(raw) is lib_event.RotateEvent:
                    file = raw.next_binlog
                yield translate(raw, file)
        finally:
            self.close()

    def has_input(self) -> bool:
        """Whether the server sent bytes not read yet: a poll of the socket that never waits.

        Bytes in the driver's own read buffer do not count, so it may say False while an event is there;
        callers use it only to choose between waiting for decode workers now or reading on.
        """
        if self._blocks is not None and self._blocks.has_packet():
            return True
        sock = getattr(getattr(self._stream, "_stream_connection", None), "_sock", None)
        if sock is None:
            return False
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)

    def _fetch(self) -> Any:
        assert self._stream is not None
        try:
            return self._stream.fetchone()
        except pymysql.err.OperationalError as exc:
            raise self._map(exc) from None
        except (pymysql.err.InterfaceError, ConnectionError, OSError) as exc:
            raise TransientError(f"lost the binlog connection to {self.settings.describe()}: {exc}") from None
        except pymysql.err.MySQLError as exc:
            raise self._map(exc) from None

    def _map(self, exc: BaseException) -> CdcError:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code in (ER_MASTER_FATAL_READING_BINLOG, ER_SLAVE_SAME_ID):
            return _fatal_reading(text, self.start, self.settings)
        if is_tls_failure(code, text):
            return tls_error(text, self.settings)
        if code in _TRANSIENT:
            return TransientError(f"lost the binlog connection to {self.settings.describe()}: {text}")
        mapped = map_error(exc, self.settings)
        return mapped if isinstance(mapped, CdcError) else ConnectError(text)

    def close(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:  # noqa: BLE001 - closing a dead socket may raise anything; nothing to save
                pass
            self._stream = None


PURGED_HINT = ("the binlog was purged before tail read it: raise retention (`cdc set-retention`); a running pipeline "
               "recovers online with `cdc resnapshot --all` (tail restarts at the binlog end, every captured table is "
               "read again; start `cdc tail --follow` once it says so), a first start needs a new `cdc snapshot`")


def _fatal_reading(text: str, start: Position, settings: MySQLSettings) -> CdcError:
    """Error 1236: the server cannot serve our position (purged, beyond the end) or kicked a duplicate reader."""
    lowered = text.lower()
    if "server_id" in lowered or "server id" in lowered or "same server" in lowered:
        return ConnectError(
            f"another replica or binlog reader connected to {settings.describe()} with our server_id "
            f"{settings.reader_server_id()}, and the server dropped us: {text}",
            hint="give each reader its own --server-id (CDC_MYSQL_SERVER_ID); two readers with one id kick each "
            "other off, so tail does not reconnect",
        )
    if "could not find" in lowered or "purged" in lowered:
        return PositionError(f"the server at {settings.describe()} cannot send the binlog from {start}: {text}",
                             hint=PURGED_HINT)
    # "binlog truncated in the middle of event", "impossible position": not the start of an event.
    return PositionError(
        f"the server at {settings.describe()} cannot send the binlog from {start}: {text}",
        hint="the position is not the start of an event: give a transaction boundary (the End_log_pos of an Xid "
        "or COMMIT in SHOW BINLOG EVENTS), or use --start-gtid",
    )


def current_position(conn: pymysql.Connection) -> Position:
    """The server's current binlog end (SHOW BINARY LOG STATUS on MySQL 8.4, SHOW MASTER STATUS elsewhere)."""
    for statement in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        try:
            with conn.cursor() as cursor:
                cursor.execute(statement)
                row = cursor.fetchone()
        except pymysql.err.ProgrammingError:
            continue
        if not row:
            break
        return Position(str(row[0]), int(row[1]))
    # Not a position problem: the server is not ready (exit 4, as snapshot and check-binlog say for the same server).
    raise PreconditionError("the server reports no binlog position: binary logging is off",
                            hint="run `cdc check-binlog` and enable log_bin")

