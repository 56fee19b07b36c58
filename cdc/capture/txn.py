"""The open transaction's change lines: in memory up to a threshold, then spilled to a temp file.

A line is only complete at COMMIT (its `src.xid` and `ts` come from the commit event), so each
buffered line is kept as two byte strings around those values. Keys of a change line sort as
after, before, db, key, op, position, src{file, gtid, pos, row, server_id, xid}, table, ts, v,
so the line is `head + xid + tail + ts + '","v":1}'`: byte-identical to
cdc.changelog.encode_line of the whole dict (tests/capture/test_tail_options.py checks it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from cdc.changelog import LINE_VERSION

_SORT = orjson.OPT_SORT_KEYS
_END = b'","v":' + str(LINE_VERSION).encode() + b"}\n"


def split_line(body: dict[str, Any], src: dict[str, Any], table: str) -> tuple[bytes, bytes]:
    """(head, tail) of a line whose xid and ts are not known yet. `body` holds the keys sorting before src."""
    head = orjson.dumps(body, option=_SORT)[:-1] + b',"src":' + orjson.dumps(src, option=_SORT)[:-1] + b',"xid":'
    return head, b'},"table":' + orjson.dumps(table) + b',"ts":"'


class RowLines:
    """split_line for the rows of one rows event, with the parts every row shares encoded once.

    head = the body (after, before, db, key, op, position) + src up to its row index; only the body and
    the index change from row to row. Byte-identical to split_line (tests/capture/test_txn_lines.py).
    """

    def __init__(self, table: str, file: str, pos: int, gtid: str | None, server_id: int | None) -> None:
        self.src_head = b',"src":{"file":' + orjson.dumps(file) + b',"gtid":' + orjson.dumps(gtid) + (
            b',"pos":' + orjson.dumps(pos) + b',"row":')
        self.src_tail = b',"server_id":' + orjson.dumps(server_id) + b',"xid":'
        self.tail = b'},"table":' + orjson.dumps(table) + b',"ts":"'

    def head(self, body: dict[str, Any], row: int) -> bytes:
        return b"".join((orjson.dumps(body, option=_SORT)[:-1], self.src_head, str(row).encode(), self.src_tail))


def commit_ts(epoch_seconds: int) -> bytes:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_seconds)).encode()


class TransactionBuffer:
    """Lines of the open transaction, bounded in memory (spills past `spill_bytes`)."""

    def __init__(self, spill_dir: Path, spill_bytes: int) -> None:
        self.spill_dir = spill_dir
        self.spill_bytes = spill_bytes
        self._lines: list[tuple[bytes, bytes]] = []
        self._bytes = 0
        self._spill: BinaryIO | None = None
        self._spill_path: Path | None = None
        self.first_position: str | None = None
        self.count = 0

    def add(self, position: str, head: bytes, tail: bytes) -> None:
        if self.first_position is None:
            self.first_position = position
        self.count += 1
        if self._spill is not None:
            self._spill.write(head + b"\t" + tail + b"\n")  # JSON escapes tabs and newlines: safe separators
            return
        self._lines.append((head, tail))
        self._bytes += len(head) + len(tail)
        if self._bytes > self.spill_bytes:
            self._start_spill()

    def _start_spill(self) -> None:
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        self._spill_path = self.spill_dir / f"txn-{os.getpid()}.spill"
        self._spill = open(self._spill_path, "w+b")
        for head, tail in self._lines:
            self._spill.write(head + b"\t" + tail + b"\n")
        self._lines = []
        self._bytes = 0

    @property
    def spilled(self) -> bool:
        return self._spill is not None

    def complete_lines(self, xid: int | None, ts: int) -> Iterator[bytes]:
        """The finished lines, in order, with the commit's xid and timestamp filled in."""
        xid_bytes = b"null" if xid is None else str(xid).encode()
        end = commit_ts(ts) + _END
        if self._spill is None:
            for head, tail in self._lines:
                yield head + xid_bytes + tail + end
            return
        self._spill.flush()
        self._spill.seek(0)
        for raw in self._spill:
            head, _, tail = raw[:-1].partition(b"\t")
            yield head + xid_bytes + tail + end

    def clear(self) -> None:
        self._lines = []
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
