"""Tail reuses its freed buffers' pages: its fresh-page faults do not grow with the binlog it decodes (issue #28).

Without cdc.capture.heap, glibc unmapped (or trimmed) tail's multi-megabyte buffers at every free and the
next one was faulted in again page by page: here the 40,000 more rows cost 6,293 more faults without it, 118 with.
A fault count of the same run is the same from one run to the next (no timing involved).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.conftest import ROOT, binlog_start, changelog_lines, env_for
from tests.rig import MariaDB

# ~330-byte rows: a 48-byte name, a small JSON document and a 128-byte BLOB; the inserts batched as bench_tail does.
ROW_SQL = ("SELECT seq + {offset}, CONCAT('customer ', seq, ' Zoë 🎉 ', MD5(seq)), "
           "JSON_OBJECT('k', seq, 'tags', JSON_ARRAY('a', 'b')), UNHEX(REPEAT(MD5(seq), 8))")


def _write(mariadb: MariaDB, db: str, rows: int, offset: int) -> None:
    for first in range(0, rows, 5000):
        sql = ROW_SQL.format(offset=offset)
        mariadb.execute(f"INSERT INTO `{db}`.t {sql} FROM `{db}`.seq_{first + 1}_to_{min(first + 5000, rows)}")


def _tail_faults(mariadb: MariaDB, db: str, state: Path, start: str) -> int:
    """Minor page faults of `cdc tail --until-now --decode-workers 0` run as a user runs it."""
    argv = [sys.executable, "-m", "cdc", "tail", "--until-now", "--decode-workers", "0", "--databases", db,
            "--start-position", start, "--state-dir", str(state)]
    log = state.with_suffix(".log")  # a file, not a pipe: wait4 does not read a pipe that could fill
    with open(log, "wb") as err:
        child = subprocess.Popen(argv, cwd=ROOT, env=env_for(mariadb), stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, log.read_text()[-3000:]
    return usage.ru_minflt


def test_tail_page_faults_do_not_grow_with_the_binlog(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, name VARCHAR(64), doc JSON, payload BLOB) "
                    "DEFAULT CHARSET=utf8mb4")
    faults = {}
    for rows in (10_000, 50_000):
        start = binlog_start(mariadb)
        _write(mariadb, fresh_db, rows, offset=rows * 10)
        state = tmp_path / str(rows)
        faults[rows] = _tail_faults(mariadb, fresh_db, state, start)
        assert len(changelog_lines(state)) == rows
    # The interpreter's start-up and imports are the same in both runs; the 40,000 more rows may cost a few
    # hundred fresh pages, not one per few rows.
    assert faults[50_000] - faults[10_000] < 2_000, faults


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_thresholds_are_taken_on_glibc() -> None:
    # On glibc the setting must not silently do nothing. In a child: the thresholds are the whole process's.
    code = "from cdc.capture.heap import keep_freed_heap; raise SystemExit(0 if keep_freed_heap() else 3)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
