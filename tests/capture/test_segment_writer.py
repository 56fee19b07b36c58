"""SegmentWriter never seals a segment after a failed write (a partial write would seal a cut line)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdc.changelog import SegmentWriter, list_segments
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
