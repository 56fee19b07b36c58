"""Turn binlog events into change lines: transactions, table maps, decoding (here or in workers), in order."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, BinaryIO

import pymysql

from cdc.capture.commit import Committer
from cdc.capture.ddl import dropped_database, opens_transaction, parse_ddl
from cdc.capture.decode_pool import DecodePool
from cdc.capture.decoders import Decoders
from cdc.capture.filters import Filters
from cdc.capture.lag import LagMeter, Progress
from cdc.capture.locked import LockedReads
from cdc.capture.nativeblock import native_block
from cdc.capture.rowblock import RowsMeta, first_row_after, line_template, rows_block
from cdc.capture.schemas import SchemaRecorder
from cdc.capture.start import Start
from cdc.capture.txn import split_line
from cdc.capture.windows import MarkEvent, Windows
from cdc.changelog import position_string
from cdc.config import MySQLSettings
from cdc.errors import DataError
from cdc.rows.decode import RowDecoder
from cdc.schema import SchemaHistory
from cdc.source.binlog import Event, Position
from cdc.state import StateDir
from cdc.watermarks import Mark, read_added, record_added

log = logging.getLogger(__name__)

_MAX_QUEUED = 256  # decoded rows events (and the steps between them) waiting behind a job still in a worker
# ... and the bytes of the change lines among them: 256 events of wide rows would otherwise hold megabytes
# while one slow job (a loaded machine) holds the queue up.
_MAX_QUEUED_BYTES = 2**20


class Capture:
    """One tail run between reconnects: reads events in order, decodes rows (here or in workers), commits in order.

    The reading side (this class) follows transactions, table maps and the read position; everything that
    writes (cdc.capture.commit.Committer) is queued behind the rows decoded before it and applied in binlog
    order, so with decode workers the checkpoint never passes a row that is not yet in a segment.
    """

    def __init__(self, state: StateDir, mysql: MySQLSettings, filters: Filters, start: Start, server_uuid: str, *,
                 flush_interval: float, segment_bytes: int, spill_bytes: int, stdout: BinaryIO | None = None,
                 on_progress: Callable[[Progress], None] | None = None, pool: DecodePool | None = None,
                 control: pymysql.Connection | None = None, control_timeout: float | None = None) -> None:
        # A copy of the filters, with the tables `cdc snapshot --add-table` added to this state directory's capture
        # (the caller's instance, maybe a shared default, never learns of them).
        filters = replace(filters, added=set(filters.added) | set(read_added(state)))
        self.mysql, self.filters, self.on_progress, self.pool = mysql, filters, on_progress, pool
        self.out = Committer(state, start, server_uuid, flush_interval=flush_interval, segment_bytes=segment_bytes,
                             spill_bytes=spill_bytes, stdout=stdout)
        self.schemas = SchemaRecorder(SchemaHistory(state.schema), filters, mysql, control=control,
                                      control_timeout=control_timeout)
        self.history = self.schemas.history
        # Re-snapshot windows (cdc.capture.windows): while one is open, the checkpoint stays before it.
        self.windows = Windows(state, filters, self.history, mysql.watermark_table, self._add_table)
        self.state = state
        self.out.holds = lambda: self.windows.held
        self.locked = LockedReads(state, self.windows)  # re-snapshot chunks read under a lock (cdc.lockedreads)
        self.out.before_checkpoint = self.locked.confirm
        self.read_position = start.position  # the last commit read; `position` trails it while rows are decoded
        self.decoders = Decoders(filters, self.schemas, self.windows, self._forget)
        self._file = start.position.file
        self._in_txn = self._begun = False
        self._grouped = False  # the open MariaDB GTID group ends with COMMIT/Xid, not with its first statement
        self._txn_gtid: str | None = None
        self._seen = False  # the open transaction was captured before a --rebase: read past it, write nothing
        # Effects in binlog order: (function, args), or (None, (decoder, event, meta)) for a job in the pool.
        self._pending: deque[tuple[Callable[..., None] | None, tuple[Any, ...]]] = deque()
        self._queued_bytes = 0  # of the blocks decoded here that wait in _pending
        self.queued_peak_bytes = 0  # the most of them at once (bounded by _MAX_QUEUED_BYTES and one block)
        self.events = 0
        self.worker_rows = 0  # rows decoded and encoded by the decode workers (the rest: in this process)
        self._progress_at, self._progress_events = time.monotonic(), 0
        self._caught_up = False  # a heartbeat: the server has nothing more to send right now
        self.lag = LagMeter(self.schemas.control, self.schemas.close_control)

    @property
    def position(self) -> Position:
        return self.out.position

    @property
    def transactions(self) -> int:
        return self.out.transactions

    @property
    def rows(self) -> int:
        return self.out.rows

    @property
    def segments(self) -> int:
        return self.out.segments

    @property
    def at_boundary(self) -> bool:
        return not self._in_txn

    @property
    def decoding(self) -> bool:
        """Rows (and the commits behind them) are still with the decode workers."""
        return bool(self._pending)

    # --- events ---------------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        self.events += 1
        kind = event.kind
        if not self._in_txn and self.locked.is_due():  # a boundary, before the next event: see cdc.lockedreads
            self._later(self._poll_locked)
        if kind == "rows":
            self._on_rows(event)
        elif kind == "table_map":
            self._on_table_map(event)
        elif kind == "gtid":
            self._in_txn, self._begun, self._txn_gtid = True, False, event.gtid
            self._grouped = event.standalone is False
            self._seen = bool(self.out.skip_gtids) and event.gtid in self.out.skip_gtids
        elif kind == "begin":
            self._in_txn, self._begun = True, True
        elif kind == "commit":
            self._on_commit(event)
        elif kind == "query":
            if not self._begun:  # DDL: after its GTID event, without BEGIN; its own transaction
                self._on_statement(event)
            else:  # a row change logged as its SQL text, never as row events (binlog_format STATEMENT or MIXED)
                self._on_text_dml(event)
        elif kind == "rotate":
            self._file = event.sql or self._file
            if not self._in_txn:
                self._advance(Position(self._file, int(event.xid or 4)))
        elif kind == "heartbeat":
            self.settle()
            self.out.flush()
        elif not self._in_txn and event.next_pos:
            self._advance(Position(self._file, event.next_pos))
        if self._pending:
            self.settle(wait=False)
        self._caught_up = kind == "heartbeat"
        # Heartbeats keep the status line (and --json status lines) coming while the server is idle.
        if self.on_progress is not None and (self.events % 256 == 0 or self._caught_up):
            self._report()

    def _later(self, effect: Callable[..., None], *args: Any) -> None:
        """Run a writing step now, or after the rows still being decoded before it."""
        if self._pending:
            self._pending.append((effect, args))
        else:
            effect(*args)

    def _advance(self, position: Position) -> None:
        self.read_position = position
        self._later(self.out.advance, position)

    def _on_commit(self, event: Event) -> None:
        self.read_position = Position(event.file, event.next_pos)
        self._later(self.out.commit, event.xid, event.timestamp, self._txn_gtid, self.read_position, self._seen)
        self._in_txn, self._begun, self._txn_gtid, self._seen = False, False, None, False

    def _on_table_map(self, event: Event) -> None:
        if not self._in_txn:
            # Every transaction opens with a GTID (MariaDB) or BEGIN event: a table map before one means the
            # start position was inside a transaction, and its earlier statements would be silently missing.
            raise DataError(f"table map at {event.file}:{event.pos} outside a transaction: the start position is "
                            "inside a transaction", hint="start at a transaction boundary (the position after a "
                            "COMMIT/Xid event in SHOW BINLOG EVENTS), or use --start-gtid")
        self.decoders.on_table_map(event, position_string(event.file, event.pos, 0, seq_offset=self.out.seq_offset))

    def _forget(self, decoder: RowDecoder) -> None:
        if self.pool is not None:
            self.pool.forget(decoder)

    def _on_rows(self, event: Event) -> None:
        cached = self.decoders.get(event.table_id or -1)
        if cached is None:
            raise DataError(f"rows event at {event.file}:{event.pos} for {event.db}.{event.table} without a table map")
        decoder = cached[1]
        if decoder is None or self._seen:
            return
        meta = RowsMeta(event.db or "", event.table or "", event.file, event.pos, self._txn_gtid, event.server_id,
                        event.op or "", seq_offset=self.out.seq_offset, fk_checks=event.fk_checks)
        if event.table_id in self.decoders.marks:
            self._on_marks(decoder, event, meta)
            return
        if event.partial:  # columns left out are unknown: no line, the table is read again (cdc.capture.schemas)
            self._later(self.schemas.at_partial_rows, meta.db, meta.table, position_string(
                event.file, event.pos, 0, seq_offset=self.out.seq_offset))
            return
        if self.out.skip_until is not None:
            meta = meta._replace(first=first_row_after(meta, self.out.skip_until))
            if meta.first:  # rows already in a sealed segment still count for an open window
                self._later(self._note_skipped, decoder, event, meta)
        pool = self.pool
        # With the workers busy, the reader decodes this event itself rather than wait: it keeps both busy
        # whatever the machine's load, and the queue of finished steps behind the oldest job stays bounded.
        body = event.raw.row_bytes() if pool is not None and decoder.has_fast_path and not pool.full else None
        if body is None:
            block, count = self._encode_here(decoder, event, meta)
            self._later(self._add_rows, meta, block, count)
            if self._pending:
                self._queued_bytes += len(block)
                self.queued_peak_bytes = max(self.queued_peak_bytes, self._queued_bytes)
                if len(self._pending) > _MAX_QUEUED or self._queued_bytes > _MAX_QUEUED_BYTES:
                    self.settle(keep=_MAX_QUEUED, keep_bytes=_MAX_QUEUED_BYTES)  # bounded memory: wait
            return
        pool.submit(decoder, body, meta)  # type: ignore[union-attr]
        self._pending.append((None, (decoder, event, meta)))

    @staticmethod
    def _encode_here(decoder: RowDecoder, event: Event, meta: RowsMeta) -> tuple[bytes, int]:
        native = decoder.native_body(event.raw)  # the C decoder first (cdc.capture.nativeblock), Python as fallback
        lines = native_block(*native, meta) if native is not None else None
        if lines is not None:
            return lines
        try:
            images = decoder.images(event.raw, meta.op)
        except DataError as exc:
            raise DataError(f"{meta.db}.{meta.table} at {meta.file}:{meta.pos} {exc.message}", hint=exc.hint) from None
        return rows_block(images, decoder.key_names, meta)

    def _add_rows(self, meta: RowsMeta, block: bytes | bytearray, count: int) -> None:
        first = meta.position(meta.first) if self.out.txn.first_position is None else ""  # kept for its first lines only
        self.out.add_rows(first, block, count)
        if self.windows.held:
            self.windows.note(meta.db, meta.table, block)

    def _note_skipped(self, decoder: RowDecoder, event: Event, meta: RowsMeta) -> None:
        if self.windows.watches(meta.db, meta.table):
            block, _ = self._encode_here(decoder, event, meta._replace(first=0))
            self.windows.note(meta.db, meta.table, block)

    def _on_marks(self, decoder: RowDecoder, event: Event, meta: RowsMeta) -> None:
        """Rows of the watermark table: re-snapshot marks (cdc.capture.windows), applied in binlog order."""
        where = MarkEvent(event.file, event.pos, self._txn_gtid, event.server_id, self.out.seq_offset)
        for _, after in decoder.images(event.raw, meta.op):
            mark = None if after is None else Mark.parse(after.get("mark"))
            if mark is not None:
                self._later(self.windows.on_mark, mark, where, self._add_marked)

    def _add_table(self, db: str, table: str) -> None:
        """Capture db.table from here on (a low mark of `cdc snapshot --add-table`), also after a restart."""
        record_added(self.state, db, table)
        self.filters.added.add((db, table))
        self.decoders.drop_table(db, table)

    def _add_marked(self, first_position: str, block: bytes, count: int) -> None:
        """Lines a mark adds to its transaction, unless a run before a crash already sealed them."""
        skip = self.out.skip_until
        if skip is None or first_position > skip:
            self.out.txn.add(first_position, block, count)

    def _poll_locked(self) -> None:
        self.locked.poll(self.out.position, self.out.seq_offset, self.out.skip_until, self._emit_between)

    def _emit_between(self, fill: Callable[[Callable[[str, bytes, int], None]], None]) -> None:
        """Lines of a locked re-snapshot step, as a transaction of their own between two of the server's."""
        fill(self._add_marked)
        self.out.write_between()

    def _on_text_dml(self, event: Event) -> None:
        position = position_string(event.file, event.pos, 0, seq_offset=self.out.seq_offset)
        self._later(self.schemas.at_text_dml, event.sql or "", event.db or "", position)

    def _on_statement(self, event: Event) -> None:
        """A statement outside a transaction: DDL (its own transaction) becomes control lines."""
        changes = [] if self._seen else parse_ddl(event.sql or "", event.db or "")
        if not changes and not self._seen and (dropped := dropped_database(event.sql or "")) is not None:
            changes = self.schemas.tables_of(dropped)
        if not changes and not self._seen:  # a non-transactional table's row change is logged without BEGIN
            self._on_text_dml(event)
        elif changes:
            self._later(self.schemas.forget_absent)
        skip = self.out.skip_until
        for change in changes:  # replayed or not: an open window must learn of it
            self._later(self.windows.on_ddl, change.db, change.table)
            if change.new_table:
                self._later(self.windows.on_ddl, change.new_db or change.db, change.new_table)
        for index, change in enumerate(changes):
            if not (self.filters.wants(change.db, change.table)
                    or (change.new_table and self.filters.wants(change.new_db or change.db, change.new_table))):
                continue
            position = position_string(event.file, event.pos, index, seq_offset=self.out.seq_offset)
            if skip is not None and position <= skip:
                continue
            body: dict[str, Any] = {"db": change.db, "ddl": event.sql, "kind": change.kind, "op": "ddl",
                                    "position": position}
            if change.kind == "rename":  # RENAME TABLE may move a table to another database
                body["new_db"], body["new_table"] = change.new_db or change.db, change.new_table
            src = {"file": event.file, "gtid": self._txn_gtid, "pos": event.pos, "row": index, "server_id": event.server_id}
            self.schemas.refuse_versioned(change, event.sql or "", position)
            if change.kind == "alter":
                self.schemas.at_alter(change, position, event.sql_mode)
            elif change.kind == "rename" and change.new_table and self.filters.wants(body["new_db"], change.new_table):
                self.schemas.at_rename(change, body["new_db"], event, position)
            if change.rows_changed:
                self.schemas.at_rows_changed(change, position)
            self._later(self.out.txn.add, position, line_template(*split_line(body, src, change.table)), 1)
            if change.kind in ("alter", "create", "rename", "drop"):
                self.schemas.refresh_foreign_keys(change.new_db or change.db, change.new_table or change.table,
                                                  position)
        self.decoders.clear()  # table ids may be reused for the changed tables
        if self._grouped or opens_transaction(event.sql or ""):
            # CREATE TABLE ... SELECT: the rows it inserted and the commit follow in the same transaction (issue #30).
            self._begun = True
            return
        self._on_commit(event)

    # --- applying in binlog order ---------------------------------------------------------------------

    def _apply_next(self, wait: bool) -> bool:
        """Apply the oldest queued step; False if it is a job whose result is not back yet (and not `wait`)."""
        effect, args = self._pending[0]
        if effect is not None:
            self._pending.popleft()
            if effect == self._add_rows:
                self._queued_bytes -= len(args[1])
            effect(*args)
            return True
        assert self.pool is not None
        if not wait and not self.pool.ready():
            return False
        result = self.pool.take()
        self._pending.popleft()
        decoder, event, meta = args
        if result is None:
            result = self._encode_here(decoder, event, meta)
        else:
            self.worker_rows += result[1]
        self._add_rows(meta, *result)
        return True

    def settle(self, wait: bool = True, keep: int = 0, keep_bytes: int = 0) -> None:
        """Apply the queued steps whose rows are decoded; with `wait`, until no more than `keep` steps holding
        no more than `keep_bytes` of lines decoded here are left."""
        try:
            while self._pending and (len(self._pending) > keep or self._queued_bytes > keep_bytes):
                if not self._apply_next(wait):
                    break
        except BaseException:
            # Nothing behind a failed step may be applied (its transaction would be incomplete): drop it all,
            # and the workers' results for it with them; tail stops, or re-reads from the last applied commit.
            self._pending.clear()
            self._queued_bytes = 0
            if self.pool is not None:
                self.pool.close()
                self.pool = None
            self.read_position = self.position
            raise

    def finish(self) -> None:
        """Apply everything read, seal the open segment and checkpoint."""
        self.settle()
        self.out.flush(force=True)

    def abort_transaction(self) -> None:
        """Forget the open transaction (lost connection, stop): it is re-read from its start next time.

        The commits read before it are applied first (their rows are decoded), so a stop loses nothing.
        """
        try:
            self.settle()
        finally:
            self.out.txn.clear()
            self._in_txn, self._begun, self._txn_gtid, self._seen = False, False, None, False
            self.decoders.clear()
            self.read_position = self.position

    # --- progress and connections ----------------------------------------------------------------------

    def _report(self) -> None:
        now = time.monotonic()
        rate = (self.events - self._progress_events) / max(now - self._progress_at, 1e-6)
        self._progress_at, self._progress_events = now, self.events
        lag: float | None
        lag_bytes: int | None
        if self._caught_up:
            lag, lag_bytes = 0.0, 0
        else:
            lag = max(0.0, time.time() - self.out.last_ts) if self.out.last_ts else None
            lag_bytes = self.lag.bytes_behind(self.position)
        assert self.on_progress is not None
        self.on_progress(Progress(str(self.position), self.events, self.rows, self.transactions, rate, lag,
                                  self.segments, lag_bytes))

    def close(self) -> None:
        self._pending.clear()
        self._queued_bytes = 0
        self.out.close()
        self.schemas.close_control()

