"""Write snapshot chunks while the socket is idle, and seal them and advance snapshot.json on a background thread.

Sealing is an fsync of the segment and of its directory, the checkpoint two more: ~10 ms a chunk here,
a third of a 10,000-row chunk's time once reading got fast. fsync releases the GIL, so one thread does
it while the main thread reads on. The order stays "data first, checkpoint last": the seal jobs run in
submission order (seal chunk N, checkpoint N, seal N+1, ...), each submitted after the writes of its
chunk, and at most one seal is in flight, so the segment writer being sealed is never the one being
written. Two writers take turns; their temp files (`.seg-snapshot-*.tmp`) are both removed by
discard_stale after a crash.

The writes themselves (copying ~370 bytes a row into the page cache) are queued, and the reading thread
does them whenever the server has sent nothing new (write_while, called by wire.py before it would
block on the socket), or when more than QUEUED_BYTES wait. They used to run on a thread of their own:
on 2 cores that third busy thread took CPU from the server, whose rows are what the snapshot waits for,
and each hand-over cost a thread switch. 1M `narrow` rows, medians of 20 interleaved runs (docs/performance.md,
"The fifth machine"): 0.481 -> 0.433 s with the server on a disk of its own (mariadb-dump 0.425 s), 0.355 ->
0.289 s with the table in the buffer pool (dump 0.404 s), 0.617 s either way when the server reads from
the disk the segments go to; cdc's CPU 17-23% lower in all three.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.changelog import SegmentWriter
from cdc.snapshot.checkpoint import STAGE
from cdc.state import StateDir, fsync_dir

QUEUED_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class _Write:
    writer: SegmentWriter
    position: str
    lines: bytes
    count: int


@dataclass(frozen=True)
class _Seal:
    writer: SegmentWriter | None  # None: only the checkpoint (a chunk adopted after a crash is sealed already)
    checkpoint: dict[str, Any]


class ChunkSealer:
    """write() queues the current chunk's lines and commit() its seal; write_while() does the queued jobs
    while the reader is idle; the seals and checkpoints become durable on a background thread, in order."""

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self._writers = (SegmentWriter(state.changelog, owner=STAGE),
                         SegmentWriter(state.changelog, owner=f"{STAGE}-b"))
        self._writers[0].discard_stale()  # the glob .seg-snapshot-*.tmp covers both writers
        self._writer = self._writers[0]
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-seal")
        self._pending: Future[None] | None = None
        self._queue: deque[_Write | _Seal] = deque()
        self._queued_bytes = 0
        self._failed: BaseException | None = None  # a write failed: no queued job may run after it

    def write(self, position: str, lines: bytes, count: int) -> None:
        """Queue `count` whole lines for the current writer's segment; write the oldest if too many wait."""
        self._queue.append(_Write(self._writer, position, lines, count))
        self._queued_bytes += len(lines)
        while self._queued_bytes > QUEUED_BYTES:
            self._do_next()

    def commit(self, checkpoint: dict[str, Any], *, seal: bool) -> None:
        """Queue the sealing of the current writer's segment (if `seal`), then `checkpoint`; switch writers."""
        self._queue.append(_Seal(self._writer if seal else None, checkpoint))
        if seal:
            self._writer = self._writers[1] if self._writer is self._writers[0] else self._writers[0]

    def write_while(self, idle: Callable[[], bool]) -> None:
        """Do queued jobs, oldest first, for as long as `idle()` says the reader has nothing to read."""
        while self._queue and idle():
            self._do_next()

    def install(self, chunk_file: Path, segment: Path, checkpoint: dict[str, Any]) -> None:
        """Rename a chunk file written (and fsynced) elsewhere to its segment name, then write `checkpoint`."""
        self.wait()
        self._pending = self._worker.submit(self._installed, chunk_file, segment, checkpoint)

    def wait(self) -> None:
        """Do every queued job and block until the seal in flight is done; re-raise what a write or the seal
        raised (a full disk, say)."""
        while self._queue or self._failed is not None:
            self._do_next()
        self._seal_done()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._worker.shutdown(wait=True)

    def _do_next(self) -> None:
        if self._failed is not None:
            raise self._failed
        job = self._queue.popleft()
        if isinstance(job, _Write):
            self._queued_bytes -= len(job.lines)
            try:
                job.writer.write(job.position, job.lines, job.count)
            except BaseException as exc:
                self._failed = exc  # the seal queued after these lines must never write its checkpoint
                raise
        else:
            self._seal_done()  # one seal at a time: the writer it sealed may be written to next
            self._pending = self._worker.submit(self._durable, job.writer, job.checkpoint)

    def _seal_done(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _installed(self, chunk_file: Path, segment: Path, checkpoint: dict[str, Any]) -> None:
        os.replace(chunk_file, segment)
        fsync_dir(segment.parent)
        self.state.write_checkpoint(STAGE, checkpoint)

    def _durable(self, writer: SegmentWriter | None, checkpoint: dict[str, Any]) -> None:
        if writer is not None:
            writer.seal()  # re-raises a failed write's error: a segment missing lines is never sealed
        self.state.write_checkpoint(STAGE, checkpoint)
