"""A huge transaction does not live in memory: tail's peak allocation is the same for 5,000 and 60,000 rows."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from tests.capture.conftest import binlog_start, changelog_lines, tail_once
from tests.rig import MariaDB

SPILL = 256 * 1024  # the transaction buffer's in-memory bound for this test (default 32 MiB)


def _peak_bytes(mariadb: MariaDB, db: str, state: Path, start: str) -> int:
    tracemalloc.start()
    try:
        tail_once(mariadb, state, db, start, spill_bytes=SPILL, segment_bytes=SPILL)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_transaction(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, pad VARCHAR(100))")
    peaks = []
    for rows in (5_000, 60_000):
        start = binlog_start(mariadb)
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t SELECT seq + {rows * 10}, REPEAT('p', 100) "
                        f"FROM `{fresh_db}`.seq_1_to_{rows}")  # one transaction
        state = tmp_path / str(rows)
        peaks.append(_peak_bytes(mariadb, fresh_db, state, start))
        assert len(changelog_lines(state)) == rows
    # 60,000 lines of ~200 bytes held at once would be 12 MB more (before Python's per-object overhead).
    assert peaks[1] < peaks[0] + 3 * 2**20, peaks
