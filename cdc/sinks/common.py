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

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from cdc.changelog import check_not_pruned, list_segments, read_raw_lines
from cdc.checkpoints import ShipKinesisCheckpoint, ShipS3Checkpoint
from cdc.errors import PositionError
from cdc.sinks.s3_batches import Batch, pending_batch, plan_batch
from cdc.state import StateDir

log = logging.getLogger(__name__)

ShipCheckpoint = TypeVar("ShipCheckpoint", ShipKinesisCheckpoint, ShipS3Checkpoint)


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
    """A sink that ships one segment at a time (Kinesis); its checkpoint is a ShipKinesisCheckpoint."""

    stage: str  # lock name, ShipKinesisCheckpoint.STAGE
    destination: str  # e.g. "kinesis:orders" or "s3://lake/cdc"; stored in the checkpoint

    def check(self) -> None:
        """Fail fast (permanent CdcError) if the destination does not exist or is not writable."""

    def deliver(self, segment: Path, lines: list[bytes], report: Report) -> Delivery:
        """Deliver every line of a sealed segment; return only when all are acknowledged."""


@runtime_checkable
class BatchSink(Protocol):
    """A sink that ships batches of consecutive segments, pinned in its ShipS3Checkpoint before upload (S3)."""

    stage: str  # lock name, ShipS3Checkpoint.STAGE
    destination: str
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


def read_ship_checkpoint(state: StateDir, sink: Sink | BatchSink) -> ShipKinesisCheckpoint | ShipS3Checkpoint:
    """The sink's checkpoint (empty before its first write), refusing one written for another destination."""
    if isinstance(sink, BatchSink):
        return _own_checkpoint(state, sink, ShipS3Checkpoint)
    return _own_checkpoint(state, sink, ShipKinesisCheckpoint)


def _own_checkpoint(state: StateDir, sink: Sink | BatchSink, kind: type[ShipCheckpoint]) -> ShipCheckpoint:
    checkpoint = kind.read(state) or kind()
    known = checkpoint.destination
    if known is not None and known != sink.destination:  # shipping from it would skip segments
        raise PositionError(
            f"checkpoint {kind.path(state)} belongs to {known}, not {sink.destination}; "
            f"shipping from it would skip every segment up to {checkpoint.last_segment}",
            hint="use a separate --state-dir per destination, or remove the checkpoint to ship everything again",
        )
    check_not_pruned(state.changelog, sink.stage, checkpoint.last_segment)  # before any call to AWS
    return checkpoint


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
        if isinstance(sink, BatchSink):
            first, last = _ship_batches(state, sink, follow, poll_interval, stop, progress, notify)
        else:
            first, last = _ship_segments(state, sink, follow, poll_interval, stop, progress, notify)
    return ShipSummary(
        stage=sink.stage, destination=sink.destination, segments=progress.segments_done,
        batches=progress.batches_done, objects=progress.objects,
        records=progress.records, bytes=progress.bytes, requests=progress.requests,
        seconds=progress.seconds, first_segment=first, last_segment=last,
        remaining=len(list_segments(state.changelog, after=last)),
    )


def _ship_segments(
    state: StateDir, sink: Sink, follow: bool, poll_interval: float, stop: threading.Event, progress: Progress,
    notify: ProgressCallback,
) -> tuple[str | None, str | None]:
    """One segment at a time (Kinesis): deliver, then checkpoint."""
    checkpoint = _own_checkpoint(state, sink, ShipKinesisCheckpoint)
    sink.check()
    last = checkpoint.last_segment
    first: str | None = None
    while not stop.is_set():
        pending = list_segments(state.changelog, after=last, reader=sink.stage)
        if not pending:
            if not follow:
                break
            stop.wait(poll_interval)
            continue
        progress.segments_total += len(pending)
        for segment in pending:
            if stop.is_set():
                break
            checkpoint = _ship_segment(state, sink, segment, checkpoint, progress, notify)
            first, last = first or segment.name, segment.name
    return first, last


def _ship_batches(
    state: StateDir, sink: BatchSink, follow: bool, poll_interval: float, stop: threading.Event, progress: Progress,
    notify: ProgressCallback,
) -> tuple[str | None, str | None]:
    """Batches of segments (S3): a crashed run's pending batch first, exactly as planned; then new ones.

    Until-now ships everything sealed; follow waits (polling) until the open batch is full or its
    oldest segment has waited the roll interval. A stop between batches, or while a batch is still
    open (not yet pinned in the checkpoint), leaves nothing pending.
    """
    checkpoint = _own_checkpoint(state, sink, ShipS3Checkpoint)
    sink.check()
    first: str | None = None
    batch = pending_batch(state.changelog, checkpoint, ShipS3Checkpoint.path(state))
    while not stop.is_set():
        sealed = list_segments(state.changelog, after=checkpoint.last_segment, reader=sink.stage)
        progress.segments_total = progress.segments_done + len(sealed)
        if batch is None:
            segments, wait = plan_batch(sealed, sink.options.roll, final=not follow, now=time.time())
            if not segments:
                if not follow:
                    break
                stop.wait(min(poll_interval, wait) if wait > 0 else poll_interval)
                continue
            batch = sink.new_batch(segments)
        checkpoint = _ship_batch(state, sink, batch, checkpoint, progress, notify)
        first, batch = first or batch.first, None
    return first, checkpoint.last_segment


def _ship_batch(
    state: StateDir, sink: BatchSink, batch: Batch, checkpoint: ShipS3Checkpoint, progress: Progress,
    notify: ProgressCallback,
) -> ShipS3Checkpoint:
    # Pin the batch before the first upload: a rerun after a crash re-ships this exact range with
    # these options (the wall-clock rule that closed it could group differently next time).
    pinned = replace(checkpoint, destination=sink.destination, pending=batch.pending())
    pinned.write(state)
    progress.segment = batch.last
    delivery = sink.deliver_batch(batch, _reporter(progress, notify))
    shipped = replace(pinned, last_segment=batch.last, pending=None, segments=pinned.segments + len(batch.segments),
                      batches=pinned.batches + 1, records=pinned.records + delivery.records)
    shipped.write(state)  # last: only after the manifest is written
    progress.segments_done += len(batch.segments)
    progress.batches_done += 1
    progress.objects += delivery.objects
    log.info(f"{sink.stage}: shipped batch {batch.first}..{batch.last} ({len(batch.segments)} segment(s), "
             f"{delivery.records:,} records, {delivery.objects} object(s)) to {sink.destination}",
             extra={"stage": sink.stage, "position": batch.last, "segments": len(batch.segments),
                    "records": delivery.records, "objects": delivery.objects})
    notify(progress)
    return shipped


def _reporter(progress: Progress, notify: ProgressCallback) -> Report:
    def report(records: int, size: int, requests: int) -> None:
        progress.records += records
        progress.bytes += size
        progress.requests += requests
        notify(progress)

    return report


def _ship_segment(
    state: StateDir, sink: Sink, segment: Path, checkpoint: ShipKinesisCheckpoint, progress: Progress,
    notify: ProgressCallback,
) -> ShipKinesisCheckpoint:
    progress.segment = segment.name
    delivery = sink.deliver(segment, list(read_raw_lines(segment)), _reporter(progress, notify))
    shipped = replace(checkpoint, destination=sink.destination, last_segment=segment.name,
                      segments=checkpoint.segments + 1, records=checkpoint.records + delivery.records)
    shipped.write(state)  # last: only after every record is acknowledged
    progress.segments_done += 1
    progress.batches_done += 1
    # Debug: one per segment (a segment every half second while the source is busy).
    log.debug(f"{sink.stage}: shipped {segment.name} ({delivery.records:,} records) to {sink.destination}",
              extra={"stage": sink.stage, "position": segment.name, "records": delivery.records})
    notify(progress)
    return shipped
