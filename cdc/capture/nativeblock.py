"""The change lines of one rows event from the C row decoder (cdc.rows.native), or None: rowblock's Python path then.

The C decoder writes every line as cdc.capture.rowblock.rows_block does, markers and all: it gets the
line's fixed pieces from here, around the images, the key and the two row numbers it writes itself:
  {"after":A,"before":B <db+key> K <op+position> %012d <quote+src head> %d <src tail>
Lines are byte-identical to rows_block's (tests/capture/test_nativeblock.py, tests/rows/test_decode_differential.py).
"""

from __future__ import annotations

import struct

import orjson

from cdc.capture.rowblock import RowsMeta, src_parts
from cdc.rows.decode import FAST_PATH_ERRORS
from cdc.rows.native import NativeRows

_dumps = orjson.dumps


# The RowsMeta fields pieces() knows how rows_block renders. A field added to RowsMeta may change the lines:
# until pieces() renders it too, events go to the Python path (tests/capture/test_nativeblock.py fails first).
KNOWN_FIELDS = frozenset({"db", "table", "file", "pos", "gtid", "server_id", "op", "first", "seq_offset", "fk_checks"})
IS_CURRENT = set(RowsMeta._fields) <= KNOWN_FIELDS


def pieces(meta: RowsMeta) -> tuple[bytes, bytes, bytes, bytes]:
    """The fixed pieces of every line of one rows event, for the C decoder."""
    src_head, src_tail = src_parts(meta)
    position = meta.position(0)[:-12]
    # `"fk_checks":false` only on events run with foreign_key_checks=0; it sorts between db and key.
    checks = b"" if getattr(meta, "fk_checks", True) else b',"fk_checks":false'
    return (b',"db":' + _dumps(meta.db) + checks + b',"key":', b',"op":' + _dumps(meta.op) + b',"position":' +
            _dumps(position)[:-1], b'"' + src_head, src_tail)


def native_block(native: NativeRows, body: bytes, meta: RowsMeta) -> tuple[bytes, int] | None:
    """(lines with markers, count) of a full-image rows-event body, or None if the C decoder was not sure of it."""
    if not IS_CURRENT:
        return None
    try:
        return native.rows(body, meta.op, meta.first, pieces(meta))
    except (*FAST_PATH_ERRORS, struct.error):  # struct.error: a Python reader's value past the body's end
        return None  # the Python path decodes the event: the same lines, or the precise error
