"""Rows per second over the last minute: writers from their segments' seal times, consumers from samples of their
checkpoints while watching."""

from __future__ import annotations

import os

from cdc.pipeline.local import read_local
from cdc.pipeline.rates import RowRates
from cdc.state import StateDir
from tests.pipeline.conftest import BINLOG, change, checkpoint, write_segments

NOW = 1_800_000_000.0


def test_a_consumer_rate_comes_from_successive_samples(state: StateDir) -> None:
    segs = write_segments(state, [[change(100)], [change(200), change(200, 1)], [change(300)], [change(400)]])
    checkpoint(state, "tail", file=BINLOG, pos=500, gtid=None, last_segment=segs[3].name, server_uuid="u")
    rates = RowRates()

    def ship_at(index: int, when: float) -> float | None:
        checkpoint(state, "ship-s3", last_segment=segs[index].name, destination="s3://lake/cdc")
        return rates.measure(read_local(state), when)["ship-s3"]

    assert ship_at(0, NOW) is None  # one sample: a checkpoint says where, not since when
    assert ship_at(1, NOW + 2) == 2 / 2
    assert ship_at(2, NOW + 4) == 3 / 4
    assert ship_at(2, NOW + 30) == 3 / 30
    assert ship_at(3, NOW + 61) == (4 - 2) / 59  # the samples of the last minute: NOW + 2 on
    assert ship_at(0, NOW + 62) is None  # the checkpoint went back (restored): a new series
    assert rates.measure(read_local(state), NOW + 63)["ship-s3"] == 0.0
    assert "spark-merge" not in rates.measure(read_local(state), NOW + 64)  # no checkpoint: no figure


def test_a_writer_rate_counts_the_lines_sealed_in_the_last_minute(state: StateDir) -> None:
    # 40 old segments, then 3 recent ones: the walk back from the newest stops in the old ones
    old = [[change(100 + i)] for i in range(40)]
    segs = write_segments(state, old + [[change(900 + i), change(900 + i, 1)] for i in range(3)])
    for i, seg in enumerate(segs):
        when = NOW - 10 if i >= 40 else NOW - 3600 + i
        os.utime(seg, (when, when))
    checkpoint(state, "tail", file=BINLOG, pos=1000, gtid=None, last_segment=segs[-1].name, server_uuid="u")
    rates = RowRates()
    assert rates.measure(read_local(state), NOW) == {"tail": 6 / 60}
    assert rates.measure(read_local(state), NOW + 55) == {"tail": 0.0}
