"""Stopping on Ctrl-C and SIGTERM: a graceful stop inside a stage's loop, an exception everywhere else.

Every command ends the same way when a signal arrives before its work is complete: 130 after Ctrl-C (SIGINT),
143 after SIGTERM (128 + the signal's number, as shells report a process killed by it), and its state
consistent (data first, checkpoint last). Loops that can stop between units of work (tail, ship, apply, run)
hold `stop_on_signals()`; outside such a loop SIGINT raises KeyboardInterrupt (Python's default) and SIGTERM
raises `Terminated` once `terminate_by_exception()` is installed, so `finally` blocks release locks and remove
temp files instead of the process vanishing mid-write.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from cdc.errors import CdcError, ExitCode


class Terminated(BaseException):  # noqa: N818  (named like KeyboardInterrupt, its sibling: not an error of ours)
    """SIGTERM arrived outside a graceful-stop loop. A BaseException, so `except Exception` does not swallow it."""


def exit_code_for(signum: int | None) -> ExitCode:
    """The documented exit code for a run that a signal stopped before it was complete."""
    return ExitCode.TERMINATED if signum == signal.SIGTERM else ExitCode.INTERRUPTED


class StopSignal(threading.Event):
    """An Event set by the first SIGINT or SIGTERM; it remembers which one, for the exit code."""

    def __init__(self) -> None:
        super().__init__()
        self.signum: int | None = None

    def stop(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
        self.set()

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for(self.signum)


def _raise_terminated(_signum: int, _frame: FrameType | None) -> None:
    raise Terminated


def terminate_by_exception() -> None:
    """Make SIGTERM raise `Terminated` in the main thread (the command line installs it once, at start)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


@contextmanager
def stop_on_signals() -> Iterator[StopSignal]:
    """Yield a StopSignal set by SIGTERM or the first Ctrl-C, so a loop stops between units of work.

    A second Ctrl-C raises KeyboardInterrupt at once: safe too, as checkpoints only move after their data is
    durable. Outside the main thread (a test runner's thread) signals cannot be handled: the event is only
    set by whoever holds it.
    """
    stop = StopSignal()

    def handler(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt
        stop.stop(signum)

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    except CdcError as exc:
        # A connection given up while stopping (a hung server answers neither the work nor the stop): the user
        # asked to stop, and that is what the exit code says, not "retry later". Any other error stands.
        if stop.signum is None or exc.exit_code != ExitCode.TRANSIENT:
            raise
        raise (Terminated() if stop.signum == signal.SIGTERM else KeyboardInterrupt()) from exc
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
