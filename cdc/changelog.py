"""The change log: sealed, append-only segments of newline-delimited JSON (docs/formats.md).

Writers (snapshot, tail) fill a temporary file and seal it atomically; readers (ship,
spark-merge) only ever see sealed segments, listed in lexical = source order.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from cdc.errors import PositionError
from cdc.state import disk_full_as_error, disk_full_error, fsync_dir, read_json, start_writeback, write_json_atomic

LINE_VERSION = 1
SEGMENT_PREFIX = "seg-"
SEGMENT_SUFFIX = ".jsonl"
# Written by `cdc prune` (cdc.pipeline.prune) before it deletes: the newest segment name it may have deleted.
PRUNED_MARKER = "pruned.json"
_FILE_SEQ = re.compile(r"\.(\d+)$")
# A segment's pages start on their way to disk every this many bytes, so sealing a big one (a snapshot
# chunk of wide rows, a huge transaction) waits for the last few MiB only, not for all of it at once.
WRITEBACK_BYTES = 4 * 1024 * 1024


@functools.lru_cache(maxsize=256)  # called for every rows event with the same few names
def file_seq(binlog_file: str) -> int:
    """The numeric extension of a binlog file name: `mariadb-bin.000003` -> 3."""
    match = _FILE_SEQ.search(binlog_file)
    if not match:
        raise PositionError(f"binlog file name {binlog_file!r} has no numeric extension")
    return int(match[1])


def position_string(binlog_file: str, pos: int, row: int, *, snapshot: bool = False, seq_offset: int = 0) -> str:
    """Sortable, unique coordinates of one row change (docs/formats.md); `seq_offset` is tail's, after a --rebase."""
    kind = "s" if snapshot else "b"
    return f"{file_seq(binlog_file) + seq_offset:010d}:{pos:012d}:{kind}{row:012d}"


def encode_line(change: dict[str, Any]) -> bytes:
    """One change as a line: keys sorted, compact, so a re-read yields identical bytes."""
    return orjson.dumps(change, option=orjson.OPT_SORT_KEYS) + b"\n"


def decode_line(line: bytes | str) -> dict[str, Any]:
    change: dict[str, Any] = orjson.loads(line)
    return change


def segment_name(first_position: str) -> str:
    return f"{SEGMENT_PREFIX}{first_position.replace(':', '-')}{SEGMENT_SUFFIX}"


def segment_key(name: str) -> tuple[int, int, str]:
    """`seg-0000000003-000000001234-b000000000000.jsonl` -> (3, 1234, "b"): its first line's file_seq, pos, kind."""
    body = name.removeprefix(SEGMENT_PREFIX).removesuffix(SEGMENT_SUFFIX)
    try:
        seq, pos, rest = body.split("-", 2)
        return (int(seq), int(pos), rest[:1])
    except ValueError:
        raise PositionError(f"change-log segment name {name!r} is not seg-<file_seq>-<pos>-<kind><row>.jsonl") from None


class SegmentWriter:
    """Accumulates whole transactions in a temp file and seals them as one segment."""

    def __init__(self, directory: Path, owner: str) -> None:
        self.directory = directory
        self.owner = owner
        self.directory.mkdir(parents=True, exist_ok=True)
        self._handle: Any = None
        self._temp: Path | None = None
        self._first_position: str | None = None
        # A write that failed may have left part of its bytes in the file (a big write is split by the OS),
        # so the open segment must never be sealed after it: seal re-raises this until abandon().
        self._failed: BaseException | None = None
        self.lines = 0
        self.bytes = 0
        self._written_back = 0  # bytes of the open segment already handed to start_writeback

    def discard_stale(self) -> int:
        """Remove temp files a crashed run of this owner left; they were never sealed, so never read."""
        removed = 0
        for path in self.directory.glob(f".{SEGMENT_PREFIX}{self.owner}-*.tmp"):
            path.unlink(missing_ok=True)
            removed += 1
        return removed

    def write(self, position: str, line: bytes | bytearray, lines: int = 1) -> None:
        """Append `line` (or a block of `lines` whole lines) to the open segment; `position` is its first line's."""
        if self._handle is None:
            self._temp = self.directory / f".{SEGMENT_PREFIX}{self.owner}-{os.getpid()}.tmp"
            try:
                self._handle = open(self._temp, "wb")
            except OSError as exc:  # a failed write too: seal must not say "nothing written" of this line
                raise self._failure(exc) from exc
            self._first_position = position
        try:  # per change line: a plain try costs nothing until it raises, unlike a `with` block
            self._handle.write(line)
        except OSError as exc:
            raise self._failure(exc) from exc
        self.lines += lines
        self.bytes += len(line)
        if self.bytes - self._written_back >= WRITEBACK_BYTES:
            self._write_back()

    def _write_back(self) -> None:
        """Start writing what the open segment holds beyond what was started before (see WRITEBACK_BYTES)."""
        try:
            self._handle.flush()  # the buffered last bytes: a line must not wait for the seal alone
        except OSError as exc:
            raise self._failure(exc) from exc
        start_writeback(self._handle.fileno(), self._written_back)
        self._written_back = self.bytes

    def _failure(self, exc: OSError) -> BaseException:
        """Remember a failed open, write or flush (seal re-raises it until abandon) and return what to raise."""
        assert self._temp is not None
        self._failed = disk_full_error(exc, self._temp) or exc
        return self._failed

    @property
    def is_empty(self) -> bool:
        return self._handle is None

    def seal(self) -> Path | None:
        """Make the open segment durable under its final name; None if nothing was written."""
        if self._failed is not None:
            raise self._failed
        if self._handle is None or self._temp is None or self._first_position is None:
            return None
        final = self.directory / segment_name(self._first_position)
        with disk_full_as_error(self._temp):
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            os.replace(self._temp, final)
            fsync_dir(self.directory)
        self._handle = None
        self._temp = None
        self._first_position = None
        self.lines = 0
        self.bytes = 0
        self._written_back = 0
        return final

    def abandon(self) -> None:
        """Drop the unsealed segment (used when a transaction must be re-read from its start)."""
        if self._handle is not None:
            try:
                self._handle.close()
            except OSError:  # flushing a file we are throwing away failed (e.g. disk full): nothing lost
                pass
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)
        self._failed = None
        self._handle = None
        self._temp = None
        self._first_position = None
        self.lines = 0
        self.bytes = 0
        self._written_back = 0


def list_segments(directory: Path, after: str | None = None, *, reader: str | None = None) -> list[Path]:
    """Sealed segments in source order, optionally only those whose name sorts after `after`.

    A `reader` (a consuming stage, reading from `after` on) is refused if the log it needs was pruned.
    """
    if reader is not None:
        check_not_pruned(directory, reader, after)
    if not directory.exists():
        return []
    names = sorted(
        p.name for p in directory.iterdir() if p.name.startswith(SEGMENT_PREFIX) and p.name.endswith(SEGMENT_SUFFIX)
    )
    return [directory / name for name in names if after is None or name > after]


def pruned_through(directory: Path) -> str | None:
    """The newest segment name `cdc prune` may have deleted from this change log (None: never pruned)."""
    document = read_json(directory / PRUNED_MARKER)
    through = None if document is None else document.get("through")
    if document is not None and not (isinstance(through, str) and through.startswith(SEGMENT_PREFIX)):
        raise PositionError(f"{directory / PRUNED_MARKER} is corrupt (no segment name under \"through\")",
                            hint="restore it from a backup; cdc prune writes it before it deletes anything")
    return through


def mark_pruned(directory: Path, through: str, *, at: float) -> None:
    """Record (durably, before any deletion) that segments up to `through` may be gone."""
    write_json_atomic(directory / PRUNED_MARKER, {"version": 1, "through": through, "at": at})


def check_not_pruned(directory: Path, reader: str, after: str | None) -> None:
    """Refuse a reader whose next segment may have been pruned: it would skip changes without a word."""
    through = pruned_through(directory)
    if through is None or (after is not None and after >= through):
        return
    where = "has no checkpoint (it would read the log from its start)" if after is None else f"is at {after}"
    raise PositionError(
        f"{reader} {where}, but the change log up to {through} was pruned (cdc prune, or cdc run by "
        "changelog.keep): what it has not read is gone from this state directory",
        hint=f"start {reader} in a new state directory from a fresh snapshot (cdc snapshot), or restore the pruned "
             "segments from a backup; configure every reader before the log is pruned (or keep it longer)",
    )


def read_segment(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the changes of one sealed segment."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise PositionError(
                    f"change-log segment {path} line {number} is not valid JSON ({exc})",
                    hint="the segment is damaged: restore it, or rerun tail from a checkpoint before it",
                ) from exc


def read_raw_lines(path: Path) -> Iterator[bytes]:
    """Yield the raw lines of a sealed segment (what ship sends, byte for byte)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                yield line.rstrip(b"\n")
