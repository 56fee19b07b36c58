"""Rows per second over the last minute, per stage, from what the state directory holds (docs/guide.md, `cdc status`).

A "row" is a change line of the change log (a row change, or a DDL control line), so every stage counts the
same things, whatever it turns them into (S3 objects, Kinesis records, merged rows).

- The writers, snapshot and tail: the lines of their segments (kind `s` and `b` in the name) sealed in the
  last WINDOW seconds, divided by WINDOW. A segment's seal time is its file's mtime: it is written under a
  temporary name, renamed when sealed and never changed after. Known from a single look.
- The consumers, ship-kinesis, ship-s3, spark-merge, snowflake-apply: from successive samples of their
  checkpoints while `cdc status --watch` runs: the lines of the segments a stage consumed between its oldest
  sample of the last WINDOW seconds and now, divided by the time between the two. Unknown (None) in a
  single look and at the first sample of a watch, since a checkpoint says where a stage is, not when it got there.

Sealed segments never change, so each one's lines are counted once and cached (by name) while watching.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict, deque
from pathlib import Path

from cdc.changelog import segment_key
from cdc.checkpoints import CHANGELOG_CONSUMERS, SnapshotStatus, TailCheckpoint
from cdc.errors import PositionError
from cdc.pipeline.local import LocalState

WINDOW = 60.0
# Walking back from the newest segment, stop after this many in a row sealed before the window: tail seals in
# name order, and a parallel snapshot's workers seal at most a few out of it.
_OLD_RUN = 32
_CACHE = 20_000
_CHUNK = 1 << 20
_WRITERS = {SnapshotStatus.STAGE: "s", TailCheckpoint.STAGE: "b"}

Sample = tuple[float, str | None, int]  # (time, the stage's last segment, lines consumed since the first sample)


class RowRates:
    """Per-stage rows/s; keep one instance across the samples of a watch."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = window
        self._lines: OrderedDict[str, int] = OrderedDict()
        self._samples: dict[str, deque[Sample]] = {}

    def measure(self, local: LocalState, now: float) -> dict[str, float | None]:
        """Rows per second of every stage that has a checkpoint (None: unknown yet)."""
        written = self._written(local.segments, now)
        rates: dict[str, float | None] = {stage: written[kind] for stage, kind in _WRITERS.items() if local.has(stage)}
        names = [p.name for p in local.segments]
        for consumer in CHANGELOG_CONSUMERS:
            if local.has(consumer.STAGE):
                rates[consumer.STAGE] = self._consumed(local, consumer.STAGE, names, now)
            else:
                self._samples.pop(consumer.STAGE, None)
        return rates

    def _written(self, segments: list[Path], now: float) -> dict[str, float]:
        lines = {kind: 0 for kind in _WRITERS.values()}
        old_run = 0
        for path in reversed(segments):
            try:
                sealed_at = path.stat().st_mtime
                kind = segment_key(path.name)[2]
            except (OSError, PositionError):
                continue
            if sealed_at <= now - self.window:
                old_run += 1
                if old_run >= _OLD_RUN:
                    break
                continue
            old_run = 0
            if kind in lines:
                lines[kind] += self.lines(path)
        return {kind: count / self.window for kind, count in lines.items()}

    def _consumed(self, local: LocalState, stage: str, names: list[str], now: float) -> float | None:
        last = local.last_segment(stage)
        samples = self._samples.setdefault(stage, deque())
        if samples and last is not None and samples[-1][1] is not None and last < str(samples[-1][1]):
            samples.clear()  # the checkpoint went back (restored, or the stage started over): a new series
        if not samples:
            samples.append((now, last, 0))
            return None
        _, before, total = samples[-1]
        if last != before and last is not None:
            start = 0 if before is None else bisect_right(names, before)
            total += sum(self.lines(p) for p in local.segments[start:bisect_right(names, last)])
        samples.append((now, last, total))
        while len(samples) > 2 and samples[0][0] < now - self.window:
            samples.popleft()
        first_at, _, first_total = samples[0]
        return (total - first_total) / (now - first_at) if now > first_at else None

    def lines(self, path: Path) -> int:
        """The lines of a sealed segment (cached: a sealed segment never changes)."""
        cached = self._lines.get(path.name)
        if cached is not None:
            self._lines.move_to_end(path.name)
            return cached
        count = 0
        try:
            with open(path, "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    count += chunk.count(b"\n")
        except FileNotFoundError:
            return 0
        self._lines[path.name] = count
        if len(self._lines) > _CACHE:
            self._lines.popitem(last=False)
        return count
