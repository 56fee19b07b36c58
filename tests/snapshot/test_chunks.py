"""ChunkCutter: blocks of lines from one SELECT cut into chunks of exactly chunk_size rows."""

from __future__ import annotations

import pytest

from cdc.snapshot.chunks import ChunkCutter


def _cut(blocks: list[list[bytes]], chunk_size: int | None, done: bool = True) -> tuple[list[bytes], list[tuple]]:
    """Feed the blocks; return the chunks as written (joined between seals) and the seal calls."""
    chunks: list[bytes] = [b""]
    seals: list[tuple] = []
    rows = [0]

    def write(first_row: int, lines: bytes, count: int) -> None:
        assert first_row == rows[0] and lines.count(b"\n") == count
        rows[0] += count
        chunks[-1] += lines

    def seal(count: int, last: bytes | None, table_done: bool) -> None:
        assert chunks[-1].count(b"\n") == count
        seals.append((count, last, table_done))
        chunks.append(b"")

    cutter = ChunkCutter(chunk_size, write, seal)
    first = 0
    for block in blocks:
        cutter.write(first, sum(b.count(b"\n") for b in block), block)
        first += sum(b.count(b"\n") for b in block)
    cutter.finish(done=done)
    return [c for c in chunks if c], seals


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 10, 25, 100])
@pytest.mark.parametrize("block_sizes", [[25], [1] * 25, [4, 9, 1, 11], [10, 10, 5]])
def test_chunks_are_exact_whatever_the_blocks(chunk_size: int, block_sizes: list[int]) -> None:
    lines = [b'{"n":%d}\n' % i for i in range(sum(block_sizes))]
    blocks, at = [], 0
    for size in block_sizes:  # the C reader's one bytes object per block
        blocks.append([b"".join(lines[at:at + size])])
        at += size
    chunks, seals = _cut(blocks, chunk_size)
    assert b"".join(chunks) == b"".join(lines)
    expected = [lines[i:i + chunk_size] for i in range(0, len(lines), chunk_size)]
    assert [c.splitlines(keepends=True) for c in chunks] == expected
    sealed = [(len(e), e[-1], False) for e in expected]
    if len(expected[-1]) == chunk_size:
        sealed.append((0, None, True))  # the table ended on a chunk's end: done is its own checkpoint
    else:
        sealed[-1] = (len(expected[-1]), expected[-1][-1], True)
    assert seals == sealed


def test_python_reader_lines_and_no_key() -> None:
    # The Python reader hands one bytes object per line; a table without a key is one chunk.
    lines = [b"a\n", b"b\n", b"c\n"]
    assert _cut([lines], None) == ([b"a\nb\nc\n"], [(3, b"c\n", True)])
    assert _cut([lines], 2, done=False) == ([b"a\nb\n", b"c\n"], [(2, b"b\n", False), (1, b"c\n", False)])
    assert _cut([], 2) == ([], [(0, None, True)])
