"""BIT(n): (n + 7) // 8 big-endian bytes; cdc.values turns them into the integer."""

from __future__ import annotations

from typing import Any

from cdc.rows.readers import ColumnType, Reader


def bit_reader(column: Any) -> Reader:
    size = column.bytes

    def read(buf: Any, pos: int) -> tuple[bytes, int]:
        return bytes(buf[pos:pos + size]), pos + size

    return read


def describe_bit(column: Any, charset: str | None) -> ColumnType:
    return ColumnType("bit", f"bit({column.bits})")
