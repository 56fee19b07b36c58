"""MariaDB's INET4, INET6 and UUID columns: fixed bytes in the binlog, text in a SELECT.

These data-type plugins (MariaDB 10.5+, 10.7+, 10.10+) reach the binlog's table map as a BINARY(4) or
BINARY(16) column, so a rows event carries the value's bytes, while `SELECT` (the snapshot, verify) shows its
text. The change log holds the text, exactly as the server prints it, so the lake and Snowflake hold one form
whichever way a row came. The forms, checked against the server's own CAST output in tests/capture/test_addresses.py:

- INET4: dotted quad of the 4 bytes (network order).
- INET6: the 8 16-bit words in lowercase hex without leading zeros, the longest run of zero words (the first
  of equal runs, even a run of one word) written `::`; an address whose first 6 words are zero (and the 7th is
  not, the run being exactly 6 long), or whose first 5 are zero and the 6th is ffff, ends in a dotted quad.
- UUID: the 16 bytes as 8-4-4-4-12 lowercase hex, in the order the binlog carries them (MariaDB 10.11).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from cdc.schema import Column

SIZES = {"inet4": 4, "inet6": 16, "uuid": 16}  # data type -> bytes in the binlog (a BINARY(n) there)


def inet4_text(raw: bytes) -> str:
    return ".".join(str(byte) for byte in raw)


def inet6_text(raw: bytes) -> str:
    words = struct.unpack(">8H", raw)
    start, length = _longest_zero_run(words)
    if start == 0 and (length == 6 or (length == 5 and words[5] == 0xFFFF)):
        return ("::ffff:" if length == 5 else "::") + inet4_text(raw[12:])
    if length == 0:
        return ":".join(f"{word:x}" for word in words)
    head = ":".join(f"{word:x}" for word in words[:start])
    rest = ":".join(f"{word:x}" for word in words[start + length:])
    return f"{head}::{rest}"


def _longest_zero_run(words: tuple[int, ...]) -> tuple[int, int]:
    """(start, length) of the longest run of zero words, the first of equal ones; (-1, 0) if none."""
    best, start = (-1, 0), None
    for index, word in enumerate((*words, 1)):  # a sentinel ends a run at the end
        if word == 0 and start is None:
            start = index
        elif word != 0 and start is not None:
            if index - start > best[1]:
                best = (start, index - start)
            start = None
    return best


def uuid_text(raw: bytes) -> str:
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


_TEXTS: dict[str, Callable[[bytes], str]] = {"inet4": inet4_text, "inet6": inet6_text, "uuid": uuid_text}


def address_fix(column: Column) -> Callable[[Any, str | None], Any]:
    """The binlog's bytes of an INET4/INET6/UUID column as the server's text (a SELECT's value passes as it is)."""
    size, text = SIZES[column.data_type], _TEXTS[column.data_type]

    def fix(value: Any, source: str | None) -> Any:
        # The reader may drop a BINARY's trailing zero bytes: put them back before reading the value.
        return text(bytes(value).ljust(size, b"\x00")) if isinstance(value, (bytes, bytearray)) else value

    return fix
