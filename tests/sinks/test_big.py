"""200,000 change records to Kinesis and to S3 (slow: run with -m slow)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from cdc import sinks
from cdc.config import AWSSettings
from cdc.state import StateDir
from tests.sinks.aws_fixtures import unique
from tests.sinks.changes import lines_of, make_changes, read_s3_lines, write_changelog

pytestmark = pytest.mark.slow
COUNT = 200_000


def test_200k_records_to_kinesis_and_s3(aws: AWSSettings, bucket, kinesis, s3, tmp_path: Path) -> None:
    # 16 shards: moto appends a record in time linear in its shard's length, so fewer records per shard
    # keep this test at minutes (Kinesis itself has no such cost).
    stream = unique("big")
    kinesis.create_stream(StreamName=stream, ShardCount=16)
    kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    changes = make_changes(COUNT, big_every=9973)
    expected = lines_of(changes)
    for kind in ("kinesis", "s3"):
        write_changelog(tmp_path / kind / "changelog", changes, per_segment=20_000)
    target = AWSSettings(**{**aws.__dict__, "stream": stream, "bucket": bucket, "prefix": "big"})
    for kind in ("kinesis", "s3"):
        summary = sinks.ship(StateDir(tmp_path / kind), sinks.open_sink(target, sinks.ShipTarget(to=kind)))
        assert (summary.records, summary.remaining) == (COUNT, 0)
    for received in (Counter(sinks.read_stream(kinesis, stream)), read_s3_lines(s3, bucket, "big/")[0]):
        assert received == expected  # as a multiset: nothing missing, nothing doubled, nothing foreign
        # the consumer's dedup (docs/guide.md, "Deduplicating downstream"): first record per position, exactly once each
        by_position = {orjson.loads(line)["position"]: line for line in received}
        assert len(by_position) == COUNT and Counter(by_position.values()) == expected
