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
from cdc.capture.events import Capture
from cdc.capture.filters import Filters
from cdc.capture.lag import Progress
from cdc.capture.rebase import rebase_start
from cdc.capture.start import Start, StartRequest, resolve_start
from cdc.capture.startup import start_up
from cdc.checkpoints import TailCheckpoint
from cdc.config import MySQLSettings, Settings
from cdc.durations import backoff
from cdc.errors import CdcError, PositionError, TransientError
from cdc.masking import bind_rules
from cdc.source.binlog import BinlogReader, Position, ReaderOptions, current_position
from cdc.source.capturable import require_capturable
from cdc.source.connect import bounded_waits, open_connection
from cdc.source.gtids import state_at
from cdc.source.server import ServerInfo, describe_server
from cdc.source.topology import choose, is_replaced, switch_to
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
    decode_workers: int | None = None  # processes decoding rows beside the reader; None: default_workers(), 0: none
    decode_bytes: int = DEFAULT_LIMIT_BYTES  # rows-event bytes in flight per decode worker (bounds memory)
    switch_check: float = 5.0  # --follow with mysql.hosts, idle: seconds between asks whether the server still writes


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
    switches: int = 0  # moves to another server of mysql.hosts (failover, switchover)
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
            return _run_on_topology(state, settings, options, pool, should_stop, on_progress, on_note, stdout)
        finally:
            if pool is not None:
                pool.close()


def _run_on_topology(state: StateDir, settings: Settings, options: TailOptions, pool: DecodePool | None,
                     should_stop: Callable[[], bool], on_progress: Callable[[Progress], None] | None,
                     on_note: Callable[[str], None] | None, stdout: BinaryIO | None) -> TailSummary:
    """With mysql.hosts: read the writable server, and move to another one when it takes over (issue #27).

    Every server of the list may continue this state directory, but only by GTIDs: the checks of --rebase
    (cdc.capture.rebase) run on each move and refuse a server that is no replica of the old one (exit 5).
    """
    if not settings.mysql.hosts:
        return _run(state, settings, options, pool, should_stop, on_progress, on_note, stdout)[0]
    options = replace(options, rebase=True)
    mysql = start_up(lambda: choose(settings.mysql), settings.mysql, retry=options.follow,
                     read_timeout=options.read_timeout, reconnect_timeout=options.reconnect_timeout,
                     should_stop=should_stop)
    if mysql is None:
        return _not_started(state)
    runs: list[TailSummary] = []
    while True:
        summary, moved = _run(state, replace(settings, mysql=mysql), options, pool, should_stop, on_progress,
                              on_note, stdout)
        runs.append(summary)
        if moved is None:
            return _combined(runs)
        why = (f"another server answers at {moved.describe()} now" if moved.describe() == mysql.describe() else
               f"tail moves from {mysql.describe()} to {moved.describe()}: it takes the writes now")
        log.warning(why, extra={"stage": TailCheckpoint.STAGE, "position": summary.end})
        if on_note is not None:
            on_note(why)
        mysql = moved


def _combined(runs: list[TailSummary]) -> TailSummary:
    """One summary of the runs on successive servers: from the first one's start to the last one's end."""
    last = replace(runs[-1], start=runs[0].start, origin=runs[0].origin, switches=len(runs) - 1,
                   notes=[note for run in runs for note in run.notes])
    for name in ("transactions", "rows", "segments", "reconnects", "worker_rows", "seconds"):
        setattr(last, name, sum(getattr(run, name) for run in runs))
    return last


def _run(state: StateDir, settings: Settings, options: TailOptions, pool: DecodePool | None,
         should_stop: Callable[[], bool], on_progress: Callable[[Progress], None] | None,
         on_note: Callable[[str], None] | None, stdout: BinaryIO | None) -> tuple[TailSummary, MySQLSettings | None]:
    opened = start_up(lambda: _open(state, settings, options, pool, on_progress, stdout), settings.mysql,
                      retry=options.follow, read_timeout=options.read_timeout,
                      reconnect_timeout=options.reconnect_timeout, should_stop=should_stop)
    if opened is None:  # a signal while a start-up that failed waited to be retried
        return _not_started(state), None
    info, start, target, capture = opened
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
        moved = _loop(capture, settings, options, target, summary, should_stop, note, info.server_uuid)
    finally:
        capture.close()
    summary.end, summary.seconds = str(capture.position), time.monotonic() - began
    summary.transactions, summary.rows, summary.segments = capture.transactions, capture.rows, capture.segments
    summary.worker_rows = capture.worker_rows
    summary.worker_peak_bytes = pool.peak_bytes if pool is not None else 0
    summary.queued_peak_bytes = capture.queued_peak_bytes
    return summary, moved


def _open(state: StateDir, settings: Settings, options: TailOptions, pool: DecodePool | None,
          on_progress: Callable[[Progress], None] | None,
          stdout: BinaryIO | None) -> tuple[ServerInfo, Start, Position | None, Capture]:
    """Tail's start-up: the server, where to start, the target (--until-now), the capture ready to read."""
    # Kept as the capture's control connection (one connect less); every wait on it is bounded like the stream's.
    conn = open_connection(settings.mysql, **bounded_waits(settings.mysql, options.read_timeout))
    try:
        info = describe_server(conn)
        where = f"the server at {settings.mysql.describe()}"
        require_capturable(conn, info, options.filters.databases, options.filters.tables, where)
        start = _start(state, options, conn, info, where)
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
    return info, start, target, capture


def _not_started(state: StateDir) -> TailSummary:
    """The summary of a tail stopped before it started: at its checkpoint (if any), nothing read."""
    checkpoint = TailCheckpoint.read(state)
    at = f"{checkpoint.file}:{checkpoint.pos}" if checkpoint is not None else "(no checkpoint)"
    return TailSummary(at, at, "checkpoint" if checkpoint is not None else "none", None, stopped="stopped by signal")


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
          summary: TailSummary, should_stop: Callable[[], bool], note: Callable[[str], None],
          server_uuid: str) -> MySQLSettings | None:
    """Read until done (None), or until another server of mysql.hosts takes the writes (that server)."""
    # Tail checks whether the open segment is old enough only when something arrives: when the writes pause,
    # the last transactions wait for the server's next heartbeat. One every half flush interval while idle
    # seals them within 1.5 intervals (0.75 s at the default) instead of up to the 1 s period plus an interval.
    heartbeat = min(options.heartbeat, options.flush_interval / 2, options.read_timeout / 4)
    reader_options = ReaderOptions(heartbeat=heartbeat, read_timeout=options.read_timeout)
    failing_since: float | None = None
    failures = 0  # reconnects in a row without an event read in between: the backoff's exponent
    lost = False
    while True:
        if _finished(capture, target, should_stop, summary):
            capture.finish()
            return None
        reader = BinlogReader(settings.mysql, capture.position, reader_options)
        seen = capture.events
        watch = _Watch(settings.mysql, options.switch_check if target is None else 0.0, server_uuid)
        try:
            # Every reconnect first asks who answers at the address, and waits while nothing does: an endpoint
            # moved by a failover may answer with another server at any retry, never to be read at our file:pos.
            moved = watch.after_loss() if lost else None
            if moved is not None:
                return moved
            moved = _read(capture, reader, target, summary, should_stop, options.read_timeout, watch)
            capture.finish()
            return moved
        except TransientError as exc:
            # Drop the open transaction (it is re-read from its start), keep what was committed.
            _wind_down(capture)
            lost = True
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


class _Watch:
    """With mysql.hosts: whether another server of the list took the writes (the switchover's old primary stays
    up, read-only, and sends nothing more; a killed one closes the stream)."""

    def __init__(self, mysql: MySQLSettings, every: float, server_uuid: str) -> None:
        self.mysql, self.every, self.server_uuid = mysql, every, server_uuid
        self.last = time.monotonic()

    def when_idle(self) -> MySQLSettings | None:
        if not self.mysql.hosts or self.every <= 0 or time.monotonic() - self.last < self.every:
            return None
        self.last = time.monotonic()
        try:
            return switch_to(self.mysql, self.mysql)
        except TransientError:
            return None  # nothing answers but this stream: keep reading it

    def after_loss(self) -> MySQLSettings | None:
        """Before a reconnect: the server to move to, or None to reconnect here; TransientError while nothing
        answers (with mysql.hosts: no server of the list)."""
        if not self.mysql.hosts:
            if is_replaced(self.mysql, self.server_uuid):  # its binlog positions are not ours: never read them
                raise PositionError(
                    f"another server answers at {self.mysql.describe()} since the connection was lost (a failover "
                    "behind the same address?); tail's checkpoint is the old server's", hint="run `cdc tail "
                    "--until-now --rebase` once to continue by GTIDs, or list the address in mysql.hosts so tail "
                    "does it by itself (docs/guide.md#failover)")
            return None
        moved = switch_to(self.mysql, self.mysql)
        # The same address may lead to another server now (an endpoint moved to the promoted replica): tail
        # then starts again there, by GTIDs, never at the old file:pos.
        return moved if moved is not None or not is_replaced(self.mysql, self.server_uuid) else self.mysql


def _read(capture: Capture, reader: BinlogReader, target: Position | None, summary: TailSummary,
          should_stop: Callable[[], bool], read_timeout: float, watch: _Watch) -> MySQLSettings | None:
    """Hand events to the capture until the target, a stop, an error, or another server taking the writes."""
    idle_since: float | None = None
    for event in reader.events():
        if should_stop():  # mid-transaction too: the open transaction is simply re-read next run
            capture.abort_transaction()
            summary.stopped = "stopped by signal"
            return None
        capture.handle(event)
        if capture.at_boundary and _finished(capture, target, should_stop, summary):
            return None
        if capture.decoding and not reader.has_input():
            capture.settle()  # the server sends nothing right now: commit what the workers decoded
        idle_since = _check_idle(event.kind, idle_since, capture, target, read_timeout)
        if event.kind == "heartbeat" and capture.at_boundary and not capture.decoding:
            moved = watch.when_idle()
            if moved is not None:
                return moved
    return None


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
