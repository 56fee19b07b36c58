"""The change lines of one rows event as one byte string, with the commit's xid and timestamp left as markers.

A line is only complete at COMMIT (its `src.xid` and `ts` come from the commit event). Keys of a change
line sort as after, before, db, [fk_checks,] key, op, position, src{file, gtid, pos, row, server_id, xid}, table, ts, v,
so a line is `body + src up to xid + XID_MARK + table + ts up to its value + TS_MARK`, and the commit turns
a whole block of lines into finished ones with two bytes.replace calls (cdc.capture.txn): no per-row work
after the rows are encoded. The markers are control bytes, which JSON (and orjson) always escape inside
strings, so they cannot occur anywhere else in a line. The result is byte-identical to
cdc.changelog.encode_line of the whole change (tests/capture/test_txn.py).

Built in the tail process or in a decode worker (cdc.capture.decode_worker): the same function, so the
change log is the same either way.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from cdc.changelog import position_string

XID_MARK = b"\x00"  # replaced by the commit's xid (a number or null)
TS_MARK = b"\x01"  # replaced by the commit's timestamp, the closing quote, "v" and the newline
_SORT = orjson.OPT_SORT_KEYS
ALL_ROWS = 10**12  # more rows than one event can hold: position_string keeps 12 digits for the row
_dumps = orjson.dumps

Image = dict[str, Any] | None
_CACHED_ROWS = 4096  # row numbers as bytes: one rows event holds at most a few hundred rows of a usual table
_ROW_NUMBERS = [str(row).encode() for row in range(_CACHED_ROWS)]


class RowsMeta(NamedTuple):
    """What every row of one rows event shares; rows before `first` are skipped (already in a sealed segment).

    A NamedTuple, not a dataclass: one goes to a decode worker with every rows event, and tuples pickle fastest.
    """

    db: str
    table: str
    file: str
    pos: int
    gtid: str | None
    server_id: int | None
    op: str
    first: int = 0
    seq_offset: int = 0  # tail's, after a --rebase (docs/formats.md)
    fk_checks: bool = True  # False: run with foreign_key_checks=0, its lines say `"fk_checks": false` (formats.md)

    def position(self, row: int) -> str:
        return position_string(self.file, self.pos, row, seq_offset=self.seq_offset)


def first_row_after(meta: RowsMeta, skip_until: str | None) -> int:
    """Index of the first row of the event whose position sorts after `skip_until` (rows decoded or not)."""
    if skip_until is None or meta.position(0) > skip_until:
        return 0
    prefix = meta.position(0)[:-12]
    if skip_until.startswith(prefix):  # the same event: positions differ only in their last 12 digits (the row)
        return int(skip_until[-12:]) + 1
    return ALL_ROWS  # skip_until is past this whole event


def line_template(head: bytes, tail: bytes) -> bytes:
    """One line from cdc.capture.txn.split_line's parts, with the markers where xid and ts go."""
    return head + XID_MARK + tail + TS_MARK


def src_parts(meta: RowsMeta) -> tuple[bytes, bytes]:
    """A line's end around its row number: `,"src":{...,"row":` and `,"server_id":...` up to the ts marker."""
    src_head = b"".join((b',"src":{"file":', _dumps(meta.file), b',"gtid":', _dumps(meta.gtid), b',"pos":',
                         str(meta.pos).encode(), b',"row":'))
    src_tail = b"".join((b',"server_id":', _dumps(meta.server_id), b',"xid":', XID_MARK, b'},"table":',
                         _dumps(meta.table), b',"ts":"', TS_MARK))
    return src_head, src_tail


def rows_block(images: list[tuple[Image, Image]], key_names: list[str], meta: RowsMeta) -> tuple[bytes, int]:
    """(lines with markers, number of lines) for the (before, after) images of one rows event, from meta.first."""
    position = meta.position(0)[:-12] + "%012d"  # %-formatting: an f-string's format spec costs a call per row
    src_head, src_tail = src_parts(meta)
    db, op, single = meta.db, meta.op, key_names[0] if len(key_names) == 1 else None
    checks_off = not meta.fk_checks  # only then a field: lines of every other event stay as they always were
    parts: list[bytes] = []
    extend, numbers, cached, dumps, sort = parts.extend, _ROW_NUMBERS, _CACHED_ROWS, _dumps, _SORT
    for index in range(meta.first, len(images)):
        before, after = images[index]
        row: Any = after or before
        # A literal one-key dict: a comprehension runs as a function call of its own.
        key = {single: row[single]} if single is not None else {name: row[name] for name in key_names}
        body: dict[str, Any] = {"after": after, "before": before, "db": db, "key": key, "op": op,
                                "position": position % index}
        if checks_off:  # sorts between db and key: still before src, where the line's template splits
            body["fk_checks"] = False
        extend((dumps(body, option=sort)[:-1], src_head, numbers[index] if index < cached else str(index).encode(),
                src_tail))
    return b"".join(parts), max(0, len(images) - meta.first)
