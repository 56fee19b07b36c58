"""The stages themselves write the golden files byte for byte, driven to the golden values without a server.

Only the far edges are stand-ins (no MariaDB for tail's committer, a sink that acknowledges everything for ship);
the real stages' files are checked against the golden shapes in tests/capture/test_checkpoint_golden.py,
tests/spark and tests/snowflake.
"""

from __future__ import annotations

from pathlib import Path

from cdc.capture.commit import Committer
from cdc.capture.start import Start
from cdc.checkpoints import TailCheckpoint
from cdc.source.binlog import Position
from cdc.state import StateDir
from tests.checkpoints.test_golden import CURRENT, GOLDEN


def test_tail_writes_the_golden_file(tmp_path: Path) -> None:
    golden = CURRENT["tail.v2.json"]
    assert isinstance(golden, TailCheckpoint)
    state = StateDir(tmp_path).ensure()
    start = Start(Position(golden.file, golden.pos), golden.gtid, golden.last_segment, "checkpoint", golden.gtid_state,
                  golden.seq_offset, golden.skip_gtids)
    committer = Committer(state, start, str(golden.server_uuid), flush_interval=0, segment_bytes=1 << 20,
                          spill_bytes=1 << 20)
    try:
        committer.flush(force=True)  # a first run checkpoints at once
    finally:
        committer.close()
    assert (tmp_path / "tail.json").read_bytes() == (GOLDEN / "tail.v2.json").read_bytes()
