"""Write and seal snapshot chunks and advance snapshot.json on background threads, while the main thread reads.

Sealing is an fsync of the segment and of its directory, the checkpoint two more: ~10 ms a chunk here,
a third of a 10,000-row chunk's time once reading got fast. fsync releases the GIL, so one thread does
it while the main thread reads on. The order stays "data first, checkpoint last": one worker runs the
seal jobs in submission order (seal chunk N, checkpoint N, seal N+1, ...), each after the writes of its
chunk, and at most one seal is in flight, so the segment writer being sealed is never the one being
written. Two writers take turns; their temp files (`.seg-snapshot-*.tmp`) are both removed by
discard_stale after a crash.

The writes themselves (copying ~150 bytes a row into the page cache: a third of the main thread's
time once the C reader parsed fast) run on a second thread, so the main thread goes back to the socket
sooner and the server is not left waiting; at most QUEUED_BYTES of lines wait for it.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cdc.capture.snapshot_checkpoint import STAGE
from cdc.changelog import SegmentWriter
from cdc.state import StateDir, fsync_dir

QUEUED_BYTES = 8 * 1024 * 1024


class ChunkSealer:
    """write() takes the current chunk's lines; commit() makes them and the checkpoint durable, in order."""

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self._writers = (SegmentWriter(state.changelog, owner=STAGE),
                         SegmentWriter(state.changelog, owner=f"{STAGE}-b"))
        self._writers[0].discard_stale()  # the glob .seg-snapshot-*.tmp covers both writers
        self._writer = self._writers[0]
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-seal")
        self._pending: Future[None] | None = None
        self._writing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-write")
        self._queued: deque[tuple[Future[None], int]] = deque()
        self._queued_bytes = 0

    def write(self, position: str, lines: bytes, count: int) -> None:
        """Append `count` whole lines to the current writer's segment, on the writing thread."""
        self._queued.append((self._writing.submit(self._writer.write, position, lines, count), len(lines)))
        self._queued_bytes += len(lines)
        while self._queued_bytes > QUEUED_BYTES:
            self._written()

    def commit(self, checkpoint: dict[str, Any], *, seal: bool) -> None:
        """Seal the current writer's segment (if `seal`) once its writes are done, then write `checkpoint`;
        switch writers."""
        self.wait(writes=False)
        written = self._writing.submit(_nothing)  # done when every write queued before it is
        self._pending = self._worker.submit(self._durable, self._writer if seal else None, checkpoint, written)
        if seal:
            self._writer = self._writers[1] if self._writer is self._writers[0] else self._writers[0]

    def install(self, chunk_file: Path, segment: Path, checkpoint: dict[str, Any]) -> None:
        """Rename a chunk file written (and fsynced) elsewhere to its segment name, then write `checkpoint`."""
        self.wait()
        self._pending = self._worker.submit(self._installed, chunk_file, segment, checkpoint)

    def wait(self, *, writes: bool = True) -> None:
        """Block until the seal in flight (and, if `writes`, every queued write) is done; re-raise what
        it raised (a full disk, say)."""
        while writes and self._queued:
            self._written()
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._writing.shutdown(wait=True)
            self._worker.shutdown(wait=True)

    def _written(self) -> None:
        """Wait for the oldest queued write; re-raise its error."""
        done, size = self._queued.popleft()
        self._queued_bytes -= size
        done.result()

    def _installed(self, chunk_file: Path, segment: Path, checkpoint: dict[str, Any]) -> None:
        os.replace(chunk_file, segment)
        fsync_dir(segment.parent)
        self.state.write_checkpoint(STAGE, checkpoint)

    def _durable(self, writer: SegmentWriter | None, checkpoint: dict[str, Any], written: Future[None]) -> None:
        written.result()
        if writer is not None:
            writer.seal()  # re-raises a failed write's error: a segment missing lines is never sealed
        self.state.write_checkpoint(STAGE, checkpoint)


def _nothing() -> None:
    """A write-queue barrier."""
