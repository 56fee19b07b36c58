"""How far tail is behind the server in bytes of binlog, and the progress it reports (the status line, --json)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.changelog import file_seq
from cdc.errors import CdcError
from cdc.source.binlog import Position
from cdc.source.connect import query

_RETRY_AFTER_FAILURE = 10.0  # seconds


@dataclass(frozen=True)
class Progress:
    position: str
    events: int
    rows: int
    transactions: int
    events_per_second: float
    lag_seconds: float | None  # age of the last transaction read; 0 once the server says we are at its end
    segments: int
    lag_bytes: int | None = None  # binlog bytes between our position and the server's end (None: unknown)


def bytes_behind(binlogs: list[tuple[str, int]], position: Position) -> int:
    """Bytes of binlog from `position` to the server's end, from SHOW BINARY LOGS (the last file's size is its end)."""
    start = file_seq(position.file)
    total = 0
    for name, size in binlogs:
        seq = file_seq(name)
        if seq >= start:
            total += max(size - (position.pos if seq == start else 0), 0)
    return total


class LagMeter:
    """Reads SHOW BINARY LOGS at most every `interval` seconds; a failure only makes the lag unknown."""

    def __init__(self, control: Callable[[], Any], on_failure: Callable[[], None], interval: float = 1.0) -> None:
        self._control, self._on_failure, self.interval = control, on_failure, interval
        self._binlogs: list[tuple[str, int]] | None = None
        self._read_at = float("-inf")

    def bytes_behind(self, position: Position) -> int | None:
        now = time.monotonic()
        if now - self._read_at >= self.interval:
            self._read_at = now
            try:
                rows = query(self._control(), "SHOW BINARY LOGS")
                self._binlogs = [(str(r["Log_name"]), int(r["File_size"])) for r in rows]
            # A lost control connection, missing BINLOG MONITOR, or (CdcError) no new one: the network is down. Tail
            # may be winding down after a lost stream right now: this must not end it (issue #27).
            except (pymysql.err.MySQLError, OSError, CdcError):
                self._binlogs = None
                self._on_failure()
                # Not again for a while: while the network is down, each try waits out a connect timeout in
                # tail's only thread, and the lag is only for show.
                self._read_at = now + _RETRY_AFTER_FAILURE
        return None if self._binlogs is None else bytes_behind(self._binlogs, position)
