"""`cdc run --follow`'s tail: `cdc tail --follow` in a thread beside the cycles of the later stages (issue #25).

A cycle's merge and apply take seconds; a tail that ran only at the start of each cycle let a commit made
meanwhile wait for the next cycle before it was even sealed. This thread makes the library call `cdc tail
--follow` makes (run_tail, follow=True: its own lock, checkpoint and reconnects), stopped by the run's stop
event, so segments seal within tail's flush interval whatever the other stages are doing.

The cycle loop (cdc.pipeline.run) owns it: `check` at the start of each cycle raises the error the thread
died of (the run ends with tail's own error and exit code, or retries a transient one and then `start`s a new
thread), `take` turns what it captured since the last cycle into the cycle's tail line, `wait` is the idle
pause, cut short when a segment seals, and `close` stops and joins it (tail seals and checkpoints what was
committed before it returns, as on a SIGTERM of `cdc tail --follow`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from cdc.capture import Filters, StartRequest, TailOptions, run_tail
from cdc.capture import Progress as TailProgress
from cdc.checkpoints import TailCheckpoint
from cdc.errors import CdcError
from cdc.pipeline.run_stages import DONE, NOTHING, STOPPED, Context, Outcome, StageProgress

_WAIT_SLICE = 0.1  # seconds: how soon an idle pause sees the stop event (the signal handler only sets it)


@dataclass
class _Run:
    """One thread's life: what it reported, how it ended."""

    thread: threading.Thread | None = None
    progress: TailProgress | None = None
    rows_taken: int = 0  # rows already reported in a cycle's tail line
    error: BaseException | None = None
    ended: bool = False


class TailBeside:
    """The continuous tail of one `cdc run --follow` (see the module docstring)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sealed = threading.Event()  # a segment sealed, or the thread ended: the idle pause ends
        self._halt = threading.Event()  # close(): the thread stops even if the run's stop event is not set
        self._run: _Run | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start a thread (the first, or a new one after the last one's transient failure and its backoff)."""
        run = _Run()
        # The thread writes only to its own record: a later start() makes a new one.
        run.thread = threading.Thread(target=self._tail, args=(run,), name="cdc-run-tail", daemon=True)
        self._run = run
        run.thread.start()

    @property
    def running(self) -> bool:
        return self._run is not None

    @property
    def healthy(self) -> bool:
        """Alive and reading: it has reported since it started (heartbeats report while the server is idle)."""
        run = self._run
        return run is not None and not run.ended and run.progress is not None

    def check(self) -> None:
        """Raise what the thread died of (once; `start` then makes a new one); a silent end is an error too."""
        run = self._run
        if run is None or not run.ended:
            return
        self._join(run)
        self._run = None
        if run.error is not None:
            raise run.error
        if not (self.ctx.stop.is_set() or self._halt.is_set()):
            raise CdcError("tail ended by itself beside `cdc run --follow`", hint="report this as a bug; run again")

    def take(self, final: bool = False) -> Outcome:
        """What the thread captured since the last call: the cycle's tail line (the run's last one if `final`)."""
        run = self._run
        with self._lock:
            p = None if run is None else run.progress
            if run is None or p is None:
                return Outcome(NOTHING, unit="rows", detail={"follow": True, "decode_workers": 0})
            rows, run.rows_taken = p.rows - run.rows_taken, p.rows
        status = STOPPED if final else DONE if rows else NOTHING
        return Outcome(status, p.position, rows, "rows", p.lag_seconds,
                       {"follow": True, "decode_workers": 0, "segments": p.segments, "transactions": p.transactions})

    def wait(self, seconds: float) -> bool:
        """The idle pause: until a segment seals, the thread ends, or `seconds`; True if the run is to stop."""
        deadline = time.monotonic() + seconds
        while not self.ctx.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self.sealed.wait(min(left, _WAIT_SLICE)):
                break
        return self.ctx.stop.is_set()

    def close(self) -> Outcome | None:
        """Stop and join the thread; the rows it captured since the last cycle (None if none ran)."""
        self._halt.set()
        run = self._run
        if run is None:
            return None
        self._join(run)
        return self.take(final=True)

    @staticmethod
    def _join(run: _Run) -> None:
        if run.thread is not None:
            run.thread.join()

    def _tail(self, run: _Run) -> None:
        # The run's first tail (--until-now, in its first cycle) caught up with the backlog, with a decode worker
        # if there is a spare core; what follows is the live rate, decoded here while Spark uses the other core.
        options = TailOptions(start=StartRequest(), follow=True, filters=Filters.from_settings(self.ctx.settings.mysql),
                              decode_workers=0)
        try:
            run_tail(self.ctx.settings, options, should_stop=self._should_stop,
                     on_progress=lambda p: self._progress(run, p))
        except BaseException as exc:  # noqa: BLE001 - handed to the loop's thread by check()
            run.error = exc
        finally:
            run.ended = True
            self.sealed.set()

    def _should_stop(self) -> bool:
        return self.ctx.stop.is_set() or self._halt.is_set()

    def _progress(self, run: _Run, p: TailProgress) -> None:
        with self._lock:
            before, run.progress = run.progress, p
            count = p.rows - run.rows_taken
        if before is None or p.segments != before.segments:
            self.sealed.set()
        self.ctx.report(StageProgress(TailCheckpoint.STAGE, p.position, count, p.events_per_second, p.lag_seconds))
