"""Our rows events for python-mysql-replication 1.0.17: refuse unmapped tables, hand over full-image bodies as bytes.

Installed into the library's packet wrapper on import (cdc.source.binlog imports this module): the library
builds its wrapper through a module global of binlogstream, and its event map is name-mangled.
"""

from __future__ import annotations

from typing import Any

import pymysqlreplication.binlogstream as _stream_module
from pymysqlreplication import row_event as lib_rows
from pymysqlreplication.packet import BinLogPacketWrapper

from cdc.rows.exact_reads import ExactReads
from cdc.rows.images import ImageReader


class _RowsGuard(ExactReads):
    """Refuse rows events whose table map was not seen (the library drops them silently); decode fast."""

    table_map: Any
    event_size: int
    complete: bool
    op: str  # c / u / d: each event class below sets it

    def _mark_unmapped(self) -> None:
        if self.table_id not in self.table_map:
            self.unmapped = True
            self._processed = True  # reach the caller, who stops with coordinates

    def row_bytes(self) -> bytes | None:
        """The row images as bytes if every image carries every column (binlog_row_image=FULL), else None."""
        body: bytes | None = getattr(self, "_cdc_body", None)
        if body is not None:
            return body
        if not self.complete or self._RowsEvent__rows is not None:
            return None
        count = self.number_of_columns
        full = b"\xff" * (count // 8) + (bytes([(1 << (count % 8)) - 1]) if count % 8 else b"")
        bitmaps = [self.columns_present_bitmap] + ([self.columns_present_bitmap2] if self.op == "u" else [])
        if any(bytes(b) != full for b in bitmaps):
            return None
        self._cdc_body: bytes | None = bytes(self.packet.read(self.event_size - self.packet.read_bytes))
        return self._cdc_body

    def _fetch_rows(self) -> None:
        table = self.table_map[self.table_id]
        reader = getattr(table, "_cdc_image_reader", None)
        if reader is None:
            reader = table._cdc_image_reader = ImageReader(table.columns)
        body = self.row_bytes() if reader.complete else None
        if body is None:
            super()._fetch_rows()  # type: ignore[misc]  # partial images or a type only the library reads
            return
        rows, pos, end, image = [], 0, len(body), reader.image
        if self.op == "u":
            while pos < end:
                before, pos = image(body, pos)
                after, pos = image(body, pos)
                rows.append({"before_values": before, "before_none_sources": {}, "after_values": after,
                             "after_none_sources": {}})
        else:
            while pos < end:
                values, pos = image(body, pos)
                rows.append({"values": values, "none_sources": {}})
        self._RowsEvent__rows = rows


class WriteRows(_RowsGuard, lib_rows.WriteRowsEvent):  # type: ignore[misc]  # the library ships no types
    op = "c"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.unmapped = False
        super().__init__(*args, **kwargs)
        self._mark_unmapped()


class UpdateRows(_RowsGuard, lib_rows.UpdateRowsEvent):  # type: ignore[misc]  # the library ships no types
    op = "u"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.unmapped = False
        super().__init__(*args, **kwargs)
        self._mark_unmapped()


class DeleteRows(_RowsGuard, lib_rows.DeleteRowsEvent):  # type: ignore[misc]  # the library ships no types
    op = "d"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.unmapped = False
        super().__init__(*args, **kwargs)
        self._mark_unmapped()


class _PacketWrapper(BinLogPacketWrapper):  # type: ignore[misc]  # the library ships no types
    """The library's packet wrapper with our rows events in its (name-mangled) event map."""

    _BinLogPacketWrapper__event_map = {
        **BinLogPacketWrapper._BinLogPacketWrapper__event_map,
        **{code: WriteRows for code in (23, 30)},
        **{code: UpdateRows for code in (24, 31)},
        **{code: DeleteRows for code in (25, 32)},
    }


# The stream constructs its packet wrapper through this module global; there is no parameter for it.
_stream_module.BinLogPacketWrapper = _PacketWrapper
