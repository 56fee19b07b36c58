"""The snapshot's write queue: lines are written when the reader is idle (or past the byte bound), each
segment is sealed only after its own lines and before its checkpoint, and the wire asks for idle work only
while nothing waits on the socket."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc.changelog import segment_name
from cdc.snapshot.checkpoint import STAGE
from cdc.snapshot.seal import QUEUED_BYTES, ChunkSealer
from cdc.snapshot.wire import read_rows
from cdc.source.tables import RAW_CONVERSIONS
from cdc.state import StateDir
from tests.rig import MariaDB
from tests.snapshot.test_lines import _reader


def _block(first: int, count: int, width: int = 10) -> bytes:
    return b"".join(b'{"n":%d,"pad":"%s"}\n' % (n, b"x" * width) for n in range(first, first + count))


def _files(state: StateDir) -> list[str]:
    return sorted(p.name for p in state.changelog.iterdir())


def _idle_for(jobs: int) -> Callable[[], bool]:
    """An idle check that says "idle" `jobs` times, then "bytes are waiting"."""
    left = [jobs]

    def idle() -> bool:
        left[0] -= 1
        return left[0] >= 0

    return idle


def test_lines_wait_for_an_idle_reader_and_each_seal_follows_its_own_lines(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    sealer = ChunkSealer(state)
    try:
        first, second = segment_name("p-000"), segment_name("p-005")
        sealer.write("p-000", _block(0, 3), 3)
        sealer.write("p-003", _block(3, 2), 2)
        sealer.commit({"version": 1, "rows": 5}, seal=True)
        sealer.write("p-005", _block(5, 4), 4)
        sealer.commit({"version": 1, "rows": 9}, seal=True)
        assert _files(state) == [] and state.read_checkpoint(STAGE, 1) is None  # all queued, nothing written

        sealer.write_while(lambda: False)  # the socket has bytes: the reader goes back to it
        assert _files(state) == []

        sealer.write_while(_idle_for(1))  # one job: the first block, into a temp file
        assert len(_files(state)) == 1 and _files(state)[0].startswith(".seg-")
        assert state.read_checkpoint(STAGE, 1) is None

        sealer.write_while(_idle_for(2))  # the second block, then the first chunk's seal is handed over
        sealer.wait()  # everything else, in order, and the seal in flight
        assert state.read_checkpoint(STAGE, 1) == {"version": 1, "rows": 9}
        assert [f for f in _files(state) if f.startswith("seg-")] == [first, second]
        assert (state.changelog / first).read_bytes() == _block(0, 5)
        assert (state.changelog / second).read_bytes() == _block(5, 4)
        assert not [f for f in _files(state) if f.endswith(".tmp")]
    finally:
        sealer.close()


def test_past_the_byte_bound_the_oldest_lines_are_written_without_waiting_for_idle(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    sealer = ChunkSealer(state)
    try:
        block = _block(0, 1000, width=1000)  # ~1 MB
        blocks = QUEUED_BYTES // len(block) + 3
        for i in range(blocks):
            sealer.write(f"p-{i:03d}", block, 1000)
        temp = [p for p in state.changelog.iterdir() if p.name.endswith(".tmp")]
        assert len(temp) == 1
        written = temp[0].stat().st_size
        # what is still queued is at most the bound: the rest went to the file
        assert blocks * len(block) - QUEUED_BYTES <= written <= 4 * len(block)
        sealer.commit({"version": 1, "rows": blocks * 1000}, seal=True)
        sealer.wait()
        (segment,) = [p for p in state.changelog.iterdir() if p.name.startswith("seg-")]
        assert segment.read_bytes() == block * blocks
    finally:
        sealer.close()


def test_a_failed_write_is_raised_to_the_reader_and_nothing_is_sealed(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    sealer = ChunkSealer(state)
    sealer.write("p-000", _block(0, 3), 3)
    sealer.commit({"version": 1, "rows": 3}, seal=True)
    moved = tmp_path / "changelog-moved"
    state.changelog.rename(moved)
    state.changelog.write_bytes(b"")  # the segment's temp file cannot be created under a file
    try:
        with pytest.raises(NotADirectoryError):
            sealer.write_while(lambda: True)
    finally:
        state.changelog.unlink()
        moved.rename(state.changelog)
    with pytest.raises(NotADirectoryError):
        sealer.close()  # the queued seal is never reached: its segment lacks lines
    assert _files(state) == []
    assert state.read_checkpoint(STAGE, 1) is None


def test_the_wire_asks_for_idle_work_only_while_the_server_sends_nothing(mariadb: MariaDB, fresh_db: str) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40))", database=fresh_db)
    mariadb.execute("INSERT INTO t SELECT seq, REPEAT('v', 40) FROM seq_1_to_3000", database=fresh_db)
    conn = mariadb.connect(conv=RAW_CONVERSIONS)
    try:
        sql, compiled_for = _reader(conn, fresh_db, "t")
        # The server sends the first ~1,500 rows (its 16 KiB buffer flushes as it fills), then sleeps.
        sql = sql.replace(" ORDER BY ", " WHERE SLEEP(IF(`id` = 1500, 0.6, 0)) = 0 ORDER BY ", 1)
        seen: list[tuple[bool, bool]] = []  # per call: (nothing to read at the call, and after any wait)
        blocks: list[bytes] = []
        waited = [False]

        def on_idle(nothing_to_read: Callable[[], bool]) -> None:
            before = nothing_to_read()
            if before and not waited[0] and b"".join(blocks).count(b"\n") >= 1000:
                waited[0] = True  # the server is asleep: wait (up to 10 s, for a loaded machine) for the rest
                deadline = time.monotonic() + 10
                while nothing_to_read() and time.monotonic() < deadline:
                    time.sleep(0.05)
            seen.append((before, nothing_to_read()))

        count, _ = read_rows(conn, sql, None, compiled_for, 0, lambda n, c, batch: blocks.extend(batch), on_idle)
    finally:
        conn.close()
    assert count == 3000 and b"".join(blocks).count(b"\n") == 3000
    assert (True, False) in seen, seen  # idle while the server slept; not once the rest had arrived
