"""A batch's objects without holding its lines: index the tables, then compress one part at a time.

Pass 1 reads the batch's segments once and keeps, per table, only where each line is (segment,
offset, length) in compact arrays: 16 bytes a line instead of the line. Pass 2 cuts each table's
lines into parts of at most `roll_size` uncompressed bytes (at line boundaries; lengths alone
decide, so the cut is the same on every run) and streams one part at a time through the
compressor into a spooled temp file. Peak memory is the index plus one compressed part's spool
buffer, whatever the batch's size.

Compression is deterministic: gzip is zlib's gzip wrapper with mtime 0 (byte for byte what
`gzip.compress(..., mtime=0)` gave the v1 objects); zstd is fed in fixed-size chunks at a fixed
level with the content size in the frame.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import zlib
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from cdc.errors import DataError

CHUNK = 1024 * 1024  # bytes handed to the compressor at once (fixed: zstd's output depends on it)
SPOOL_MEMORY = 8 * 1024 * 1024  # a compressed part past this goes to a temp file on disk
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass
class TableLines:
    """Where one table's lines are in the batch's segments, in change-log order."""

    db: str
    table: str
    segment: array[int] = field(default_factory=lambda: array("I"))
    offset: array[int] = field(default_factory=lambda: array("Q"))
    length: array[int] = field(default_factory=lambda: array("I"))

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"


@dataclass
class Part:
    """One compressed object, spooled and ready to upload."""

    body: IO[bytes]
    size: int  # compressed bytes
    records: int
    uncompressed_bytes: int
    sha256: str  # of the uncompressed content
    first: dict[str, Any]  # the part's first and last change
    last: dict[str, Any]


def index_tables(segments: tuple[Path, ...]) -> list[TableLines]:
    """Pass 1: every table of the batch (in order of first appearance) and where its lines are."""
    tables: dict[tuple[str, str], TableLines] = {}
    for number, segment in enumerate(segments):
        with open(segment, "rb") as handle:
            offset = 0
            for line_number, raw in enumerate(handle, start=1):
                line = raw.rstrip(b"\n")
                if line.strip():  # what read_raw_lines yields: ship sends every non-blank line as it is
                    key = _table_of(line, segment, line_number)
                    entry = tables.get(key) or tables.setdefault(key, TableLines(*key))
                    entry.segment.append(number)
                    entry.offset.append(offset)
                    entry.length.append(len(line))
                offset += len(raw)
    return list(tables.values())


def _table_of(line: bytes, segment: Path, number: int) -> tuple[str, str]:
    try:
        change = orjson.loads(line)
    except orjson.JSONDecodeError:
        change = None
    if not isinstance(change, dict) or not isinstance(change.get("db"), str) or not isinstance(change.get("table"), str):
        raise DataError(f"{segment}:{number}: change has no db/table",
                        hint="the segment does not follow docs/formats.md; rerun tail for it")
    return change["db"], change["table"]


def cut_parts(lengths: array[int], limit: int) -> list[tuple[int, int]]:
    """[start, end) line ranges whose payload (each line and its newline) stays within `limit`.

    A single line longer than the limit is a part alone: lines are never split.
    """
    parts, start, size = [], 0, 0
    for index, length in enumerate(lengths):
        if index > start and size + length + 1 > limit:
            parts.append((start, index))
            start, size = index, 0
        size += length + 1
    parts.append((start, len(lengths)))
    return parts


@contextmanager
def spool_part(segments: tuple[Path, ...], lines: TableLines, start: int, end: int,
               compression: str) -> Iterator[Part]:
    """Pass 2: compress lines[start:end] of one table into a temp file; yield it for upload."""
    payload = sum(lines.length[start:end]) + (end - start)
    compressor = _compressor(compression, payload)
    digest = hashlib.sha256()
    first = last = b""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY) as body:
        chunk: list[bytes] = []
        buffered = 0
        for line in _read_lines(segments, lines, start, end):
            first = first or line
            last = line
            chunk += (line, b"\n")
            buffered += len(line) + 1
            if buffered >= CHUNK:
                _feed(b"".join(chunk), digest, compressor, body)
                chunk, buffered = [], 0
        _feed(b"".join(chunk), digest, compressor, body)
        body.write(compressor.flush())
        size = body.tell()
        body.seek(0)
        yield Part(body, size, end - start, payload, digest.hexdigest(), orjson.loads(first), orjson.loads(last))


def first_date(part: Part, table: str, batch_id: str) -> str:
    """The dt= partition of a part: the commit date of its first change."""
    ts = str(part.first.get("ts") or "")
    if not _DATE.match(ts):
        raise DataError(f"batch {batch_id}: change {part.first.get('position')} of {table} has no commit ts ({ts!r})",
                        hint="the segment does not follow docs/formats.md; rerun tail for it")
    return ts[:10]


def _feed(data: bytes, digest: Any, compressor: Any, body: IO[bytes]) -> None:
    digest.update(data)
    body.write(compressor.compress(data))


def _read_lines(segments: tuple[Path, ...], lines: TableLines, start: int, end: int) -> Iterator[bytes]:
    fd, current = -1, -1
    try:
        for index in range(start, end):
            number = lines.segment[index]
            if number != current:
                if fd >= 0:
                    os.close(fd)
                fd, current = os.open(segments[number], os.O_RDONLY), number
            yield os.pread(fd, lines.length[index], lines.offset[index])
    finally:
        if fd >= 0:
            os.close(fd)


class _Identity:
    def compress(self, data: bytes) -> bytes:
        return data

    def flush(self) -> bytes:
        return b""


def _compressor(compression: str, payload: int) -> Any:
    if compression == "gzip":
        return zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip wrapper, mtime 0, no file name
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3, write_content_size=True).compressobj(size=payload)
    return _Identity()
