"""The stages themselves write the golden files byte for byte, driven to the golden values without a server.

Only the far edges are stand-ins (no MariaDB for tail's committer, a sink that acknowledges everything for ship,
a given time for snowflake-apply); the files of real runs are checked against the golden shapes in
tests/checkpoints/test_stage_runs.py (tail, snapshot, ship-s3), tests/spark/test_merge.py (merge) and
tests/snowflake/test_apply.py (snowflake-apply). snapshot.json and merge.json are written by their dataclass
(tests/checkpoints/test_golden.py) from values the stage computes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc import sinks
from cdc.capture.commit import Committer
from cdc.capture.start import Start
from cdc.changelog import SegmentWriter, encode_line, position_string
from cdc.checkpoints import ApplyCheckpoint, ShipKinesisCheckpoint, ShipS3Checkpoint, TailCheckpoint
from cdc.sinks.s3_batches import Batch, RollOptions
from cdc.snowflake.apply import advance_checkpoint
from cdc.source.binlog import Position
from cdc.state import StateDir
from tests.checkpoints.test_golden import CURRENT, GOLDEN


def golden_bytes(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def seal_segments(state: StateDir, positions: list[int], rows: int = 1) -> list[Path]:
    """One sealed segment per position (mariadb-bin.000007:<pos>), each with `rows` changes."""
    writer = SegmentWriter(state.changelog, "test")
    sealed = []
    for pos in positions:
        for row in range(rows):
            at = position_string("mariadb-bin.000007", pos, row)
            writer.write(at, encode_line({"position": at, "op": "c", "db": "shop", "table": "t", "key": {"id": row}}))
        path = writer.seal()
        assert path is not None
        sealed.append(path)
    return sealed


class Acknowledging:
    """A sink that acknowledges every record at once (the far edge: no AWS)."""

    def __init__(self, destination: str, *, crash: bool = False) -> None:
        self.destination, self.crash = destination, crash
        self.options = type("Options", (), {"roll": RollOptions()})()

    def check(self) -> None:
        pass


class AcknowledgingStream(Acknowledging):
    stage = ShipKinesisCheckpoint.STAGE

    def deliver(self, segment: Path, lines: list[bytes], report: sinks.common.Report) -> sinks.Delivery:
        return sinks.Delivery(len(lines), sum(map(len, lines)), 1)


class AcknowledgingBucket(Acknowledging):
    stage = ShipS3Checkpoint.STAGE

    def new_batch(self, segments: list[Path]) -> Batch:
        return Batch(tuple(segments), self.options.roll.size, "gzip")

    def deliver_batch(self, batch: Batch, report: sinks.common.Report) -> sinks.Delivery:
        if self.crash:  # killed after the pin, before the manifest
            raise KeyboardInterrupt
        return sinks.Delivery(len(batch.segments), 1, 1, objects=1)


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


def test_ship_kinesis_writes_the_golden_file(tmp_path: Path) -> None:
    state = StateDir(tmp_path).ensure()
    ShipKinesisCheckpoint("kinesis:orders", None, 11, 4100).write(state)  # 11 segments shipped before
    seal_segments(state, [1234], rows=100)
    summary = sinks.ship(state, AcknowledgingStream("kinesis:orders"))
    assert summary.segments == 1
    assert (tmp_path / "ship-kinesis.json").read_bytes() == golden_bytes("ship-kinesis.v1.json")


def test_ship_s3_pins_the_golden_pending_batch_before_uploading(tmp_path: Path) -> None:
    state = StateDir(tmp_path).ensure()
    seal_segments(state, [1234, 5678, 7000, 9012])
    shipped = ShipS3Checkpoint("s3://lake/cdc", "seg-0000000007-000000001234-b000000000000.jsonl", 12, 3, 4200)
    shipped.write(state)
    with pytest.raises(KeyboardInterrupt):
        sinks.ship(state, AcknowledgingBucket("s3://lake/cdc", crash=True))
    assert (tmp_path / "ship-s3.json").read_bytes() == golden_bytes("ship-s3.v2.json")
    sinks.ship(state, AcknowledgingBucket("s3://lake/cdc"))
    assert ShipS3Checkpoint.read(state) == ShipS3Checkpoint(
        "s3://lake/cdc", "seg-0000000007-000000009012-b000000000000.jsonl", 15, 4, 4203, None)


def test_ship_s3_moves_a_golden_v1_file_to_v2(tmp_path: Path) -> None:
    shipped: Any = CURRENT["ship-s3.v2.json"]
    state = StateDir(tmp_path).ensure()
    (tmp_path / "ship-s3.json").write_bytes(golden_bytes("ship-s3.v1.json"))
    seal_segments(state, [1234, 5678, 7000, 9012])
    with pytest.raises(KeyboardInterrupt):
        sinks.ship(state, AcknowledgingBucket(shipped.destination, crash=True))
    # The golden v1 file has 12 segments, 12 batches: after the pin only `batches` differs from the golden v2.
    assert ShipS3Checkpoint.read(state) == ShipS3Checkpoint(
        shipped.destination, shipped.last_segment, 12, 12, 4200, shipped.pending)


def test_snowflake_apply_writes_the_golden_file(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    advance_checkpoint(state, "b000000000007", now=1795330809.0)  # 2026-11-22T07:00:09Z
    assert (tmp_path / "snowflake-apply.json").read_bytes() == golden_bytes("snowflake-apply.v1.json")
    advance_checkpoint(state, "b000000000006", now=1795330999.0)  # applied late: the checkpoint never moves back
    assert ApplyCheckpoint.read(state) == CURRENT["snowflake-apply.v1.json"]
