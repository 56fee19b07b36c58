"""Tail's start-up through a faulty network: retried in --follow like a lost stream (issue #27).

Before tail streams it reads the server's facts, the start position's GTID state and the schemas over a control
connection. A link lost in the middle of that (a reset, a dropped route, an endpoint failing over) is no more
permanent than one lost while streaming, so `tail --follow` retries it with the same backoff and within the same
`--reconnect-timeout`, logging each retry; `--until-now` exits 10 at once (a script or `cdc run --follow`
retries the whole stage). A permanent error (access denied, binlog off, a purged position, an unrelated server)
is never retried: it names its fix and exits with its own code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import pymysql

from cdc.checkpoints import TailCheckpoint
from cdc.config import MySQLSettings
from cdc.durations import backoff
from cdc.errors import TransientError
from cdc.source.connect import map_error

log = logging.getLogger(__name__)

T = TypeVar("T")


def transient_as_error(attempt: Callable[[], T], mysql: MySQLSettings) -> T:
    """`attempt()`, with a connection lost in one of its queries raised as TransientError (exit 10), not as a
    driver error (a traceback and exit 1); other driver errors as their mapped CdcError."""
    try:
        return attempt()
    except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as exc:
        if isinstance(exc, pymysql.err.InterfaceError):  # a query on a connection the driver saw die
            raise TransientError(f"lost the connection to {mysql.describe()} while tail started: {exc}") from None
        raise map_error(exc, mysql) from None


def start_up(attempt: Callable[[], T], mysql: MySQLSettings, *, retry: bool, read_timeout: float,
             reconnect_timeout: float, should_stop: Callable[[], bool]) -> T | None:
    """`attempt()` until it succeeds; with `retry`, a TransientError again after a backoff (None: a signal came
    while waiting), until `reconnect_timeout` seconds of failures."""
    failures, began = 0, time.monotonic()
    while True:
        try:
            return transient_as_error(attempt, mysql)
        except TransientError as exc:
            if not retry:
                raise
            if time.monotonic() - began > reconnect_timeout:
                raise TransientError(f"{exc.message}; gave up after {reconnect_timeout:.0f}s of retries while tail "
                                     "started", hint=exc.hint) from None
            pause = backoff(failures, min(0.5, read_timeout / 4), 5.0)  # as a lost stream's reconnects (tail.py)
            failures += 1
            log.warning(f"{exc.message}; retrying tail's start-up in {pause:.1f}s ({failures} in a row, giving up "
                        f"after {reconnect_timeout:.0f}s)", extra={"stage": TailCheckpoint.STAGE})
            if _stopped_while_waiting(pause, should_stop):
                return None


def _stopped_while_waiting(seconds: float, should_stop: Callable[[], bool]) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if should_stop():
            return True
        time.sleep(min(0.1, max(0.0, until - time.monotonic())))
    return should_stop()
