"""The ship loop shared by every destination: sealed segments after the checkpoint -> sink -> checkpoint.

Kinesis ships one segment at a time; S3 a batch of consecutive segments (s3_batches.py), pinned
in the checkpoint as `pending` before its first upload. Data first, checkpoint last: a segment's
(a batch's) checkpoint is written only after the sink has every record of it acknowledged. A
crash anywhere replays from the first unacknowledged segment, so a destination sees every record
at least once; each record carries its `position`, which is unique per change, so a consumer that
keeps the first record per position gets each change exactly once (see docs/guide.md, "Deduplicating
downstream").
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cdc.changelog import list_segments, read_raw_lines
from cdc.errors import PositionError
from cdc.sinks.s3_batches import Batch, migrate, pending_batch, plan_batch
from cdc.state import StateDir

CHECKPOINT_VERSION = 1


@dataclass(frozen=True)
class Delivery:
    """What a sink did with one segment."""

    records: int
    bytes: int
    requests: int
    objects: int = 0  # S3: data objects written (manifests not counted)


@dataclass
class Progress:
    """Running totals handed to the progress callback (after each request and each segment)."""

    segment: str = ""
    segments_done: int = 0
    segments_total: int = 0
    batches_done: int = 0  # Kinesis: one per segment; S3: one per batch of segments
    objects: int = 0
    records: int = 0
    bytes: int = 0
    requests: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def seconds(self) -> float:
        return max(time.monotonic() - self.started, 1e-9)


ProgressCallback = Callable[[Progress], None]
# Sinks report acknowledged records as they go: report(records, bytes, requests).
Report = Callable[[int, int, int], None]


class Sink(Protocol):
    stage: str  # checkpoint and lock name, e.g. "ship-kinesis"
    destination: str  # e.g. "kinesis:orders" or "s3://lake/cdc"; stored in the checkpoint

    def check(self) -> None:
        """Fail fast (permanent CdcError) if the destination does not exist or is not writable."""

    def deliver(self, segment: Path, lines: list[bytes], report: Report) -> Delivery:
        """Deliver every line of a sealed segment; return only when all are acknowledged."""


@runtime_checkable
class BatchSink(Protocol):
    """A sink that ships batches of consecutive segments, pinned in its checkpoint before upload (S3)."""

    stage: str
    destination: str
    checkpoint_version: int
    options: Any  # .roll: RollOptions

    def check(self) -> None:
        """Fail fast (permanent CdcError) if the destination does not exist or is not writable."""

    def new_batch(self, segments: list[Path]) -> Batch:
        """The batch of these segments under the sink's current options."""

    def deliver_batch(self, batch: Batch, report: Report) -> Delivery:
        """Deliver every line of the batch; return only when all are acknowledged."""


@dataclass(frozen=True)
class ShipSummary:
    stage: str
    destination: str
    segments: int
    batches: int
    objects: int
    records: int
    bytes: int
    requests: int
    seconds: float
    first_segment: str | None
    last_segment: str | None
    remaining: int  # sealed segments left unshipped (a signal stopped the run early)

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "records_per_second": round(self.records_per_second, 1)}


def read_ship_checkpoint(state: StateDir, sink: Sink | BatchSink) -> dict[str, Any]:
    """The sink's checkpoint, refusing one written for another destination (it would skip segments)."""
    document = state.read_checkpoint(sink.stage, getattr(sink, "checkpoint_version", CHECKPOINT_VERSION)) or {}
    if isinstance(sink, BatchSink):
        document = migrate(document)
    known = document.get("destination")
    if known is not None and known != sink.destination:
        raise PositionError(
            f"checkpoint {state.checkpoint_path(sink.stage)} belongs to {known}, not {sink.destination}; "
            f"shipping from it would skip every segment up to {document.get('last_segment')}",
            hint="use a separate --state-dir per destination, or remove the checkpoint to ship everything again",
        )
    return document


def ship(
    state: StateDir,
    sink: Sink | BatchSink,
    *,
    follow: bool = False,
    poll_interval: float = 1.0,
    stop: threading.Event | None = None,
    on_progress: ProgressCallback | None = None,
) -> ShipSummary:
    """Ship sealed segments after the checkpoint; with `follow`, keep polling until `stop` is set."""
    stop = stop or threading.Event()
    progress = Progress()
    notify = on_progress or (lambda _: None)
    with state.lock(sink.stage):
        checkpoint = read_ship_checkpoint(state, sink)
        sink.check()
        first_last = (_ship_batches if isinstance(sink, BatchSink) else _ship_segments)(
            state, sink, checkpoint, follow, poll_interval, stop, progress, notify)  # type: ignore[arg-type]
    first, last = first_last
    return ShipSummary(
        stage=sink.stage, destination=sink.destination, segments=progress.segments_done,
        batches=progress.batches_done, objects=progress.objects,
        records=progress.records, bytes=progress.bytes, requests=progress.requests,
        seconds=progress.seconds, first_segment=first, last_segment=last,
        remaining=len(list_segments(state.changelog, after=last)),
    )


def _ship_segments(
    state: StateDir, sink: Sink, checkpoint: dict[str, Any], follow: bool, poll_interval: float,
    stop: threading.Event, progress: Progress, notify: ProgressCallback,
) -> tuple[str | None, str | None]:
    """One segment at a time (Kinesis): deliver, then checkpoint."""
    last: str | None = checkpoint.get("last_segment")
    first: str | None = None
    while not stop.is_set():
        pending = list_segments(state.changelog, after=last)
        if not pending:
            if not follow:
                break
            stop.wait(poll_interval)
            continue
        progress.segments_total += len(pending)
        for segment in pending:
            if stop.is_set():
                break
            _ship_segment(state, sink, segment, checkpoint, progress, notify)
            first, last = first or segment.name, segment.name
    return first, last


def _ship_batches(
    state: StateDir, sink: BatchSink, checkpoint: dict[str, Any], follow: bool, poll_interval: float,
    stop: threading.Event, progress: Progress, notify: ProgressCallback,
) -> tuple[str | None, str | None]:
    """Batches of segments (S3): a crashed run's pending batch first, exactly as planned; then new ones.

    Until-now ships everything sealed; follow waits (polling) until the open batch is full or its
    oldest segment has waited the roll interval. A stop between batches, or while a batch is still
    open (not yet pinned in the checkpoint), leaves nothing pending.
    """
    first: str | None = None
    batch = pending_batch(state.changelog, checkpoint, state.checkpoint_path(sink.stage))
    while not stop.is_set():
        sealed = list_segments(state.changelog, after=checkpoint.get("last_segment"))
        progress.segments_total = progress.segments_done + len(sealed)
        if batch is None:
            segments, wait = plan_batch(sealed, sink.options.roll, final=not follow, now=time.time())
            if not segments:
                if not follow:
                    break
                stop.wait(min(poll_interval, wait) if wait > 0 else poll_interval)
                continue
            batch = sink.new_batch(segments)
        _ship_batch(state, sink, batch, checkpoint, progress, notify)
        first, batch = first or batch.first, None
    return first, checkpoint.get("last_segment")


def _ship_batch(
    state: StateDir, sink: BatchSink, batch: Batch, checkpoint: dict[str, Any], progress: Progress,
    notify: ProgressCallback,
) -> None:
    # Pin the batch before the first upload: a rerun after a crash re-ships this exact range with
    # these options (the wall-clock rule that closed it could group differently next time).
    for name, empty in (("last_segment", None), ("segments", 0), ("batches", 0), ("records", 0)):
        checkpoint.setdefault(name, empty)  # a first run's checkpoint has every field from the start
    checkpoint.update(version=sink.checkpoint_version, destination=sink.destination, pending=batch.pending())
    state.write_checkpoint(sink.stage, checkpoint)
    progress.segment = batch.last
    delivery = sink.deliver_batch(batch, _reporter(progress, notify))
    checkpoint.update(
        last_segment=batch.last, pending=None,
        segments=int(checkpoint.get("segments", 0)) + len(batch.segments),
        batches=int(checkpoint.get("batches", 0)) + 1,
        records=int(checkpoint.get("records", 0)) + delivery.records,
    )
    state.write_checkpoint(sink.stage, checkpoint)  # last: only after the manifest is written
    progress.segments_done += len(batch.segments)
    progress.batches_done += 1
    progress.objects += delivery.objects
    notify(progress)


def _reporter(progress: Progress, notify: ProgressCallback) -> Report:
    def report(records: int, size: int, requests: int) -> None:
        progress.records += records
        progress.bytes += size
        progress.requests += requests
        notify(progress)

    return report


def _ship_segment(
    state: StateDir, sink: Sink, segment: Path, checkpoint: dict[str, Any], progress: Progress,
    notify: ProgressCallback,
) -> None:
    progress.segment = segment.name
    delivery = sink.deliver(segment, list(read_raw_lines(segment)), _reporter(progress, notify))
    checkpoint.update(
        version=CHECKPOINT_VERSION,
        destination=sink.destination,
        last_segment=segment.name,
        segments=int(checkpoint.get("segments", 0)) + 1,
        records=int(checkpoint.get("records", 0)) + delivery.records,
    )
    state.write_checkpoint(sink.stage, checkpoint)  # last: only after every record is acknowledged
    progress.segments_done += 1
    progress.batches_done += 1
    notify(progress)


def backoff(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter")."""
    return random.uniform(0, min(cap, base * 2 ** min(attempt, 30)))


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """Yield an Event set by SIGTERM or the first Ctrl-C, so shipping stops between segments.

    A second Ctrl-C raises KeyboardInterrupt at once: safe too, as the checkpoint only moves
    after a whole segment is acknowledged.
    """
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    if threading.current_thread() is not threading.main_thread():
        yield stop  # signals can only be handled in the main thread (e.g. under a test runner thread)
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
