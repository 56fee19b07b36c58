"""Cut the lines of one snapshot SELECT into chunks of exactly `chunk_size` rows.

A table is read with one streaming SELECT (a query per chunk left the server idle while the client
drained each chunk), but the checkpoint still advances per chunk: each chunk is one sealed segment
whose last key a resumed run starts after. The compiled reader hands over lines in blocks; a block
that crosses a chunk's end is split at the line where the chunk ends.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc.snapshot.wire import last_line

WriteFn = Callable[[int, bytes, int], None]  # (row number of the first line, whole lines, how many)
SealFn = Callable[[int, "bytes | None", bool], None]  # (rows in the chunk, its last line, the table is done)


class ChunkCutter:
    """A read_rows sink: `write` each block of lines, `seal` every `chunk_size` rows (None: never)."""

    def __init__(self, chunk_size: int | None, write: WriteFn, seal: SealFn) -> None:
        self.chunk_size, self._write, self._seal = chunk_size, write, seal
        self.rows = 0  # in the open chunk
        self.last_block = b""  # ends with the open chunk's last line

    def write(self, first_row: int, count: int, lines: list[bytes]) -> None:
        data = lines[0] if len(lines) == 1 else b"".join(lines)
        while count:
            room = count if self.chunk_size is None else self.chunk_size - self.rows
            taken = min(count, room)
            head, data = (data, b"") if taken == count else split_lines(data, taken)
            self._write(first_row, head, taken)
            self.rows, self.last_block = self.rows + taken, head
            first_row, count = first_row + taken, count - taken
            if self.rows == self.chunk_size:
                self._close(done=False)

    def finish(self, *, done: bool) -> None:
        """Seal the open chunk (the table's last when `done`; with no rows, only when `done`)."""
        if self.rows or done:
            self._close(done=done)

    def _close(self, *, done: bool) -> None:
        count, self.rows = self.rows, 0
        self._seal(count, last_line(self.last_block) if count else None, done)


def split_lines(data: bytes, count: int) -> tuple[bytes, bytes]:
    """(the first `count` lines of `data`, the rest); every line ends with a newline."""
    end = 0
    for _ in range(count):
        end = data.index(b"\n", end) + 1
    return data[:end], data[end:]
