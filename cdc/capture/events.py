"""Turn binlog events into change lines: transactions, schema history, segments and the checkpoint."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson
import pymysql

from cdc.capture.ddl import parse_ddl
from cdc.capture.filters import Filters
from cdc.capture.lag import LagMeter
from cdc.capture.start import CHECKPOINT_VERSION, STAGE, Start, last_position_in, uncheckpointed_segments
from cdc.capture.txn import RowLines, TransactionBuffer, split_line
from cdc.changelog import SegmentWriter, position_string
from cdc.config import MySQLSettings
from cdc.errors import DataError, TransientError, UsageError
from cdc.schema import SchemaHistory, TableSchema, read_table_schema
from cdc.source.binlog import Event, Position
from cdc.source.connect import open_connection
from cdc.source.decode import RowDecoder, schema_from_map
from cdc.state import StateDir

_SORT = orjson.OPT_SORT_KEYS


@dataclass(frozen=True)
class Progress:
    position: str
    events: int
    rows: int
    transactions: int
    events_per_second: float
    lag_seconds: float | None  # age of the last transaction read; 0 once the server says we are at its end
    segments: int
    lag_bytes: int | None = None  # binlog bytes between our position and the server's end (None: unknown)


class Capture:
    """State of one tail run between reconnects: position at the last commit, open transaction, open segment."""

    def __init__(self, state: StateDir, mysql: MySQLSettings, filters: Filters, start: Start, server_uuid: str, *,
                 flush_interval: float, segment_bytes: int, spill_bytes: int, stdout: BinaryIO | None = None,
                 on_progress: Callable[[Progress], None] | None = None) -> None:
        self.state, self.mysql, self.filters, self.server_uuid = state, mysql, filters, server_uuid
        self.position, self.gtid, self.last_segment = start.position, start.gtid, start.last_segment
        self.flush_interval, self.segment_bytes = flush_interval, segment_bytes
        self.stdout, self.on_progress = stdout, on_progress
        self.writer = SegmentWriter(state.changelog, "tail")
        self.writer.discard_stale()
        self.txn = TransactionBuffer(state.root / "tmp", spill_bytes)
        self.txn.discard_stale()
        self.history = SchemaHistory(state.schema)
        self._decoders: dict[int, tuple[Any, RowDecoder | None]] = {}
        self._file = start.position.file
        self._in_txn = self._begun = False
        self._txn_gtid: str | None = None
        self._opened_at: float | None = None
        self._checkpointed_at = time.monotonic()
        self._dirty = True  # position or server moved since the last checkpoint (a first run writes one at once)
        self._ctl: Any = None
        self.transactions = self.rows = self.segments = self.events = 0
        self._progress_at, self._progress_events, self._last_ts = time.monotonic(), 0, 0
        self._caught_up = False  # a heartbeat: the server has nothing more to send right now
        self.lag = LagMeter(self._control, self._close_control)
        self._skip_until = self._recover()

    def _recover(self) -> str | None:
        """Segments sealed after the last checkpoint (kill -9 between seal and checkpoint): skip their lines."""
        orphans = uncheckpointed_segments(self.state.changelog, self.last_segment)
        if not orphans:
            return None
        self.last_segment = orphans[-1].name
        return last_position_in(orphans[-1])

    @property
    def at_boundary(self) -> bool:
        return not self._in_txn

    # --- events ---------------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        self.events += 1
        kind = event.kind
        if kind == "rows":
            self._on_rows(event)
        elif kind == "table_map":
            self._on_table_map(event)
        elif kind == "gtid":
            self._in_txn, self._begun, self._txn_gtid = True, False, event.gtid
        elif kind == "begin":
            self._in_txn, self._begun = True, True
        elif kind == "commit":
            self._commit(event)
        elif kind == "query":
            if not self._begun:  # DDL: after its GTID event, without BEGIN; its own transaction
                self._on_statement(event)
        elif kind == "rotate":
            self._file = event.sql or self._file
            if not self._in_txn:
                self._advance(Position(self._file, int(event.xid or 4)))
        elif kind == "heartbeat":
            self.flush()
        elif not self._in_txn and event.next_pos:
            self._advance(Position(self._file, event.next_pos))
        self._caught_up = kind == "heartbeat"
        # Heartbeats keep the status line (and --json status lines) coming while the server is idle.
        if self.on_progress is not None and (self.events % 256 == 0 or self._caught_up):
            self._report()

    def _advance(self, position: Position) -> None:
        if position != self.position:
            self.position, self._dirty = position, True

    def _on_table_map(self, event: Event) -> None:
        if not self._in_txn:
            # Every transaction opens with a GTID (MariaDB) or BEGIN event: a table map before one means the
            # start position was inside a transaction, and its earlier statements would be silently missing.
            raise DataError(f"table map at {event.file}:{event.pos} outside a transaction: the start position is "
                            "inside a transaction", hint="start at a transaction boundary (the position after a "
                            "COMMIT/Xid event in SHOW BINLOG EVENTS), or use --start-gtid")
        raw = event.raw
        signature = tuple((c.name, c.type, c.unsigned, getattr(c, "collation_name", None)) for c in raw.columns)
        cached = self._decoders.get(raw.table_id)
        if cached is not None and cached[0] == (event.db, event.table, signature):
            return
        decoder = None
        if self.filters.wants(event.db or "", event.table or ""):
            schema = self._schema_for(event)
            excluded, hashed = self.filters.columns(schema.db, schema.table)
            if excluded & set(schema.primary_key):
                raise UsageError(f"--exclude-columns removes primary-key column(s) {sorted(excluded & set(schema.primary_key))} "
                                 f"of {schema.db}.{schema.table}", hint="hash them instead (--hash-columns)")
            decoder = RowDecoder(schema, excluded, hashed)
        self._decoders[raw.table_id] = ((event.db, event.table, signature), decoder)

    def _schema_for(self, event: Event) -> TableSchema:
        db, table = event.db or "", event.table or ""
        position = position_string(event.file, event.pos, 0)
        hints = [h for h in (self.history.latest(db, table),) if h is not None]
        schema = schema_from_map(event.raw, db, table, position, hints)
        if not hints or not hints[0].same_shape(schema):
            # New table or changed shape: ask information_schema for what the binlog does not carry (JSON flag).
            current = self._read_current(db, table)
            if current is not None:
                schema = schema_from_map(event.raw, db, table, position, hints + [current])
        self.history.record(schema)
        return schema

    def _control(self) -> pymysql.Connection:
        """A second connection for queries (schemas, lag), opened on first use."""
        if self._ctl is None or not self._ctl.open:
            self._ctl = open_connection(self.mysql)
        return self._ctl

    def _read_current(self, db: str, table: str) -> TableSchema | None:
        try:
            return read_table_schema(self._control(), db, table)
        except pymysql.err.MySQLError as exc:  # e.g. the server restarted under our control connection
            self._close_control()
            raise TransientError(f"reading the schema of {db}.{table} from {self.mysql.describe()} failed: {exc}") from None

    def _on_rows(self, event: Event) -> None:
        cached = self._decoders.get(event.table_id or -1)
        if cached is None:
            raise DataError(f"rows event at {event.file}:{event.pos} for {event.db}.{event.table} without a table map")
        decoder = cached[1]
        if decoder is None:
            return
        db, table, op, file, pos = event.db, event.table, event.op, event.file, event.pos
        try:
            images = decoder.images(event.raw, op)
        except DataError as exc:
            raise DataError(f"{db}.{table} at {file}:{pos} {exc.message}", hint=exc.hint) from None
        # What every row of the event shares is encoded once; position_string's row index is its last 12 digits.
        lines = RowLines(table or "", file, pos, self._txn_gtid, event.server_id)
        prefix = position_string(file, pos, 0)[:-12]
        add, key, skip, tail = self.txn.add, decoder.key, self._skip_until, lines.tail
        for index, (before, after) in enumerate(images):
            position = f"{prefix}{index:012d}"
            if skip is not None and position <= skip:
                continue
            body = {"after": after, "before": before, "db": db, "key": key(after or before), "op": op,
                    "position": position}
            add(position, lines.head(body, index), tail)
            self.rows += 1

    def _on_statement(self, event: Event) -> None:
        """A statement outside a transaction: DDL (its own transaction) becomes control lines."""
        changes = parse_ddl(event.sql or "", event.db or "")
        for index, change in enumerate(changes):
            if not (self.filters.wants(change.db, change.table)
                    or (change.new_table and self.filters.wants(change.new_db or change.db, change.new_table))):
                continue
            position = position_string(event.file, event.pos, index)
            if self._skip_until is not None and position <= self._skip_until:
                continue
            body: dict[str, Any] = {"db": change.db, "ddl": event.sql, "kind": change.kind, "op": "ddl",
                                    "position": position}
            if change.kind == "rename":  # RENAME TABLE may move a table to another database
                body["new_db"], body["new_table"] = change.new_db or change.db, change.new_table
            src = {"file": event.file, "gtid": self._txn_gtid, "pos": event.pos, "row": index,
                   "server_id": event.server_id}
            self.txn.add(position, *split_line(body, src, change.table))
        self._decoders.clear()  # table ids may be reused for the changed tables
        self._commit(event)

    def _commit(self, event: Event) -> None:
        if self.txn.count:
            self._write_transaction(event.xid, event.timestamp)
        self.txn.clear()
        self._in_txn, self._begun, self.gtid = False, False, self._txn_gtid or self.gtid
        self._txn_gtid = None
        self._last_ts = event.timestamp
        self._advance(Position(event.file, event.next_pos))
        self.flush()

    def _write_transaction(self, xid: int | None, ts: int) -> None:
        first = self.txn.first_position or ""
        if self.writer.is_empty:
            self._opened_at = time.monotonic()
        for line in self.txn.complete_lines(xid, ts):
            self.writer.write(first, line)
            if self.stdout is not None:
                self.stdout.write(line)
        if self.stdout is not None:
            self.stdout.flush()
        self.transactions += 1

    def abort_transaction(self) -> None:
        """Forget the open transaction (lost connection, stop): it is re-read from its start next time."""
        self.txn.clear()
        self._in_txn, self._begun, self._txn_gtid = False, False, None
        self._decoders.clear()

    # --- segments and checkpoint ------------------------------------------------------------------------

    def flush(self, force: bool = False) -> None:
        """Seal the open segment if it is big or old enough (or `force`), then advance the checkpoint."""
        now = time.monotonic()
        if not self.writer.is_empty:
            if force or self.writer.bytes >= self.segment_bytes or now - (self._opened_at or now) >= self.flush_interval:
                sealed = self.writer.seal()
                if sealed is not None:
                    self.last_segment, self.segments = sealed.name, self.segments + 1
                self._checkpoint()
        elif self._dirty and (force or now - self._checkpointed_at >= self.flush_interval):
            self._checkpoint()

    def _checkpoint(self) -> None:
        if self._skip_until is not None and self.position.key() > _position_key(self._skip_until):
            self._skip_until = None
        self.state.write_checkpoint(STAGE, {
            "version": CHECKPOINT_VERSION, "file": self.position.file, "pos": self.position.pos, "gtid": self.gtid,
            "last_segment": self.last_segment, "server_uuid": self.server_uuid,
        })
        self._dirty, self._checkpointed_at = False, time.monotonic()

    def _report(self) -> None:
        now = time.monotonic()
        rate = (self.events - self._progress_events) / max(now - self._progress_at, 1e-6)
        self._progress_at, self._progress_events = now, self.events
        if self._caught_up:
            lag, lag_bytes = 0.0, 0
        else:
            lag = max(0.0, time.time() - self._last_ts) if self._last_ts else None
            lag_bytes = self.lag.bytes_behind(self.position)
        assert self.on_progress is not None
        self.on_progress(Progress(str(self.position), self.events, self.rows, self.transactions, rate, lag,
                                  self.segments, lag_bytes))

    def close(self) -> None:
        self.writer.abandon()
        self.txn.clear()
        self._close_control()

    def _close_control(self) -> None:
        if self._ctl is not None:
            try:
                self._ctl.close()
            except pymysql.err.Error:  # already closed, or the socket is dead: nothing to release
                pass
            self._ctl = None


def _position_key(position: str) -> tuple[int, int]:
    seq, pos, _ = position.split(":")
    return int(seq), int(pos)

