"""The open transaction's change lines: in memory up to a threshold, then spilled to a temp file.

Lines arrive as blocks (cdc.capture.rowblock: all lines of one rows event, or one DDL line) with markers where
the commit's xid and timestamp go; COMMIT fills them in, block by block. Keys of a change line sort as
after, before, db, [fk_checks,] key, op, position, src{file, gtid, pos, row, server_id, xid}, table, ts, v, so a line is
`head + xid + tail + ts + '","v":1}'`: byte-identical to cdc.changelog.encode_line of the whole dict
(tests/capture/test_tail_options.py and test_txn.py check it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from cdc.capture.rowblock import TS_MARK, XID_MARK
from cdc.changelog import LINE_VERSION
from cdc.rows.native import Blocks, marker_filler

_SORT = orjson.OPT_SORT_KEYS
_END = b'","v":' + str(LINE_VERSION).encode() + b"}\n"
_SPILL_CHUNK = 2**20  # the markers are single bytes: any chunking of the spill file completes the same lines


def split_line(body: dict[str, Any], src: dict[str, Any], table: str) -> tuple[bytes, bytes]:
    """(head, tail) of a line whose xid and ts are not known yet. `body` holds the keys sorting before src."""
    head = orjson.dumps(body, option=_SORT)[:-1] + b',"src":' + orjson.dumps(src, option=_SORT)[:-1] + b',"xid":'
    return head, b'},"table":' + orjson.dumps(table) + b',"ts":"'


def _replace(blocks: Blocks, xid: bytes, end: bytes) -> bytes:
    """The commit's fields in place of the blocks' markers (cdc.capture.rowblock), joined; the C finish() is faster."""
    block = b"".join(blocks) if isinstance(blocks, list) else blocks
    return bytes(block.replace(XID_MARK, xid).replace(TS_MARK, end))


def commit_ts(epoch_seconds: int) -> bytes:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_seconds)).encode()


class TransactionBuffer:
    """Line blocks of the open transaction, bounded in memory (spills past `spill_bytes`)."""

    def __init__(self, spill_dir: Path, spill_bytes: int) -> None:
        self.spill_dir = spill_dir
        self.spill_bytes = spill_bytes
        self._blocks: list[bytes | bytearray] = []
        self._bytes = 0
        self._spill: BinaryIO | None = None
        self._spill_path: Path | None = None
        self.first_position: str | None = None
        self.count = 0

    def add(self, first_position: str, block: bytes | bytearray, count: int) -> None:
        """Append `count` lines (cdc.capture.rowblock's markers in place of xid and ts) starting at `first_position`."""
        if not count:
            return
        if self.first_position is None:
            self.first_position = first_position
        self.count += count
        if self._spill is not None:
            self._spill.write(block)
            return
        self._blocks.append(block)
        self._bytes += len(block)
        if self._bytes > self.spill_bytes:
            self._start_spill()

    def _start_spill(self) -> None:
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        self._spill_path = self.spill_dir / f"txn-{os.getpid()}.spill"
        self._spill = open(self._spill_path, "w+b")
        for block in self._blocks:
            self._spill.write(block)
        self._blocks = []
        self._bytes = 0

    @property
    def spilled(self) -> bool:
        return self._spill is not None

    def complete(self, xid: int | None, ts: int) -> Iterator[bytes | bytearray]:
        """The finished lines, in order and in blocks of whole lines, with the commit's xid and timestamp."""
        xid_bytes = b"null" if xid is None else str(xid).encode()
        end = commit_ts(ts) + _END
        fill = marker_filler() or _replace  # C: one pass over the block instead of two replaces (issue 28)
        if self._spill is None:
            # Blocks (one per rows event) are filled and written together up to _SPILL_CHUNK: a write and a
            # call per MiB instead of per event (issue 28), and never more than a MiB more in memory.
            group: list[bytes | bytearray] = []
            size = 0
            for block in self._blocks:
                group.append(block)
                size += len(block)
                if size >= _SPILL_CHUNK:
                    yield fill(group, xid_bytes, end)
                    group, size = [], 0
            if group:
                yield fill(group, xid_bytes, end)
            return
        self._spill.flush()
        self._spill.seek(0)
        pending = b""  # a chunk may end inside a line: hold its start back so every block holds whole lines
        for chunk in iter(lambda: self._spill.read(_SPILL_CHUNK), b""):  # type: ignore[union-attr]
            cut = chunk.rfind(TS_MARK) + 1
            if not cut:
                pending += chunk
                continue
            yield fill(pending + chunk[:cut], xid_bytes, end)
            pending = chunk[cut:]

    def clear(self) -> None:
        self._blocks = []
        self._bytes = 0
        self.first_position = None
        self.count = 0
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        if self._spill_path is not None:
            self._spill_path.unlink(missing_ok=True)
            self._spill_path = None

    def discard_stale(self) -> None:
        """Remove spill files a killed run left behind (never read: the transaction is re-read from the binlog)."""
        if self.spill_dir.exists():
            for path in self.spill_dir.glob("txn-*.spill"):
                path.unlink(missing_ok=True)
