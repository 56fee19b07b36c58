"""`cdc resnapshot`'s chunk windows: watermarks written through the binlog, or a locked chunk read.

`cdc resnapshot` reads chunks the same way in both modes (cdc.snapshot.resnapshot); what brackets each read
differs. Watermarks (cdc.watermarks): a low mark before the SELECT, a high mark after. Locked reads
(cdc.lockedreads, for a server whose watermark table cannot be written, such as a read-only replica): an
intent tail acknowledges, then the SELECT under `LOCK TABLES ... READ` with the binlog end read under the
lock, then a wait until tail has emitted the chunk and its checkpoint is past it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

import pymysql

from cdc.checkpoints import TailCheckpoint
from cdc.errors import PreconditionError, TimeoutExpired, UsageError
from cdc.lockedreads import (
    AUTO,
    CHUNK,
    END,
    LOCKED,
    MODES,
    WATERMARKS,
    Intent,
    Ready,
    remove_step,
    step_path,
    write_intent,
    write_ready,
)
from cdc.source.binlog import Position, current_position
from cdc.source.tables import TableInfo, qualified
from cdc.state import StateDir

log = logging.getLogger(__name__)

_DENIED_LOCK = (1044, 1142)  # access denied to LOCK TABLES (database level, table level)
_TAIL_HINT = ("start `cdc tail --follow` on this --state-dir (or `cdc run`), then rerun `cdc resnapshot` with the "
              "same tables: it resumes where it stopped")


class ChunkWindows(Protocol):
    """What brackets one chunk's SELECT so that tail can emit it exactly."""

    def reading(self, info: TableInfo, chunk: int) -> AbstractContextManager[None]: ...

    def emit(self, info: TableInfo, chunk: int, file: str, row_base: int) -> None: ...

    def end(self, info: TableInfo, chunk: int, cut: tuple[str, int], row_base: int) -> None: ...


class LockedWindows:
    """Chunks read under a table lock; tail emits each at the first boundary past the lock's binlog position."""

    def __init__(self, conn: pymysql.Connection, state: StateDir, directory: Path, run: str, wait_timeout: float,
                 sleep: Callable[[float], None]) -> None:
        self.conn, self.state, self.directory, self.run = conn, state, directory, run
        self.wait_timeout, self.sleep = wait_timeout, sleep
        self._p: Position | None = None
        for path in directory.glob("locked-*"):  # steps a killed run left: tail drops their window (cdc.lockedreads)
            path.unlink()

    @contextmanager
    def reading(self, info: TableInfo, chunk: int) -> Iterator[None]:
        write_intent(self.directory, Intent(self.run, CHUNK, info.db, info.table, chunk))
        self._await(lambda: step_path(self.directory, chunk, "ack").exists(), "open a window for the chunk")
        self._lock(info)
        try:
            # Under the lock no change of the table can commit: the chunk read next is the table as of this position.
            self._p = current_position(self.conn)
            yield
        finally:
            with self.conn.cursor() as cursor:
                cursor.execute("UNLOCK TABLES")

    def emit(self, info: TableInfo, chunk: int, file: str, row_base: int) -> None:
        assert self._p is not None  # reading() came first
        write_ready(self.directory, chunk, Ready(file, self._p, row_base))
        self._until_emitted(chunk)

    def end(self, info: TableInfo, chunk: int, cut: tuple[str, int], row_base: int) -> None:
        write_intent(self.directory, Intent(self.run, END, info.db, info.table, chunk, cut, row_base))
        self._until_emitted(chunk)

    def _lock(self, info: TableInfo) -> None:
        try:
            with self.conn.cursor() as cursor:
                cursor.execute(f"LOCK TABLES {qualified(info.db, info.table).replace('%', '%%')} READ")
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in _DENIED_LOCK:
                raise PreconditionError(f"a locked chunk read of {info.name} needs LOCK TABLES: {exc.args[1]}",
                                        hint=f"GRANT SELECT, LOCK TABLES ON {qualified(info.db, '*')[:-3]}.* TO the "
                                        "cdc user (and BINLOG MONITOR or REPLICATION CLIENT for the position)") from None
            raise

    def _until_emitted(self, chunk: int) -> None:
        """Until tail has chosen where to emit the step and its checkpoint is past it; then drop the step's files."""
        done = step_path(self.directory, chunk, "done")
        self._await(done.exists, "emit the step and seal its lines")
        remove_step(self.directory, chunk)

    def _await(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.wait_timeout
        while not done():
            if time.monotonic() > deadline:
                tail = TailCheckpoint.read(self.state)
                where = f"{tail.file}:{tail.pos}" if tail is not None else "nothing"
                raise TimeoutExpired(f"tail did not {what} in {self.wait_timeout:.0f}s (its checkpoint: {where}); "
                                     "a locked re-snapshot's rows reach the change log through tail", hint=_TAIL_HINT)
            self.sleep(0.05)


def _is_read_only(conn: pymysql.Connection) -> bool:
    with conn.cursor() as cursor:
        cursor.execute("SELECT @@global.read_only")
        row = cursor.fetchone()
    return bool(row and str(row[0]) in ("1", "ON"))


class UnwritableMarksError(PreconditionError):
    """The watermark table exists but cannot be written here (read-only server, no grant): the locked read fits."""


def choose_mode(conn: pymysql.Connection, mode: str, probe: Callable[[], None]) -> str:
    """Watermarks if `probe` writes the watermark table, else a locked chunk read; `mode` forces one."""
    if mode not in MODES:
        raise UsageError(f"--mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == LOCKED:
        return LOCKED
    try:
        probe()
    except PreconditionError as exc:
        # Read-only, or no write grant: a replica's case, where the locked read fits. A missing table on a
        # writable server is not: the user should create it rather than have tables locked.
        if mode == AUTO and (isinstance(exc, UnwritableMarksError) or _is_read_only(conn)):
            log.info(f"re-snapshot: {exc.message}; reading chunks under a table lock instead (--mode locked)",
                     extra={"stage": "resnapshot"})
            return LOCKED
        raise
    return WATERMARKS
