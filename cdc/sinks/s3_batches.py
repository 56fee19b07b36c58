"""Batches of consecutive sealed segments for the S3 sink: when one closes, and how it survives a crash.

tail seals a segment every --flush-interval (0.5 s) under load, so one object per segment would be
thousands of tiny objects an hour. A batch gathers consecutive segments until the next one would
take its uncompressed payload past `roll.size`, or until its oldest segment has waited
`roll.interval` seconds (Firehose's buffering hints are the same idea), or, with --until-now, at the
end of what is sealed.

The time criterion reads the wall clock, so the same change log can be grouped differently by two
runs. Determinism comes from the checkpoint instead: a batch's range (and the options that shape
its bytes) is written as `pending` BEFORE any upload, and a rerun after a crash ships exactly that
range again, whatever its own options say, rewriting the same keys with the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.changelog import SEGMENT_SUFFIX, list_segments
from cdc.checkpoints import ShipS3Checkpoint
from cdc.errors import PositionError, UsageError

DEFAULT_ROLL_SIZE = 128 * 1024 * 1024
DEFAULT_ROLL_INTERVAL = 60.0
MIN_ROLL_SIZE = 1024 * 1024
COMPRESSIONS = {"gzip": ".jsonl.gz", "zstd": ".jsonl.zst", "none": ".jsonl"}


@dataclass(frozen=True)
class RollOptions:
    size: int = DEFAULT_ROLL_SIZE  # uncompressed bytes per batch and per object
    interval: float = DEFAULT_ROLL_INTERVAL  # seconds the oldest segment of an open batch may wait

    def __post_init__(self) -> None:
        if self.size < MIN_ROLL_SIZE:
            raise UsageError(f"--roll-size must be at least 1 MiB (got {self.size:,} bytes)")
        if self.interval < 0:
            raise UsageError(f"--roll-interval must be 0 or more seconds (got {self.interval})")


@dataclass(frozen=True)
class Batch:
    """Consecutive sealed segments shipped as one set of objects, and what shapes their bytes."""

    segments: tuple[Path, ...]
    roll_size: int  # parts of one table are cut at this many uncompressed bytes
    compression: str

    @property
    def first(self) -> str:
        return self.segments[0].name

    @property
    def last(self) -> str:
        return self.segments[-1].name

    @property
    def id(self) -> str:
        """`<first-segment-id>` for one segment (the keys v1 wrote), else `<first>_<last>`.

        Derived from the range, so a different grouping of the same segments never reuses a key
        that holds other bytes. Segment ids hold no `_`, and ids sort by their first segment.
        """
        first, last = (name.removesuffix(SEGMENT_SUFFIX) for name in (self.first, self.last))
        return first if first == last else f"{first}_{last}"

    def pending(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "roll_size": self.roll_size, "compression": self.compression}


def plan_batch(sealed: list[Path], roll: RollOptions, *, final: bool, now: float) -> tuple[list[Path], float]:
    """The segments to ship as the next batch, or none yet and the seconds until the open batch is due.

    A batch takes segments while the payload stays within roll.size (at least one: a bigger
    segment is a batch alone, its tables cut into parts). It is due when the next segment would
    not fit, when `final` (until-now: everything sealed goes), or when its oldest segment was
    sealed roll.interval ago. The age is the segment file's mtime (tail's last write before the
    rename that seals it): it survives a restart of ship, so a restart never delays delivery by
    another interval, and a backlog left while ship was down goes at once.
    """
    taken: list[Path] = []
    size = 0
    for segment in sealed:
        length = segment.stat().st_size
        if taken and size + length > roll.size:
            return taken, 0.0  # full: the next segment would not fit
        taken.append(segment)
        size += length
    if not taken or final or size >= roll.size:
        return taken, 0.0
    waited = now - taken[0].stat().st_mtime
    if waited >= roll.interval:
        return taken, 0.0
    return [], roll.interval - waited


def pending_batch(changelog: Path, checkpoint: ShipS3Checkpoint, where: Path) -> Batch | None:
    """The batch a crashed run planned, to be re-shipped exactly; a hand-edited entry that no longer fits stops."""
    pending = checkpoint.pending
    if pending is None:
        return None
    described = f"checkpoint {where}: pending batch {pending!r}"
    if not _is_well_formed(pending):
        raise PositionError(f"{described} is corrupt (needs first, last, roll_size and compression)",
                            hint=_PENDING_HINT)
    sealed = list_segments(changelog, after=checkpoint.last_segment)
    names = [p.name for p in sealed]
    first, last = pending["first"], pending["last"]
    if not names or names[0] != first or last not in names or last < first:
        expected = names[0] if names else "(no sealed segment)"
        raise PositionError(
            f"{described} does not match the change log {changelog}: the next sealed segment after the "
            f"checkpoint is {expected}, and the batch must run from it to a sealed segment",
            hint=_PENDING_HINT)
    return Batch(tuple(sealed[: names.index(last) + 1]), pending["roll_size"], pending["compression"])


_PENDING_HINT = ("restore the checkpoint from a backup; or delete its \"pending\" entry to plan the batch anew "
                 "(objects the crashed run uploaded for it then stay in the bucket without a manifest)")


def _is_well_formed(pending: Any) -> bool:
    return (isinstance(pending, dict) and isinstance(pending.get("first"), str) and isinstance(pending.get("last"), str)
            and type(pending.get("roll_size")) is int and pending["roll_size"] >= MIN_ROLL_SIZE
            and pending.get("compression") in COMPRESSIONS)
