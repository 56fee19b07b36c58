"""The change lines of one rows event from the C row decoder (cdc.rows.native), or None: rowblock's Python path then.

The C decoder writes every line as cdc.capture.rowblock.rows_block does, markers and all: it gets the
line's fixed pieces from here, around the images, the key and the two row numbers it writes itself:
  {"after":A,"before":B <db+key> K <op+position> %012d <quote+src head> %d <src tail>
Lines are byte-identical to rows_block's (tests/capture/test_nativeblock.py, tests/rows/test_decode_differential.py).
"""

from __future__ import annotations

import functools
import struct

import orjson

from cdc.capture.rowblock import RowsMeta, src_parts
from cdc.changelog import position_string
from cdc.rows.decode import FAST_PATH_ERRORS
from cdc.rows.native import NativeRows

_dumps = orjson.dumps


# The RowsMeta fields pieces() knows how rows_block renders. A field added to RowsMeta may change the lines:
# until pieces() renders it too, events go to the Python path (tests/capture/test_nativeblock.py fails first).
KNOWN_FIELDS = frozenset({"db", "table", "file", "pos", "gtid", "server_id", "op", "first", "seq_offset", "fk_checks"})
IS_CURRENT = set(RowsMeta._fields) <= KNOWN_FIELDS


def pieces(meta: RowsMeta) -> tuple[bytes, bytes, bytes, bytes]:
    """The fixed pieces of every line of one rows event, for the C decoder."""
    checks = getattr(meta, "fk_checks", True)
    db_key, op_position, src_before_pos, src_tail = _event_parts(meta.db, meta.op, checks, meta.file, meta.gtid,
                                                                 meta.server_id, meta.table, meta.seq_offset)
    # The event's own position, as position_string writes it (per event: %-formatting, no string of it first).
    return db_key, op_position + b"%012d:b" % meta.pos, src_before_pos + b"%d" % meta.pos + _POS_END, src_tail


_POS_END = b',"row":'


@functools.lru_cache(maxsize=1024)  # the events of one transaction share all but their position
def _event_parts(db: str, op: str, fk_checks: bool, file: str, gtid: str | None, server_id: int | None,
                 table: str, seq_offset: int) -> tuple[bytes, bytes, bytes, bytes]:
    """pieces() but for the event's position: rowblock's own src parts, cut where the position goes."""
    src_head, src_tail = src_parts(RowsMeta(db, table, file, 0, gtid, server_id, op))
    before, found, after = src_head.rpartition(b',"pos":0' + _POS_END)
    assert found and not after, src_head  # a dumped string never holds a bare quote: the cut is unique
    # `"fk_checks":false` only on events run with foreign_key_checks=0; it sorts between db and key.
    checks = b"" if fk_checks else b',"fk_checks":false'
    # The position's file part (`"0000000003:`): position_string's up to the event's pos, quoted as orjson does.
    start = position_string(file, 0, 0, seq_offset=seq_offset)
    file_part = start[:start.index(":") + 1].encode()
    return (b',"db":' + _dumps(db) + checks + b',"key":', b',"op":' + _dumps(op) + b',"position":"' + file_part,
            b'"' + before + b',"pos":', src_tail)


def native_block(native: NativeRows, body: bytes, meta: RowsMeta) -> tuple[bytes, int] | None:
    """(lines with markers, count) of a full-image rows-event body, or None if the C decoder was not sure of it."""
    if not IS_CURRENT:
        return None
    try:
        return native.rows(body, meta.op, meta.first, pieces(meta))
    except (*FAST_PATH_ERRORS, struct.error):  # struct.error: a Python reader's value past the body's end
        return None  # the Python path decodes the event: the same lines, or the precise error
