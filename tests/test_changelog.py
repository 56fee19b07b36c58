"""SegmentWriter never seals a segment after a failed write (a partial write would seal a cut line)."""

from __future__ import annotations

import ctypes
import os
import platform
import time
from pathlib import Path

import pytest

from cdc.changelog import WRITEBACK_BYTES, SegmentWriter, list_segments
from cdc.errors import CdcError


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_failed_write_is_never_sealed_and_abandon_clears_it(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path, "tail")
    # The open segment's temp file is /dev/full: every write reaches the device and fails with ENOSPC.
    (tmp_path / f".seg-tail-{os.getpid()}.tmp").symlink_to("/dev/full")
    with pytest.raises(CdcError, match="no space left"):
        writer.write("000001:0000000004:0000", b'{"a":1}\n' * 4096)  # bigger than the buffer: written at once
    with pytest.raises(CdcError, match="no space left"):  # e.g. the flush(force) of tail's wind-down
        writer.seal()
    assert list_segments(tmp_path) == []

    writer.abandon()
    assert not (tmp_path / f".seg-tail-{os.getpid()}.tmp").exists()
    writer.write("000001:0000000004:0000", b'{"a":1}\n')  # a fresh temp file, a normal disk
    sealed = writer.seal()
    assert sealed is not None and sealed.read_bytes() == b'{"a":1}\n'


def test_a_segment_that_could_not_be_opened_is_never_sealed_as_empty(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path / "log", "snapshot")
    (tmp_path / "log").rmdir()
    (tmp_path / "log").write_bytes(b"")  # the temp file cannot be created under a file
    with pytest.raises(NotADirectoryError):
        writer.write("000001:0000000004:0000", b'{"a":1}\n')
    # Not "nothing was written" (None): the caller's checkpoint would then count lines that are nowhere.
    with pytest.raises(NotADirectoryError):
        writer.seal()
    (tmp_path / "log").unlink()
    (tmp_path / "log").mkdir()
    writer.abandon()
    writer.write("000001:0000000004:0000", b'{"a":1}\n')
    sealed = writer.seal()
    assert sealed is not None and sealed.read_bytes() == b'{"a":1}\n'


def _dirty_pages(path: Path) -> int | None:
    """Pages of `path` in the page cache not yet written to disk (Linux cachestat), or None where unknown."""
    libc = ctypes.CDLL(None, use_errno=True)
    whole_file = (ctypes.c_uint64 * 2)(0, 0)  # struct cachestat_range {off, len}: len 0 is to the end
    stats = (ctypes.c_uint64 * 5)()  # struct cachestat: nr_cache, nr_dirty, nr_writeback, nr_evicted, ...
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syscall(451, fd, whole_file, stats, 0) != 0:  # 451: cachestat on x86_64 and arm64
            return None
    finally:
        os.close(fd)
    return int(stats[1])


def _can_see_writeback(directory: Path) -> bool:
    """Whether this kernel reports dirty pages of files here and fsync cleans them (not tmpfs, cachestat known)."""
    probe = directory / "probe"
    with open(probe, "wb") as handle:
        handle.write(b"x" * 65536)
        handle.flush()
        dirty = _dirty_pages(probe)
        os.fsync(handle.fileno())
    clean = _dirty_pages(probe)
    probe.unlink()
    return dirty is not None and dirty > 0 and clean == 0


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="cachestat's number is for these")
def test_a_big_segment_is_on_its_way_to_disk_before_it_is_sealed(tmp_path: Path) -> None:
    if not _can_see_writeback(tmp_path):
        pytest.skip("no cachestat, or a file system without writeback (tmpfs)")
    writer = SegmentWriter(tmp_path, "snapshot")
    line = b'{"a":"' + b"x" * 90 + b'"}\n'  # small writes, as tail makes them: checked per line
    lines = WRITEBACK_BYTES // len(line) + 1
    for n in range(lines):
        writer.write(f"000001:0000000004:{n:04d}", line)
    temp = tmp_path / f".seg-snapshot-{os.getpid()}.tmp"
    # The kernel's own flusher leaves a fresh file's pages dirty for dirty_expire_centisecs (30 s by default):
    # clean within seconds means cdc started the write-back.
    deadline = time.monotonic() + 10
    while _dirty_pages(temp) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _dirty_pages(temp) == 0

    writer.write("000001:0000000005:0000", b'{"b":1}\n')  # below the threshold again: stays in the cache
    sealed = writer.seal()
    assert sealed is not None and sealed.read_bytes() == line * lines + b'{"b":1}\n'
