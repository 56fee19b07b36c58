"""`cdc tail`: binlog -> sealed change-log segments + the tail checkpoint (docs/formats.md).

Data first, checkpoint last: a transaction's lines reach a segment at its COMMIT; a segment holds whole
transactions and is sealed (fsync, rename) before tail.json moves past them. After a kill -9 we restart
from tail.json; if a segment was sealed but tail.json not yet written, its lines are skipped on the
re-read (they sort at or before its last line), so the concatenated change log is the same as an
uninterrupted run's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

from cdc.capture.decode_pool import DEFAULT_LIMIT_BYTES, DecodePool, default_workers
from cdc.capture.events import Capture, Progress
from cdc.capture.filters import Filters
from cdc.capture.rebase import rebase_start
from cdc.capture.start import Start, StartRequest, resolve_start
from cdc.checkpoints import TailCheckpoint
from cdc.config import Settings
from cdc.durations import backoff
from cdc.errors import CdcError, TransientError
from cdc.masking import bind_rules
from cdc.source.binlog import BinlogReader, Position, ReaderOptions, current_position
from cdc.source.connect import bounded_waits, open_connection
from cdc.source.gtids import state_at
from cdc.source.server import ServerInfo, describe_server
from cdc.state import StateDir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TailOptions:
    start: StartRequest = StartRequest()
    follow: bool = False
    rebase: bool = False
    filters: Filters = Filters()
    flush_interval: float = 0.5  # seconds: a committed change reaches a sealed segment within about this
    segment_bytes: int = 64 * 2**20
    spill_bytes: int = 32 * 2**20
    heartbeat: float = 1.0
    read_timeout: float = 10.0
    reconnect_timeout: float = 60.0  # give up after this long without a working connection
    decode_workers: int | None = None  # processes decoding rows beside the reader; None: one per extra core, 0: none
    decode_bytes: int = DEFAULT_LIMIT_BYTES  # rows-event bytes in flight per decode worker (bounds memory)


@dataclass
class TailSummary:
    start: str
    end: str
    origin: str
    target: str | None
    transactions: int = 0
    rows: int = 0
    segments: int = 0
    reconnects: int = 0
    decode_workers: int = 0
    worker_rows: int = 0  # rows decoded in the decode workers; the reader decodes the rest when they are busy
    worker_peak_bytes: int = 0  # the most rows-event bytes that were in flight to the workers at once
    queued_peak_bytes: int = 0  # the most bytes of lines decoded by the reader that waited behind a worker's job
    seconds: float = 0.0
    stopped: str = "caught up"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_tail(
    settings: Settings,
    options: TailOptions,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_progress: Callable[[Progress], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    stdout: BinaryIO | None = None,
) -> TailSummary:
    """Capture changes from the start position into sealed segments until caught up (or stopped, with --follow)."""
    # The hash key from the settings, before anything is written: hash_columns without one is refused.
    options = replace(options, filters=options.filters.keyed(settings.mysql))
    state = StateDir(settings.state_dir).ensure()
    workers = default_workers() if options.decode_workers is None else options.decode_workers
    with state.lock(TailCheckpoint.STAGE):
        # Started first: the workers import while we connect.
        pool = DecodePool(workers, limit_bytes=options.decode_bytes) if workers > 0 else None
        try:
            return _run(state, settings, options, pool, should_stop, on_progress, on_note, stdout)
        finally:
            if pool is not None:
                pool.close()


def _run(state: StateDir, settings: Settings, options: TailOptions, pool: DecodePool | None,
         should_stop: Callable[[], bool], on_progress: Callable[[Progress], None] | None,
         on_note: Callable[[str], None] | None, stdout: BinaryIO | None) -> TailSummary:
    # Kept as the capture's control connection (one connect less); every wait on it is bounded like the stream's.
    conn = open_connection(settings.mysql, **bounded_waits(settings.mysql, options.read_timeout))
    try:
        info = describe_server(conn)
        start = _start(state, options, conn, info, f"the server at {settings.mysql.describe()}")
        state.bind_server(info.identity(), rebase=options.rebase)
        bind_rules(state, options.filters.rules)  # the rules snapshot and earlier tails wrote with
        target = None if options.follow else current_position(conn)
        capture = Capture(state, settings.mysql, options.filters, start, info.server_uuid,
                          flush_interval=options.flush_interval, segment_bytes=options.segment_bytes,
                          spill_bytes=options.spill_bytes, stdout=stdout, on_progress=on_progress, pool=pool,
                          control=conn, control_timeout=options.read_timeout)
    except BaseException:
        conn.close()
        raise
    summary = TailSummary(str(start.position), str(start.position), start.origin, str(target) if target else None,
                          decode_workers=pool.size if pool is not None else 0)
    log.info(f"tail starting at {start.position} ({start.origin}) on {settings.mysql.describe()}, "
             + (f"until {target}" if target else "following"),
             extra={"stage": TailCheckpoint.STAGE, "position": str(start.position), "origin": start.origin,
                    "target": str(target) if target else None, "decode_workers": summary.decode_workers})

    def note(message: str) -> None:  # reconnects: a warning, for whoever watches the logs
        log.warning(message, extra={"stage": TailCheckpoint.STAGE, "position": str(capture.position)})
        if on_note is not None:
            on_note(message)

    if start.origin.startswith("rebase"):
        summary.notes.append(_rebase_note(start, settings.mysql.describe()))
        log.info(summary.notes[-1], extra={"stage": TailCheckpoint.STAGE, "position": str(start.position)})
        if on_note is not None:
            on_note(summary.notes[-1])
    began = time.monotonic()
    try:
        _loop(capture, settings, options, target, summary, should_stop, note)
    finally:
        capture.close()
    summary.end, summary.seconds = str(capture.position), time.monotonic() - began
    summary.transactions, summary.rows, summary.segments = capture.transactions, capture.rows, capture.segments
    summary.worker_rows = capture.worker_rows
    summary.worker_peak_bytes = pool.peak_bytes if pool is not None else 0
    summary.queued_peak_bytes = capture.queued_peak_bytes
    return summary


def _start(state: StateDir, options: TailOptions, conn: Any, info: ServerInfo, where: str) -> Start:
    """Where to read from, with the GTID state there: --rebase moves a foreign checkpoint onto this server."""
    start = resolve_start(state, options.start, conn, info.server_uuid, rebase=options.rebase)
    if start.foreign:
        return rebase_start(state, start, conn, info, where)
    if start.gtid_state is None:  # a v1 checkpoint, a start flag: ask the server (kept from now on)
        known = state_at(conn, info.is_mariadb, start.position)
        return replace(start, gtid_state=None if known is None else str(known))
    return start


def _rebase_note(start: Start, where: str) -> str:
    skipped = f"; {len(start.skip_gtids)} captured transaction(s) further on are skipped" if start.skip_gtids else ""
    return (f"rebased onto {where}: it holds every transaction captured ({start.gtid_state or 'none'}); resuming at "
            f"{start.position}, change-log positions add {start.seq_offset} to its binlog file numbers{skipped}")


def _loop(capture: Capture, settings: Settings, options: TailOptions, target: Position | None,
          summary: TailSummary, should_stop: Callable[[], bool], note: Callable[[str], None]) -> None:
    # Tail checks whether the open segment is old enough only when something arrives: when the writes pause,
    # the last transactions wait for the server's next heartbeat. One every half flush interval while idle
    # seals them within 1.5 intervals (0.75 s at the default) instead of up to the 1 s period plus an interval.
    heartbeat = min(options.heartbeat, options.flush_interval / 2, options.read_timeout / 4)
    reader_options = ReaderOptions(heartbeat=heartbeat, read_timeout=options.read_timeout)
    failing_since: float | None = None
    failures = 0  # reconnects in a row without an event read in between: the backoff's exponent
    while True:
        if _finished(capture, target, should_stop, summary):
            capture.finish()
            return
        reader = BinlogReader(settings.mysql, capture.position, reader_options)
        seen = capture.events
        try:
            _read(capture, reader, target, summary, should_stop, options.read_timeout)
            capture.finish()
            return
        except TransientError as exc:
            # Drop the open transaction (it is re-read from its start), keep what was committed.
            _wind_down(capture)
            now = time.monotonic()
            if failing_since is None or capture.events != seen:  # events came since the last failure
                failing_since, failures = now, 0
            if now - failing_since > options.reconnect_timeout:
                raise TransientError(f"{exc.message}; gave up after {options.reconnect_timeout:.0f}s of retries "
                                     f"(checkpoint at {capture.position})", hint=exc.hint) from None
            summary.reconnects += 1
            note(f"{exc.message}; reconnecting at {capture.position} (last commit)")
            # Full jitter: the first retry within half a second (a reset link is usually fine again at once),
            # then up to 5 s apart, so a server coming back is not met by every reader at the same instant.
            time.sleep(backoff(failures, min(0.5, options.read_timeout / 4), 5.0))
            failures += 1
        except CdcError:
            _wind_down(capture)
            raise
        finally:
            reader.close()


def _read(capture: Capture, reader: BinlogReader, target: Position | None, summary: TailSummary,
          should_stop: Callable[[], bool], read_timeout: float) -> None:
    """Hand events to the capture until the target, a stop, or an error."""
    idle_since: float | None = None
    for event in reader.events():
        if should_stop():  # mid-transaction too: the open transaction is simply re-read next run
            capture.abort_transaction()
            summary.stopped = "stopped by signal"
            return
        capture.handle(event)
        if capture.at_boundary and _finished(capture, target, should_stop, summary):
            return
        if capture.decoding and not reader.has_input():
            capture.settle()  # the server sends nothing right now: commit what the workers decoded
        idle_since = _check_idle(event.kind, idle_since, capture, target, read_timeout)


def _wind_down(capture: Capture) -> None:
    """Apply what was committed and decoded, drop the open transaction, seal and checkpoint."""
    try:
        capture.abort_transaction()
    finally:
        capture.out.flush(force=True)


def _finished(capture: Capture, target: Position | None, should_stop: Callable[[], bool], summary: TailSummary) -> bool:
    if should_stop():
        summary.stopped = "stopped by signal"
        return True
    return target is not None and capture.read_position.key() >= target.key()


def _check_idle(kind: str, idle_since: float | None, capture: Capture, target: Position | None,
                limit: float) -> float | None:
    """--until-now must never wait forever: only heartbeats while behind the target means it cannot be reached."""
    if kind != "heartbeat" or target is None:
        return None
    now = time.monotonic()
    if idle_since is not None and now - idle_since > max(limit, 5.0):
        raise CdcError(f"the server sends nothing more, but tail is at {capture.position}, before the target "
                       f"{target} taken at start", hint="report this as a bug with both positions; rerun tail to resume")
    return idle_since or now
