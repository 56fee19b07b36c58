"""Our rows events for python-mysql-replication 1.0.17: refuse unmapped tables, hand over full-image bodies as bytes.

Installed into the library's packet wrapper on import (cdc.source.binlog imports this module): the library
builds its wrapper through a module global of binlogstream, and its event map is name-mangled.

The common rows event (a mapped table, full images, no extra data, the usual post-header) skips the
library's construction altogether (issue 28: its packet reads, header parsing and `Table.data` were half of
tail's CPU): _PacketWrapper reads the header and the body's bounds with two struct calls and builds our
event with the attributes the library's constructor would have set. Every other event, and any doubt, goes
through the library's constructor as before; a fast event rebuilds the library's own if asked for rows the
body cannot give (tests/source/test_binlog_rows.py holds both to the same events). The wrapper also reads MySQL 8's
JSON documents for the library's rows as MySQL's text (read_binary_json: cdc.rows.json_binary).
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

import pymysqlreplication.binlogstream as _stream_module
from pymysql.protocol import MysqlPacket
from pymysqlreplication import row_event as lib_rows
from pymysqlreplication.packet import BinLogPacketWrapper

from cdc.rows.exact_reads import ExactReads
from cdc.rows.images import ImageReader
from cdc.rows.json_binary import library_read_binary_json


@cache
def _full_bitmap(count: int) -> bytes:
    """The columns-present bitmap of an image that carries all `count` columns."""
    return b"\xff" * (count // 8) + (bytes([(1 << (count % 8)) - 1]) if count % 8 else b"")


class _RowsGuard(ExactReads):
    """Refuse rows events whose table map was not seen (the library drops them silently); decode fast."""

    table_map: Any
    event_size: int
    complete: bool
    number_of_columns: int
    columns_present_bitmap: bytes
    columns_present_bitmap2: bytes
    op: str  # c / u / d: each event class below sets it

    def _mark_unmapped(self) -> None:
        if self.table_id not in self.table_map:
            self.unmapped = True
            self._processed = True  # reach the caller, who stops with coordinates

    def partial_images(self) -> bool:
        """Some image leaves columns out: binlog_row_image MINIMAL or NOBLOB in the writing session (the global
        setting is checked to be FULL; one session may still override it)."""
        full = _full_bitmap(self.number_of_columns)
        if self.op == "u" and bytes(self.columns_present_bitmap2) != full:
            return True
        return bytes(self.columns_present_bitmap) != full

    def row_bytes(self) -> bytes | None:
        """The row images as bytes if every image carries every column (binlog_row_image=FULL), else None."""
        body: bytes | None = getattr(self, "_cdc_body", None)
        if body is not None:
            return body
        if not self.complete or self._RowsEvent__rows is not None:
            return None
        if self.partial_images():
            return None
        self._cdc_body: bytes | None = bytes(self.packet.read(self.event_size - self.packet.read_bytes))
        return self._cdc_body

    def _fetch_rows(self) -> None:
        args = getattr(self, "_cdc_args", None)
        if args is not None and self.row_bytes() is None:  # a fast event asked for the library's own rows
            packet = MysqlPacket(args[0].get_all_data(), None)  # unread: the library parses it from its start
            self._RowsEvent__rows = _PacketWrapper(packet, *args[1:], fast=False).event.rows
            return
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


_ROWS_CLASSES: dict[int, Any] = {
    **{code: WriteRows for code in (23, 30)}, **{code: UpdateRows for code in (24, 31)},
    **{code: DeleteRows for code in (25, 32)},
}
# Rows events v1 (MariaDB; 23-25) and v2 (MySQL 5.6+; 30-32): their post-header is table id (6) + flags (2),
# v2's then the length of its extra data (2, counting itself). https://mariadb.com/kb/en/rows_event_v1v2/
_POST_HEADER = {code: 8 if code < 30 else 10 for code in _ROWS_CLASSES}
# After pymysql's OK byte: the event header (timestamp, type, server id, size, next position, flags), then
# the rows post-header's table id (6 bytes, read as 8 with the flags' 2 masked off) and flags.
_HEAD = struct.Struct("<xIBIIIHQ")
_EXTRA = struct.Struct("<H")
_HEAD_END = 1 + 19 + 6 + 2
_TABLE_ID_MASK = (1 << 48) - 1


class _PacketWrapper(BinLogPacketWrapper):  # type: ignore[misc]  # the library ships no types
    """The library's packet wrapper with our rows events in its (name-mangled) event map, and a fast rows path."""

    _BinLogPacketWrapper__event_map = {**BinLogPacketWrapper._BinLogPacketWrapper__event_map, **_ROWS_CLASSES}

    def __init__(self, *args: Any, fast: bool = True) -> None:
        if not (fast and self._fast_rows(args)):
            super().__init__(*args)

    def read_binary_json(self, size: int, is_partial: bool) -> Any:
        """MySQL 8's JSON document as the text MySQL shows: the library's parse_json loses temporal and opaque values."""
        return library_read_binary_json(self, size, is_partial)

    def _fast_rows(self, args: tuple[Any, ...]) -> bool:
        """Build a common rows event without the library's constructor; False: let the library do it."""
        packet, table_map, _, mysql_version, use_checksum, allowed, *filters = args
        data = packet._data
        if len(data) < _HEAD_END + 3 or data[5] not in _ROWS_CLASSES:
            return False
        timestamp, kind, server_id, size, log_pos, header_flags, post = _HEAD.unpack_from(data)
        cls, table_id = _ROWS_CLASSES[kind], post & _TABLE_ID_MASK
        table = table_map.get(table_id)
        # only_tables .. ignored_schemas, freeze_schema, ignore_decode_errors, verify_checksum: cdc sets none
        lengths = filters[10] if len(filters) > 10 else None
        if (table is None or cls not in allowed or any(filters[:4]) or filters[6] or len(data) != 1 + size
                or (lengths and len(lengths) >= kind and lengths[kind - 1] != _POST_HEADER[kind])):
            return False
        at = _HEAD_END
        if kind >= 30:
            if _EXTRA.unpack_from(data, at)[0] != 2:
                return False  # MySQL's extra row info (NDB, partitions): the library reads it
            at += 2
        count = data[at]
        reader = getattr(table, "_cdc_image_reader", None)
        if reader is None:
            reader = table._cdc_image_reader = ImageReader(table.columns)
        if count != reader.count or count >= 251 or not reader.complete:
            return False
        at += 1
        full = reader.all_present
        for _ in range(2 if cls is UpdateRows else 1):
            if data[at:at + len(full)] != full:
                return False  # partial images (binlog_row_image MINIMAL/NOBLOB): the library's readers
            at += len(full)
        end = len(data) - (4 if use_checksum else 0)
        if at > end:
            return False
        self.timestamp, self.event_type, self.server_id, self.event_size = timestamp, kind, server_id, size
        self.log_pos, self.flags, self.read_bytes, self.packet = log_pos, header_flags, 0, packet
        self._BinLogPacketWrapper__data_buffer = b""
        event: Any = cls.__new__(cls)
        self.event = event
        event.packet, event.table_map, event.event_type, event.timestamp = self, table_map, kind, timestamp
        event._ctl_connection = args[2]
        event.event_size = size - (23 if use_checksum else 19)
        event.mysql_version, event._processed, event.complete, event.unmapped = mysql_version, True, True, False
        event.table_id, event.schema, event.table = table_id, table.schema, table.table
        event.flags, event.number_of_columns, event.columns = post >> 48, count, table.columns
        event.columns_present_bitmap = event.columns_present_bitmap2 = full
        event._RowsEvent__rows = None
        event._cdc_body, event._cdc_args = data[at:end], args
        return True


# The stream constructs its packet wrapper through this module global; there is no parameter for it.
_stream_module.BinLogPacketWrapper = _PacketWrapper
