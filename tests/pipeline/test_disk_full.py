"""A full disk under the state directory: a clear error, nothing advanced, and a clean resume once there is room.

The state directory lives on a tiny tmpfs (needs root to mount, as CI has); a filler file leaves a few
KiB free, so tail and ship run out of space in the middle of their work.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.capture.conftest import binlog_start, changelog_lines, env_for
from tests.capture.workload import create_all_types_table, expected_rows, replay, run_workload
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.rig import MariaDB


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the disk-full test needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill `disk` up to `leave` free bytes."""
    filler = disk / "filler"
    stats = os.statvfs(disk)
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(stats.f_bavail * stats.f_frsize - leave, 0))
    return filler


def tail(server: MariaDB, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = cdc_argv(Path("/nonexistent/cdc.toml"), "tail", "--until-now", "--state-dir", str(state), *args)[:-2]
    return subprocess.run(argv, cwd=ROOT, env=env_for(server), capture_output=True, text=True, timeout=120)


def test_tail_on_a_full_disk_stops_clearly_and_resumes(mariadb: MariaDB, fresh_db: str, small_disk: Path) -> None:
    state = small_disk / "state"
    start = binlog_start(mariadb)
    with mariadb.connect(autocommit=False) as conn:
        create_all_types_table(conn, fresh_db)
        run_workload(conn, fresh_db, seed=5, transactions=20)
    first = tail(mariadb, state, "--start-position", start, "--databases", fresh_db)
    assert first.returncode == 0, first.stderr
    checkpoint = (state / "tail.json").read_bytes()

    with mariadb.connect(autocommit=False) as conn:
        run_workload(conn, fresh_db, seed=6, transactions=60, first_key=10_000)  # far more than a few KiB
    filler = fill(small_disk, leave=8 * 1024)
    full = tail(mariadb, state)
    assert full.returncode == 1, full.stderr
    message = " ".join(full.stderr.split())
    assert "no space left" in message.lower() and str(state) in message, message
    assert "Traceback" not in full.stderr
    assert (state / "tail.json").read_bytes() == checkpoint, "tail advanced its checkpoint past unwritten data"

    filler.unlink()
    resumed = tail(mariadb, state)
    assert resumed.returncode == 0, resumed.stderr
    with mariadb.connect() as conn:
        assert replay(changelog_lines(state), fresh_db, "all_types") == expected_rows(conn, fresh_db, "all_types")


def snapshot(server: MariaDB, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = cdc_argv(Path("/nonexistent/cdc.toml"), "snapshot", "--state-dir", str(state), *args)[:-2]
    return subprocess.run(argv, cwd=ROOT, env=env_for(server), capture_output=True, text=True, timeout=120)


def test_snapshot_on_a_full_disk_stops_clearly_and_resumes(mariadb: MariaDB, fresh_db: str, small_disk: Path) -> None:
    # Room for the runway probe's few KiB, not for the copy: the first chunks are written, then ENOSPC.
    with mariadb.connect(autocommit=False) as conn:
        create_all_types_table(conn, fresh_db)
        run_workload(conn, fresh_db, seed=7, transactions=80)
    state = small_disk / "state"
    filler = fill(small_disk, leave=24 * 1024)
    full = snapshot(mariadb, state, "--databases", fresh_db, "--chunk-size", "20")
    assert full.returncode == 1, full.stderr
    message = " ".join(full.stderr.split())
    assert "no space left" in message.lower() and str(state) in message, message
    assert "Traceback" not in full.stderr

    filler.unlink()
    resumed = snapshot(mariadb, state, "--databases", fresh_db, "--chunk-size", "20")
    assert resumed.returncode == 0, resumed.stderr
    with mariadb.connect() as conn:
        assert replay(changelog_lines(state), fresh_db, "all_types") == expected_rows(conn, fresh_db, "all_types")
