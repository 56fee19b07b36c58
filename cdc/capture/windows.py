"""Tail's half of the online re-snapshot: watermark windows, noted keys, chunk rows emitted at the high mark.

The technique is the one of Netflix's DBLog and Debezium's incremental snapshots, built around our change log
(cdc.watermarks has the marks and files; docs/formats.md, "Re-snapshots"):

- `cdc resnapshot` writes a low mark, SELECTs one chunk of the table by primary key, writes the chunk to a
  file in the state directory, then writes a high mark. Both marks reach us through the binlog, so every
  change of the table committed between them is read here between the two marks.
- At the low mark we open a window and note the key (and the old key of a key-changing update) of every
  row change of that table. At the high mark we add the chunk's rows minus the noted keys to the high mark's
  transaction, as `r` lines at its position. A noted key's newest state is already in the change log as a
  binlog change (committed after the SELECT, or before it, when the read has it too): dropping the read row
  means an older read never overwrites a newer change, whatever the SELECT saw.
- The emission happens here, in tail's ordered and crash-safe write path, not in the resnapshot process: its
  lines go through the same transaction buffer, segment and checkpoint as every binlog change, so ship,
  spark-merge and apply see nothing new but `r` lines at a later position (and an end line, below).

Why this is safe against kill -9 of either process: while a window is open, tail seals segments as always
but does not move tail.json past the window's start. A killed tail re-reads the window from the binlog,
notes the same keys again and skips the lines already sealed (cdc.capture.commit's orphan segments), so the
emission is byte-identical. A killed resnapshot leaves a low mark without its high one: the window stays
open (and tail.json held) until the rerun writes its next low mark for the table, which replaces it.

A DDL of the table inside a window makes the chunk unusable (the SELECT may have run on either side of it:
a TRUNCATE after the read would be undone, an ADD COLUMN missed); so does a missing chunk file. Then tail
emits nothing for that chunk and leaves a `.redo` file beside it, and `cdc resnapshot` reads those keys again.
The same happens to a high mark whose low mark this run did not read (a tail started from a position inside the
window): a second guard behind the held checkpoint, never a silent gap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from cdc.capture.filters import Filters
from cdc.capture.rowblock import TS_MARK, XID_MARK, line_template
from cdc.capture.txn import split_line
from cdc.changelog import position_string
from cdc.schema import SchemaHistory
from cdc.state import StateDir, write_bytes_atomic
from cdc.watermarks import CANCEL, END, HIGH, LOW, Mark, key_bytes, read_chunk, redo_path, run_dir, split_table_name

log = logging.getLogger(__name__)

AddLines = Callable[[str, bytes, int], None]  # (first position, lines with markers, count): the open transaction
AddTable = Callable[[str, str], None]  # start capturing db.table (`cdc snapshot --add-table`)


@dataclass(frozen=True)
class MarkEvent:
    """Where a mark's row change sits in the binlog: its lines take these coordinates."""

    file: str
    pos: int
    gtid: str | None
    server_id: int | None
    seq_offset: int

    def position(self, row: int) -> str:
        """Row `row` of the mark's rows event. Kind `b`, not `s`: a segment tail seals may start with these
        lines, and recovery (cdc.capture.start.uncheckpointed_segments) takes `s` segments for the initial
        snapshot's. The mark's own row (row 0) is never written, so the numbers are the emitted lines'."""
        return position_string(self.file, self.pos, row, seq_offset=self.seq_offset)


@dataclass
class _Window:
    run: str
    chunk: int
    noted: set[bytes] = field(default_factory=set)
    poisoned: str | None = None  # why the chunk cannot be emitted


class Windows:
    """The open re-snapshot windows of one tail run, keyed by table."""

    def __init__(self, state: StateDir, filters: Filters, history: SchemaHistory, watermark_table: str,
                 add_table: AddTable) -> None:
        self.state, self.filters, self.history, self.add_table = state, filters, history, add_table
        self.table = split_table_name(watermark_table)
        self._open: dict[tuple[str, str], _Window] = {}
        self.emitted_rows = 0

    @property
    def held(self) -> bool:
        """A window is open: tail.json must stay before it (see the module docstring)."""
        return bool(self._open)

    def is_mark_table(self, db: str | None, table: str | None) -> bool:
        return (db, table) == self.table

    def watches(self, db: str, table: str) -> bool:
        return (db, table) in self._open

    # --- in binlog order ------------------------------------------------------------------------------

    def note(self, db: str, table: str, block: bytes | bytearray) -> None:
        """Note the keys of a rows event's lines (cdc.capture.rowblock's block, markers in place)."""
        window = self._open.get((db, table))
        if window is None:
            return
        for line in bytes(block).split(TS_MARK):
            if not line:
                continue
            change = orjson.loads(line.replace(XID_MARK, b"null") + b'"}')
            key = change["key"]
            window.noted.add(key_bytes(key))
            before = change.get("before")
            if before is not None:  # a key-changing update leaves its old key behind: noted too
                window.noted.add(key_bytes({name: before.get(name) for name in key}))

    def on_ddl(self, db: str, table: str) -> None:
        window = self._open.get((db, table))
        if window is not None and window.poisoned is None:
            window.poisoned = "a DDL statement of the table inside the chunk's window"

    def on_mark(self, mark: Mark, event: MarkEvent, add: AddLines) -> None:
        name = (mark.db, mark.table)
        if mark.add and mark.mark == LOW and not self.filters.wants(mark.db, mark.table):
            # Captured from this mark on: every change after it is in the change log, every row before it
            # is read by a chunk after it.
            self.add_table(mark.db, mark.table)
        if not self.filters.wants(mark.db, mark.table):
            log.warning(f"re-snapshot mark for {mark.db}.{mark.table}, which this tail does not capture: ignored",
                        extra={"stage": "tail", "position": event.position(0)})
            return
        if mark.mark == LOW:
            self._open[name] = _Window(mark.run, mark.chunk)  # a rerun's low mark replaces a dead window
        elif mark.mark == HIGH:
            self._close(mark, self._open.pop(name, None), event, add)
        elif mark.mark == END and mark.cut is not None:
            self._end(mark, event, add)
        elif mark.mark == CANCEL and name in self._open and self._open[name].run == mark.run:
            del self._open[name]  # the run was given up: nothing to emit, tail.json may move on

    def _close(self, mark: Mark, window: _Window | None, event: MarkEvent, add: AddLines) -> None:
        directory = run_dir(self.state, mark.run)
        assert mark.file is not None  # Mark.parse: a high mark names its file
        why = None
        if window is None or (window.run, window.chunk) != (mark.run, mark.chunk):
            why = "its low mark was not read (tail started inside the window)"
        else:
            why = window.poisoned
        chunk = None if why else read_chunk(directory / mark.file)
        if chunk is None or chunk.schema.db != mark.db or chunk.schema.table != mark.table:
            self._redo(mark, directory, why or "its chunk file is missing or incomplete", event)
            return
        assert window is not None
        first = event.position(0)
        latest = self.history.latest(mark.db, mark.table)
        if latest is None or not latest.same_shape(chunk.schema):
            # The chunk was read with this schema inside the window (no DDL since): it is the table's at this mark.
            self.history.record(replace(chunk.schema, position=first))
        kept = [(key, after) for key, after in chunk.rows if key_bytes(key) not in window.noted]
        parts = []
        for row, (key, after) in enumerate(kept):
            body = {"after": after, "before": None, "db": mark.db, "key": key, "op": "r",
                    "position": event.position(row)}
            src = {"file": event.file, "gtid": event.gtid, "pos": event.pos, "row": row, "server_id": event.server_id}
            parts.append(line_template(*split_line(body, src, mark.table)))
        add(first, b"".join(parts), len(kept))
        self.emitted_rows += len(kept)
        log.debug(f"re-snapshot {mark.run} chunk {mark.chunk} of {mark.db}.{mark.table}: {len(kept)} of "
                  f"{len(chunk.rows)} rows at {first} ({len(chunk.rows) - len(kept)} changed in the window)",
                  extra={"stage": "tail", "position": first})

    def _redo(self, mark: Mark, directory: Any, why: str, event: MarkEvent) -> None:
        log.warning(f"re-snapshot {mark.run} chunk {mark.chunk} of {mark.db}.{mark.table} not emitted: {why}; "
                    "cdc resnapshot reads it again", extra={"stage": "tail", "position": event.position(0)})
        if directory.is_dir():
            write_bytes_atomic(redo_path(directory, mark.file or f"chunk-{mark.chunk:06d}-00000000.jsonl"),
                               why.encode() + b"\n")

    def _end(self, mark: Mark, event: MarkEvent, add: AddLines) -> None:
        """The table was read whole: every row older than the cut that was not read again is gone from the source."""
        assert mark.cut is not None
        position = event.position(0)
        cut = position_string(mark.cut[0], mark.cut[1], 0, seq_offset=event.seq_offset)
        # Every row was read after the cut: a flag on an older ALTER (a default only a re-read can know) is answered.
        self.history.mark_repaired(mark.db, mark.table, cut)
        body = {"cut": cut, "db": mark.db,
                "ddl": f"cdc resnapshot (run {mark.run})", "kind": "resnapshot", "op": "ddl", "position": position}
        src = {"file": event.file, "gtid": event.gtid, "pos": event.pos, "row": 0, "server_id": event.server_id}
        add(position, line_template(*split_line(body, src, mark.table)), 1)
