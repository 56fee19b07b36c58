"""The writing side of tail: open transaction, open segment, seal, checkpoint (docs/formats.md).

Data first, checkpoint last: a transaction's lines reach a segment at its COMMIT; a segment holds whole
transactions and is sealed (fsync, rename) before tail.json moves past them. With decode workers the
reading side runs ahead; everything here happens in binlog order once the rows before it are decoded
(cdc.capture.events), so `position` is always a commit whose rows are all in the open or a sealed segment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import BinaryIO

from cdc.capture.start import Start, last_position_in, uncheckpointed_segments
from cdc.capture.txn import TransactionBuffer
from cdc.changelog import SegmentWriter, file_seq
from cdc.checkpoints import TailCheckpoint
from cdc.gtid import GtidSet
from cdc.source.binlog import Position
from cdc.state import StateDir

log = logging.getLogger(__name__)


class Committer:
    """Position at the last applied commit, the open transaction's lines, the open segment, the checkpoint."""

    def __init__(self, state: StateDir, start: Start, server_uuid: str, *, flush_interval: float,
                 segment_bytes: int, spill_bytes: int, stdout: BinaryIO | None = None) -> None:
        self.state, self.server_uuid = state, server_uuid
        self.position, self.gtid, self.last_segment = start.position, start.gtid, start.last_segment
        # Every transaction read up to `position`: what a --rebase onto another server continues from.
        self.gtid_state = None if start.gtid_state is None else GtidSet.parse(start.gtid_state)
        self.seq_offset = start.seq_offset
        self.skip_gtids = list(start.skip_gtids)  # captured before a --rebase, still ahead on the new server
        self.flush_interval, self.segment_bytes, self.stdout = flush_interval, segment_bytes, stdout
        self.writer = SegmentWriter(state.changelog, TailCheckpoint.STAGE)
        self.writer.discard_stale()
        self.txn = TransactionBuffer(state.root / "tmp", spill_bytes)
        self.txn.discard_stale()
        self.transactions = self.rows = self.segments = 0
        self.last_ts = 0
        self._opened_at: float | None = None
        self._checkpointed_at = time.monotonic()
        self._dirty = True  # position or server moved since the last checkpoint (a first run writes one at once)
        self.skip_until = self._recover()
        # True while a re-snapshot window is open (cdc.capture.windows): segments are sealed as always, but
        # tail.json stays before the window, so a restart reads the whole window again.
        self.holds: Callable[[], bool] = lambda: False
        # Called just before tail.json is written, once every line before its position is sealed (cdc.lockedreads).
        self.before_checkpoint: Callable[[], None] = lambda: None

    def _recover(self) -> str | None:
        """Segments sealed after the last checkpoint (kill -9 between seal and checkpoint): skip their lines."""
        orphans = uncheckpointed_segments(self.state.changelog, self.last_segment)
        if not orphans:
            return None
        self.last_segment = orphans[-1].name
        return last_position_in(orphans[-1])

    def add_rows(self, first_position: str, block: bytes | bytearray, count: int) -> None:
        self.txn.add(first_position, block, count)
        self.rows += count

    def advance(self, position: Position) -> None:
        if position != self.position:
            self.position, self._dirty = position, True

    def commit(self, xid: int | None, ts: int, gtid: str | None, position: Position, seen: bool = False) -> None:
        """The transaction read since the last commit ends at `position`; `seen`: captured before a --rebase."""
        if seen:
            self.skip_gtids.remove(gtid)  # type: ignore[arg-type]  # seen is only ever true for a GTID in the list
        elif self.txn.count:
            self._write_transaction(xid, ts)
        self.txn.clear()
        if not seen:
            self.gtid = gtid or self.gtid
            if gtid is None:  # MySQL with GTIDs off (anonymous): from here no GTID set can say what was read
                self.gtid_state = None
            elif self.gtid_state is not None:
                self.gtid_state.add(gtid)
        self.last_ts = ts
        self.advance(position)
        self.flush()

    def write_between(self) -> None:
        """The lines added since the last commit, as a transaction of their own (a locked re-snapshot's chunk):
        the position, GTIDs and checkpoint stay where the last commit left them."""
        if self.txn.count:
            self._write_transaction(None, self.last_ts or int(time.time()))
        self.txn.clear()
        self.flush()

    def _write_transaction(self, xid: int | None, ts: int) -> None:
        first = self.txn.first_position or ""
        if self.writer.is_empty:
            self._opened_at = time.monotonic()
        count = self.txn.count
        for block in self.txn.complete(xid, ts):
            self.writer.write(first, block, count)  # the count goes with the first block, 0 with the rest
            count = 0
            if self.stdout is not None:
                self.stdout.write(block)
        if self.stdout is not None:
            self.stdout.flush()
        self.transactions += 1

    def flush(self, force: bool = False) -> None:
        """Seal the open segment if it is big or old enough (or `force`), then advance the checkpoint."""
        now = time.monotonic()
        if not self.writer.is_empty:
            if force or self.writer.bytes >= self.segment_bytes or now - (self._opened_at or now) >= self.flush_interval:
                sealed = self.writer.seal()
                if sealed is not None:
                    self.last_segment, self.segments = sealed.name, self.segments + 1
                    log.debug(f"tail sealed {sealed.name}; checkpoint at {self.position}",
                              extra={"stage": TailCheckpoint.STAGE, "segment": sealed.name, "position": str(self.position)})
                self._checkpoint()
        elif self._dirty and (force or now - self._checkpointed_at >= self.flush_interval):
            self._checkpoint()

    def _checkpoint(self) -> None:
        if self.holds():
            return
        if self.skip_until is not None:
            if self._key(self.position) <= _position_key(self.skip_until):
                # Still re-reading what a killed run sealed: a checkpoint here would name the last of those
                # segments with a position before its end, and a second kill would write its lines again.
                return
            self.skip_until = None
        self.before_checkpoint()
        TailCheckpoint(
            self.position.file, self.position.pos, self.gtid, self.last_segment, self.server_uuid,
            None if self.gtid_state is None else str(self.gtid_state), self.seq_offset, tuple(self.skip_gtids),
        ).write(self.state)
        self._dirty, self._checkpointed_at = False, time.monotonic()

    def close(self) -> None:
        self.writer.abandon()
        self.txn.clear()

    def _key(self, position: Position) -> tuple[int, int]:
        """A binlog position as change-log positions order it (the file number plus the --rebase offset)."""
        return file_seq(position.file) + self.seq_offset, position.pos


def _position_key(position: str) -> tuple[int, int]:
    seq, pos, _ = position.split(":")
    return int(seq), int(pos)
