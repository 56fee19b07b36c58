"""`cdc run` re-snapshots the tables the schema history flags, by itself, while capture keeps running (issue #30).

Some DDL changes existing rows in a way the binlog does not carry: a default MySQL evaluates at ALTER time
(`ADD COLUMN created DATETIME DEFAULT CURRENT_TIMESTAMP`, `DEFAULT (uuid())`), an `AUTO_INCREMENT` column
added (perhaps as the new primary key). Tail records why in the schema history (SchemaHistory.resnapshot_reason);
the repair is the online re-snapshot (`cdc resnapshot`, cdc.snapshot.resnapshot), which tail finishes: its
watermarks and chunk rows reach the change log only through tail, and the re-snapshot waits for tail's
checkpoint to pass each mark.

Design: `cdc run` is a cycle loop (cdc.pipeline.run); with `--until-now` its tail runs up to "now" once per
cycle, so the re-snapshot cannot run inside a cycle (it would wait for a tail that runs only after it
returns). It runs beside the loop instead, in one thread of the same process, doing exactly what `cdc
resnapshot db.table` does (same library call, same lock, same resnapshot.json, resumable). Tail reads its
marks and emits its chunks, and its waits end when tail's checkpoint passes them. With `--follow`, tail
runs continuously in its own thread (cdc.pipeline.tail_beside), so a mark is passed within tail's flush
interval. With `--until-now`, the loop keeps starting cycles for as long as a re-snapshot runs, and for one
more full cycle after it ends so spark-merge and snowflake-apply carry its rows and its end line. Nothing
waits for the other inside a cycle, so nothing can deadlock: at worst a re-snapshot waits a cycle's length
per mark.

After each cycle `poll` looks: a re-snapshot running -> nothing to do; one just ended -> its outcome is
logged (a failure is recorded for `cdc status` under the `resnapshot` stage, and retried after
RETRY_SECONDS with --follow; an --until-now run does not retry it and ends with its error and exit code);
none -> flagged tables start one (an unfinished run in resnapshot.json is resumed first, with its own tables).
A `cdc resnapshot` the user runs at the same time holds the lock: then this one stays out of its way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cdc.checkpoints import ResnapshotCheckpoint
from cdc.config import Settings
from cdc.errors import CdcError, LockedError
from cdc.schema import SchemaHistory
from cdc.state import StateDir

log = logging.getLogger(__name__)

STAGE = ResnapshotCheckpoint.STAGE
RETRY_SECONDS = 300.0  # --follow: a failed automatic re-snapshot is tried again after this long


class _Halted(Exception):
    """The run is stopping: the re-snapshot thread leaves its wait (resnapshot.json keeps its progress)."""


def flagged(state: StateDir) -> list[str]:
    """db.table of every table whose older rows the binlog cannot reproduce, until a re-snapshot repairs them."""
    history = SchemaHistory(state.schema)
    return [f"{db}.{table}" for db, table in history.tables() if history.resnapshot_reason(db, table)]


class AutoResnapshot:
    """The re-snapshot thread of one `cdc run` (see the module docstring)."""

    def __init__(self, settings: Settings, state: StateDir, stop: threading.Event, *, follow: bool,
                 on_failure: Callable[[Exception], None] | None = None) -> None:
        self.settings, self.state, self.stop, self.follow = settings, state, stop, follow
        self.on_failure = on_failure
        self._thread: threading.Thread | None = None
        self._error: Exception | None = None
        self._failure: CdcError | None = None  # the last failure, until a re-snapshot succeeds (unrepaired)
        self._failed_at: float | None = None
        self._carry = False  # a re-snapshot ended: one more full cycle carries its rows downstream
        self._halt = threading.Event()  # the run is over (close): the thread stops waiting for tail
        self._seen: int | None = None  # the schema history folder's mtime when it last flagged nothing

    def poll(self, cycle_finished: bool) -> bool:
        """After a cycle: start or follow the re-snapshot; True while the loop must go on for it."""
        if self._thread is not None:
            if self._thread.is_alive():
                return True
            self._ended()
            return True
        if self._carry:
            self._carry = False
        if not cycle_finished or self.stop.is_set() or not self._may_start():
            return False
        tables = self._tables()
        if not tables:
            return False
        log.warning(f"re-snapshot of {', '.join(tables)} started by cdc run: the binlog cannot carry what an ALTER "
                    "did to their existing rows (`cdc status` shows why)", extra={"stage": STAGE})
        self._thread = threading.Thread(target=self._run, args=(tables,), name="cdc-auto-resnapshot", daemon=True)
        self._thread.start()
        return True

    def close(self) -> None:
        """Stop waiting and let the thread end (the run is over); its progress stays in resnapshot.json."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _may_start(self) -> bool:
        if self._failed_at is None:
            return True
        return self.follow and time.monotonic() - self._failed_at >= RETRY_SECONDS

    def _tables(self) -> tuple[str, ...]:
        unfinished = ResnapshotCheckpoint.read(self.state)
        if unfinished is not None and unfinished.status == "running":
            return tuple(t.name for t in unfinished.tables)
        # Every schema history file is read only after one changed (an atomic write renames into the folder),
        # not at every idle --follow cycle.
        stamp = self.state.schema.stat().st_mtime_ns if self.state.schema.is_dir() else 0
        if stamp == self._seen:
            return ()
        found = tuple(flagged(self.state))
        self._seen = None if found else stamp
        return found

    def _run(self, tables: tuple[str, ...]) -> None:
        from cdc.snapshot import ResnapshotRequest, run_resnapshot

        try:
            run_resnapshot(self.settings, ResnapshotRequest(tables), sleep=self._sleep)
        except Exception as exc:  # noqa: BLE001 - handed to the loop's thread by _ended
            self._error = exc

    def _sleep(self, seconds: float) -> None:
        self._halt.wait(seconds)
        if self._halt.is_set() or self.stop.is_set():
            raise _Halted

    def _ended(self) -> None:
        assert self._thread is not None
        self._thread.join()
        self._thread, error, self._error = None, self._error, None
        if error is None:
            self._failed_at, self._carry, self._failure = None, True, None
            log.info("automatic re-snapshot done", extra={"stage": STAGE})
            return
        self._failed_at = time.monotonic()
        if isinstance(error, _Halted | LockedError):  # stopping, or a `cdc resnapshot` of the user's is running
            return
        self._failure = error if isinstance(error, CdcError) else CdcError(f"{type(error).__name__}: {error}")
        log.warning(f"automatic re-snapshot failed: {error}", extra={"stage": STAGE})  # str(): its fix too
        if self.on_failure is not None:
            self.on_failure(error)

    def unrepaired(self) -> CdcError | None:
        """Why the last re-snapshot failed, if none succeeded since: an --until-now run then ends with its exit code
        (3 a.m. runbooks gate on it), as the flagged tables still hold rows MySQL no longer has."""
        return self._failure
