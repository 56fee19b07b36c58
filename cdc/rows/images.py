"""Read the row images of a rows event straight from its bytes, with readers chosen once per table map.

The library reads every value through a chain of ifs and several method calls per byte run; at binlog
rates that is most of tail's time. Here a table map becomes a list of small readers (cdc.rows.mysql_types,
struct formats bound once), and a rows event body is parsed in one pass. ImageReader returns the Python
values our fixed library readers return (cdc.source.binlog_rows hands them to the library's rows);
EncodedImageReader returns change-log values, and cdc.rows.compiled compiles its column sequence into
one function. Tables with a column type no reader covers, or events with partial images
(binlog_row_image != FULL), use the library's readers.
"""

from __future__ import annotations

from typing import Any

from cdc.rows.mysql_types import reader_for
from cdc.rows.readers import Reader


class ImageReader:
    """Read full row images of one table (all columns present) from a rows-event body."""

    def __init__(self, columns: list[Any]) -> None:
        self.names = [c.name for c in columns]
        readers = [reader_for(c) for c in columns]
        self.complete = all(r is not None for r in readers)
        self.readers: list[Reader] = [r for r in readers if r is not None]
        self.count = len(columns)
        self.bitmap_size = (self.count + 7) // 8
        self.all_present = b"\xff" * (self.count // 8) + (bytes([(1 << (self.count % 8)) - 1]) if self.count % 8 else b"")

    def image(self, buf: Any, pos: int) -> tuple[dict[str, Any], int]:
        nulls = int.from_bytes(buf[pos:pos + self.bitmap_size], "little")
        pos += self.bitmap_size
        values: list[Any] = []
        append = values.append
        for i, read in enumerate(self.readers):
            if nulls >> i & 1:
                append(None)
            else:
                value, pos = read(buf, pos)
                append(value)
        return dict(zip(self.names, values, strict=False)), pos


class EncodedImageReader:
    """Read full row images of one table straight into change-log values: {column name: value}.

    `plan` holds one (name, reader) per table-map column in order; a name of None marks an excluded
    column, which is still read (to find the next column) and then dropped.
    """

    def __init__(self, plan: list[tuple[str | None, Reader]]) -> None:
        self.plan = [(name if name is not None else f"\x00excluded{i}", read) for i, (name, read) in enumerate(plan)]
        self.dropped = [name for name, _ in self.plan if name.startswith("\x00")]
        self.bitmap_size = (len(plan) + 7) // 8

    def image(self, buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        end = pos + self.bitmap_size
        nulls = buf[pos] if end - pos == 1 else int.from_bytes(buf[pos:end], "little")
        pos, out = end, {}
        if not nulls:  # the common case: one test per row instead of one per column
            for name, read in self.plan:
                out[name], pos = read(buf, pos)
        else:
            bit = 1
            for name, read in self.plan:
                if nulls & bit:
                    out[name] = None
                else:
                    out[name], pos = read(buf, pos)
                bit <<= 1
        for name in self.dropped:
            del out[name]
        return out, pos
