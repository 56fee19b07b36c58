"""Snowflake sessions that stage a batch's tables side by side (issue #25).

Each statement is a round trip to Snowflake (tens of milliseconds over a WAN) and, for a COPY, a run on the
warehouse. Staged one after the other, a batch of 16 tables waits out 32 of them (each table's TRUNCATE or CREATE
of its staging table, then its COPY) before its first MERGE. A table's staging touches only its own staging table
and happens before the batch's transaction, so tables are staged on several sessions at once: nothing in the
targets changes until the MERGEs, which stay in one transaction on the apply's own session. A table's statements
stay in order on one session.

The apply's session is one of them, and up to `size - 1` more are opened when first needed (logins in parallel)
and kept until close(): a `cdc run --follow` pays its logins once. `size` 1 stages everything on the apply's
session, as before. A session whose statement failed is closed and opened afresh by its next use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

from cdc.snowflake.connect import GuardedCursor
from cdc.snowflake.connect import cursor as guarded_cursor

T = TypeVar("T")
Execute = Callable[..., list[tuple[Any, ...]]]
Job = Callable[[Execute], T]


class _Session:
    """An extra session: its connection, opened on first use, and one cursor over it."""

    def __init__(self, open_connection: Callable[[], Any]) -> None:
        self._open = open_connection
        self.conn: Any = None
        self.cursor: GuardedCursor | None = None
        self.statements = 0  # counted over every connection this session had

    def execute(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        if self.cursor is None:
            self.conn = self._open()
            self.cursor = guarded_cursor(self.conn)
        self.statements += 1
        self.cursor.execute(statement, params)
        return self.cursor.fetchall() if self.cursor.description else []

    def close(self) -> None:
        conn, self.conn, self.cursor = self.conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken session may fail to close; nothing rests on it
                pass


class Loaders:
    """The apply's own session (`execute`) and up to size - 1 more, opened by `open_connection` when first needed."""

    def __init__(self, execute: Execute, open_connection: Callable[[], Any] | None, size: int) -> None:
        self.own = execute
        self.extra = [_Session(open_connection) for _ in range(size - 1)] if open_connection and size > 1 else []
        self._lock = threading.Lock()

    @property
    def statements(self) -> int:
        """Statements sent on the extra sessions (the apply's own counts its own)."""
        return sum(session.statements for session in self.extra)

    def run(self, jobs: Sequence[Job[T]], *, beside: Callable[[], None] | None = None) -> list[T]:
        """Each job run once with a session's execute; their results in job order.

        beside: work for the apply's own session meanwhile (the batch's PUT), run in this thread; the jobs then go
        to the extra sessions only (with fewer than two jobs or no extra session, it runs first and the jobs after
        it). Every job has ended when this returns; the first failure is raised then, beside's before the jobs' (in
        job order)."""
        if not self.extra or len(jobs) < 2:  # one table: not worth another session's login
            if beside is not None:
                beside()
            return [job(self.own) for job in jobs]
        free: list[Execute] = [s.execute for s in self.extra] + ([self.own] if beside is None else [])
        failed: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, min(len(free), len(jobs))), thread_name_prefix="cdc-load") as pool:
            futures = [pool.submit(self._take, free, job) for job in jobs]
            if beside is not None:
                try:
                    beside()
                except BaseException as exc:  # noqa: BLE001 - raised below, once the jobs have ended
                    failed.append(exc)
            wait(futures)
        if failed:
            raise failed[0]
        return [future.result() for future in futures]

    def _take(self, free: list[Execute], job: Job[T]) -> T:
        """Run `job` on a free session (there is one: no more workers than sessions), then give it back."""
        with self._lock:
            execute = free.pop()
        try:
            return job(execute)
        except BaseException:
            self._discard(execute)
            raise
        finally:
            with self._lock:
                free.append(execute)

    def _discard(self, execute: Execute) -> None:
        """A failed statement may have left its session doubtful: an extra one logs in afresh at its next use."""
        for session in self.extra:
            if session.execute == execute:
                session.close()

    def close(self) -> None:
        """Log the extra sessions out (the apply's own is its caller's)."""
        for session in self.extra:
            session.close()
