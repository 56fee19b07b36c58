"""Decode rows events in worker processes while tail reads the binlog; results come back in binlog order.

Tail's main process reads the stream (protocol, table maps, transaction boundaries, checkpoints) and hands
full-image rows-event bodies to workers (cdc.capture.decode_worker), which turn them into blocks of change
lines with the same code tail runs in-process (cdc.capture.rowblock), so the change log is byte-identical.
Jobs go to the workers in turn and results are taken in the same turn, so they arrive in submission order.

Pipes are non-blocking and every wait is a select() over both directions: tail never blocks writing a job
while a worker blocks writing a result nobody reads. At most `limit` jobs, and `limit_bytes` of rows-event
bodies (plus the one job that crosses it), are in flight per worker, so memory stays bounded: a count alone
would let 32 events of 16 MiB rows each sit in the pipes and the workers at once. A worker that dies (or
reports a bug) raises DecodeWorkerError at the next result tail needs; nothing decoded after that point is
applied, so the checkpoint never passes undecoded rows.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from cdc.capture.decode_worker import REPLY, frame
from cdc.capture.rowblock import RowsMeta
from cdc.errors import CdcError
from cdc.rows.decode import RowDecoder

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding `cdc`, for the worker's sys.path
_PIPE_BYTES = 2**20
DEFAULT_LIMIT_BYTES = 16 * 2**20  # rows-event bodies in flight per worker (everyday events are ~8 KiB each)
_WORKER = f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); from cdc.capture.decode_worker import main; main()"


_RERUN_HINT = ("rerun tail: it resumes at its checkpoint. If it happens again, run with --decode-workers 0 "
               "(decode in the tail process) and report it")


class DecodeWorkerError(CdcError):
    """A decode worker died or failed: tail stops at its last checkpoint (nothing after it was written)."""


def default_workers() -> int:
    """Decode workers when --decode-workers is not given: none with the C decoder, else one on a multi-core machine.

    Measured with bench_tail.py (200,000 changes, quiet 2-core machine): with the C decoder the worker's pipe
    costs more than the decoding it takes over (0.55 s wall and 0.73 s CPU with one worker, 0.34 s and 0.33 s
    without); on the Python path it pays (1.04 s with one, 1.51 s without).
    """
    from cdc.rows.native import native_module  # here: the extension loads only when tail starts

    if native_module() is not None:
        return 0
    return 1 if (os.cpu_count() or 1) > 1 else 0


def _widen(fd: int) -> None:
    """A 1 MiB pipe instead of 64 KiB: a few syscalls and wake-ups per MiB of lines instead of one per event."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (OSError, AttributeError):  # not Linux, or above /proc/sys/fs/pipe-max-size: the default works too
        pass


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        for fd in (self.wfd, self.rfd):
            os.set_blocking(fd, False)
            _widen(fd)
        self.outgoing = bytearray()
        self.results: deque[tuple[bytes, bytes | bytearray, int]] = deque()  # (kind, data, count) per reply
        self._reader = self.proc.stdout.raw  # type: ignore[attr-defined]  # unbuffered: we read big chunks ourselves
        self._chunk = memoryview(bytearray(_PIPE_BYTES))
        self._incoming = bytearray()  # replies read but not parsed yet (the start of one may be all there is)
        self.received = 0  # bytes read from the worker so far
        self.broken = False  # its stdin is closed: it died
        self.eof = False  # everything it wrote has been read: no more results will come

    def send(self, data: bytes) -> None:
        self.outgoing += data
        self.write()

    def write(self) -> None:
        try:
            written = os.write(self.wfd, self.outgoing)
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.broken = True
            self.outgoing.clear()
            return
        del self.outgoing[:written]

    def read(self) -> None:
        """Read what the worker sent so far (never waits) and split it into replies."""
        got = self._reader.readinto(self._chunk)
        if got is None:  # nothing right now
            return
        if not got:
            self.eof = True
            return
        self.received += got
        incoming = self._incoming
        incoming += self._chunk[:got]
        start, end = 0, len(incoming)
        while end - start >= REPLY.size:
            size, kind, count = REPLY.unpack_from(incoming, start)
            if end - start < REPLY.size + size:
                break
            start += REPLY.size
            self.results.append((kind, incoming[start:start + size], count))
            start += size
        del incoming[:start]

    def describe_end(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return f"decode worker (pid {self.proc.pid}) stopped answering"
        if code < 0:
            return f"decode worker (pid {self.proc.pid}) was killed by signal {signal.Signals(-code).name}"
        return f"decode worker (pid {self.proc.pid}) exited with status {code}"

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:  # the worker is gone and a write was pending: nothing to deliver
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class DecodePool:
    """`workers` decode processes; submit() jobs, take() their results in the same order."""

    def __init__(self, workers: int, limit: int = 32, stall_seconds: float = 120.0,
                 limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        self._workers = [_Worker() for _ in range(workers)]
        self._limit = limit * workers
        self._limit_bytes = limit_bytes * workers
        self._sizes: deque[int] = deque()  # body bytes of each job in flight, in submission order
        self._bytes = 0
        self.peak_bytes = 0  # the most body bytes that were in flight at once
        # A worker that sends nothing for this long while tail waits is stuck (stopped, swapping): stop loudly
        # rather than hang. One rows event takes milliseconds; even a 1 GiB row takes seconds.
        self._stall = stall_seconds
        self._submitted = self._taken = 0
        # decoder -> the key the workers know it by; holding the decoder (not its id) means a new decoder can
        # never inherit a dropped one's key through a reused id.
        self._keys: dict[RowDecoder, int] = {}
        self._next_key = 0

    @property
    def size(self) -> int:
        return len(self._workers)

    @property
    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers]

    @property
    def full(self) -> bool:
        """No room for another job (the count or the bytes in flight are at their limit): the reader decodes the
        next event itself."""
        in_flight = self._submitted - self._taken
        return in_flight >= self._limit or (in_flight > 0 and self._bytes >= self._limit_bytes)

    def _broadcast(self, message: tuple[Any, ...]) -> None:
        data = frame(message)
        for worker in self._workers:
            worker.send(data)

    def define(self, decoder: RowDecoder) -> int:
        """The workers' key of this decoder, sending it to them the first time."""
        key = self._keys.get(decoder)
        if key is None:
            key = self._keys[decoder] = self._next_key
            self._next_key += 1
            # The hash key goes down the worker's pipe with the table: in memory only, as in this process.
            self._broadcast(("define", key, decoder.columns, decoder.schema, decoder.exclude, decoder.hashed,
                             decoder.hash_key))
        return key

    def forget(self, decoder: RowDecoder) -> None:
        key = self._keys.pop(decoder, None)
        if key is not None:
            self._broadcast(("forget", key))

    def submit(self, decoder: RowDecoder, body: bytes, meta: RowsMeta) -> None:
        key = self.define(decoder)
        self._workers[self._submitted % len(self._workers)].send(frame(("rows", key, body, meta)))
        self._submitted += 1
        self._sizes.append(len(body))
        self._bytes += len(body)
        self.peak_bytes = max(self.peak_bytes, self._bytes)

    def ready(self) -> bool:
        """Whether the next result is here (reads what the workers sent so far, never waits)."""
        worker = self._workers[self._taken % len(self._workers)]
        if not worker.results:
            self._pump(0)
        return bool(worker.results)

    def take(self) -> tuple[bytes | bytearray, int] | None:
        """The next result in submission order: (block, count), or None when tail must decode it itself."""
        worker = self._workers[self._taken % len(self._workers)]
        heard = time.monotonic()
        while not worker.results:
            if worker.eof:
                raise DecodeWorkerError(worker.describe_end() + " before it returned all the rows sent to it",
                                        hint=_RERUN_HINT)
            received = worker.received
            self._pump(max(0.0, heard + self._stall - time.monotonic()))
            if worker.received != received:
                heard = time.monotonic()
            elif time.monotonic() - heard >= self._stall and not worker.results:
                worker.proc.kill()  # it must not go on holding work nobody will take
                raise DecodeWorkerError(f"decode worker (pid {worker.proc.pid}) sent nothing for "
                                        f"{self._stall:.0f} s while tail waited for it", hint=_RERUN_HINT)
        kind, data, count = worker.results.popleft()
        self._taken += 1
        self._bytes -= self._sizes.popleft()
        if kind == b"o":
            return data, count  # a bytearray: the committer only replaces its markers and writes it
        if kind == b"s":
            return None
        raise DecodeWorkerError(f"decode worker (pid {worker.proc.pid}) failed:\n{bytes(data).decode()}",
                                hint="report this as a bug; meanwhile run tail with --decode-workers 0")

    def _pump(self, timeout: float | None) -> None:
        """Write pending jobs and read results, waiting up to `timeout` seconds (None: until something moves)."""
        readers = [w.rfd for w in self._workers if not w.eof]
        writers = [w.wfd for w in self._workers if w.outgoing and not w.broken]
        if not readers:
            return
        readable, writable, _ = select.select(readers, writers, [], timeout)
        for worker in self._workers:
            if worker.wfd in writable:
                worker.write()
            if worker.rfd in readable:
                worker.read()

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
        self._workers = []
