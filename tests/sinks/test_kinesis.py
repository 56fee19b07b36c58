"""Kinesis sink against moto's server: batching, partial failures, limits, oversize records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc import sinks
from cdc.changelog import read_raw_lines
from cdc.config import AWSSettings
from cdc.errors import CdcError, DataError, ExitCode, TransientError
from cdc.sinks.kinesis import MAX_BATCH_BYTES, MAX_BATCH_RECORDS, partition_key
from cdc.state import StateDir
from tests.rig.faultproxy import FaultProxy
from tests.sinks.changes import lines_of, make_changes, read_s3_lines, write_changelog


def kinesis_sink(aws: AWSSettings, stream: str, **target: Any) -> sinks.KinesisSink:
    sink = sinks.open_sink(AWSSettings(**{**aws.__dict__, "stream": stream}), sinks.ShipTarget(to="kinesis", **target))
    assert isinstance(sink, sinks.KinesisSink)
    sink.options = type(sink.options)(**{**sink.options.__dict__, "retry_base": 0.001})  # fast resubmits
    return sink


class PutRecordsRecorder:
    """Records every PutRecords request; optionally fails chosen entries the way Kinesis does.

    The failed entries are taken out of the request before it is sent (so they really do not
    land, as with a throttled shard) and put back into the parsed response as
    ProvisionedThroughputExceededException results at their original index.
    """

    def __init__(self, client: Any, fail_plan: list[set[int]] | None = None) -> None:
        self.requests: list[list[bytes]] = []
        self.plan = list(fail_plan or [])
        self._failed: list[int] = []
        client.meta.events.register("provide-client-params.kinesis.PutRecords", self.before)
        client.meta.events.register("after-call.kinesis.PutRecords", self.after)

    def before(self, params: dict[str, Any], **_: Any) -> None:
        entries = params["Records"]
        self.requests.append([bytes(e["Data"]) for e in entries])
        fail = self.plan.pop(0) if self.plan else set()
        self._failed = sorted(i for i in fail if i < len(entries))
        params["Records"] = [e for i, e in enumerate(entries) if i not in fail]

    def after(self, parsed: dict[str, Any], **_: Any) -> None:
        for index in self._failed:
            parsed["Records"].insert(index, {"ErrorCode": "ProvisionedThroughputExceededException",
                                             "ErrorMessage": "Rate exceeded for shard shardId-000000000000"})
        parsed["FailedRecordCount"] = len(self._failed)


def test_ship_to_kinesis_delivers_every_line_exactly_once(aws, stream, kinesis, state_dir: Path) -> None:
    changes = make_changes(5000, big_every=997)
    segments = write_changelog(state_dir / "changelog", changes)
    sink = kinesis_sink(aws, stream)
    recorder = PutRecordsRecorder(sink.client)

    summary = sinks.ship(StateDir(state_dir), sink)

    assert Counter(sinks.read_stream(kinesis, stream)) == lines_of(changes)
    assert (summary.segments, summary.records, summary.remaining) == (len(segments), 5000, 0)
    assert all(len(r) <= MAX_BATCH_RECORDS for r in recorder.requests)
    assert summary.requests == len(recorder.requests) < 5000 / 100
    checkpoint = json.loads((state_dir / "ship-kinesis.json").read_text())
    assert checkpoint == {"version": 1, "destination": f"kinesis:{stream}", "last_segment": segments[-1].name,
                          "segments": len(segments), "records": 5000}
    again = sinks.ship(StateDir(state_dir), sink)  # nothing new: nothing sent
    assert (again.segments, again.requests, len(recorder.requests)) == (0, 0, summary.requests)


def test_partial_failures_resubmit_exactly_the_failed_entries(aws, stream, kinesis, state_dir: Path) -> None:
    changes = make_changes(1200)
    write_changelog(state_dir / "changelog", changes, per_segment=2000)  # one segment: 500 + 500 + 200
    sink = kinesis_sink(aws, stream)
    recorder = PutRecordsRecorder(sink.client, fail_plan=[{0, 7, 499}, {1}, set(), {3, 4, 150}])

    summary = sinks.ship(StateDir(state_dir), sink)

    sent = recorder.requests
    assert [len(r) for r in sent] == [500, 3, 1, 500, 3, 200]
    assert sent[1] == [sent[0][0], sent[0][7], sent[0][499]]  # only the failed ones, in order
    assert sent[2] == [sent[1][1]]  # then only what failed again
    assert sent[4] == [sent[3][3], sent[3][4], sent[3][150]]
    assert Counter(sinks.read_stream(kinesis, stream)) == lines_of(changes)  # nothing lost, nothing doubled
    assert (summary.records, summary.requests) == (1200, 6)


def test_batches_respect_the_five_mib_request_limit(aws, stream, kinesis, state_dir: Path) -> None:
    changes = make_changes(60, big_every=1, big_size=300_000)  # every line ~300 kB -> ~17 per request
    write_changelog(state_dir / "changelog", changes, per_segment=1000)
    sink = kinesis_sink(aws, stream)
    recorder = PutRecordsRecorder(sink.client)
    sinks.ship(StateDir(state_dir), sink)
    assert all(sum(map(len, r)) <= MAX_BATCH_BYTES for r in recorder.requests)
    sizes = [sum(map(len, r)) for r in recorder.requests]
    # greedy: the next request's first record would not have fitted into the previous request
    assert all(sizes[i] + len(recorder.requests[i + 1][0]) + 1024 > MAX_BATCH_BYTES for i in range(len(sizes) - 1))
    assert len(recorder.requests) > 1
    assert Counter(sinks.read_stream(kinesis, stream)) == lines_of(changes)


def _limit_stream_to(client: Any, kib: int) -> None:
    def rewrite(parsed: dict[str, Any], **_: Any) -> None:
        parsed["StreamDescriptionSummary"]["MaxRecordSizeInKiB"] = kib

    client.meta.events.register("after-call.kinesis.DescribeStreamSummary", rewrite)


def test_record_over_the_streams_limit_stops_with_table_key_and_position(aws, stream, state_dir: Path) -> None:
    changes = make_changes(30, big_every=20, big_size=80_000)
    write_changelog(state_dir / "changelog", changes, per_segment=1000)
    sink = kinesis_sink(aws, stream)
    _limit_stream_to(sink.client, 64)  # the limit is read from the stream, not hard-coded
    with pytest.raises(DataError) as caught:
        sinks.ship(StateDir(state_dir), sink)
    big = changes[19]
    message = str(caught.value)
    assert big["position"] in message and f"{big['db']}.{big['table']}" in message and '{"id":' in message
    assert "--oversize" in message
    assert not (state_dir / "ship-kinesis.json").exists()


def test_oversize_records_go_to_s3_behind_a_pointer(aws, stream, kinesis, s3, bucket, state_dir: Path) -> None:
    changes = make_changes(30, big_every=20, big_size=80_000)
    write_changelog(state_dir / "changelog", changes, per_segment=1000)
    sink = kinesis_sink(aws, stream, oversize_url=f"s3://{bucket}/big")
    _limit_stream_to(sink.client, 64)
    sinks.ship(StateDir(state_dir), sink)

    received = [orjson.loads(data) for data in sinks.read_stream(kinesis, stream)]
    pointers = [r for r in received if "oversize" in r]
    assert [p["position"] for p in pointers] == [changes[19]["position"]]
    parked, _ = read_s3_lines(s3, bucket, "big/_oversize/")
    assert parked == lines_of([changes[19]])
    assert pointers[0]["oversize"]["url"].startswith(f"s3://{bucket}/big/_oversize/seg-")
    rest = Counter(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in received if "oversize" not in r)
    assert rest == lines_of(changes[:19] + changes[20:])


def test_missing_stream_is_a_permanent_error(aws, state_dir: Path) -> None:
    write_changelog(state_dir / "changelog", make_changes(10))
    sink = kinesis_sink(aws, "no-such-stream")
    with pytest.raises(CdcError) as caught:
        sinks.ship(StateDir(state_dir), sink)
    assert "no-such-stream" in str(caught.value) and "create-stream" in str(caught.value)
    assert caught.value.exit_code == 1


@pytest.mark.parametrize(
    ("by", "change", "expected"),
    [
        ("pk", {"db": "shop", "table": "t", "key": {"b": 2, "a": "x"}}, 'shop.t:{"a":"x","b":2}'),
        ("pk", {"db": "shop", "table": "t", "key": None, "op": "ddl"}, "shop.t"),
        ("table", {"db": "shop", "table": "t", "key": {"id": 1}}, "shop.t"),
        ("transaction", {"db": "s", "table": "t", "src": {"gtid": "0-1-9", "file": "f.1", "xid": 3}}, "0-1-9"),
        ("transaction", {"db": "s", "table": "t", "src": {"gtid": None, "file": "f.000001", "xid": 3}}, "f.000001:3"),
    ],
)
def test_partition_key(by: str, change: dict[str, Any], expected: str) -> None:
    assert partition_key(change, by) == expected


def test_long_partition_keys_are_hashed() -> None:
    key = partition_key({"db": "d", "table": "t", "key": {"id": "é" * 300}}, "pk")
    assert key.startswith("sha256:") and len(key) == 71


def test_entries_still_failing_after_every_round_leave_the_checkpoint(aws, stream, kinesis, state_dir: Path) -> None:
    """Two segments; every entry of the second is throttled every time: the first is checkpointed, the second not."""
    from botocore.awsrequest import AWSResponse

    changes = make_changes(40)
    segments = write_changelog(state_dir / "changelog", changes, per_segment=20)
    sink = kinesis_sink(aws, stream)
    sink.options = type(sink.options)(**{**sink.options.__dict__, "max_rounds": 3})
    sizes: list[int] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        sizes.append(len(params["Records"]))

    def throttle(**_: Any) -> Any:  # answered without sending, as a throttled shard would
        if len(sizes) == 1:
            return None
        failed = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded"}
        return AWSResponse("", 200, {}, None), {"FailedRecordCount": sizes[-1], "Records": [failed] * sizes[-1]}

    sink.client.meta.events.register("provide-client-params.kinesis.PutRecords", note)
    sink.client.meta.events.register("before-call.kinesis.PutRecords", throttle)
    first = len(list(read_raw_lines(segments[0])))
    with pytest.raises(CdcError, match="still throttled after 3 resubmissions") as caught:
        sinks.ship(StateDir(state_dir), sink)
    assert caught.value.exit_code == ExitCode.TRANSIENT and "update-shard-count" in str(caught.value)
    assert sizes == [first] + [len(changes) - first] * 4
    checkpoint = json.loads((state_dir / "ship-kinesis.json").read_text())
    assert checkpoint["last_segment"] == segments[0].name and checkpoint["records"] == first
    assert Counter(sinks.read_stream(kinesis, stream)) == lines_of(changes[:first])


def test_an_answer_cut_mid_body_is_transient_and_reruns_deliver_every_record(aws, stream, kinesis,
                                                                               state_dir: Path) -> None:
    """Found by CI's network-fault run: a reset cut a PutRecords answer in its body. botocore reads answers without
    checking Content-Length and parses the cut JSON as {"message": ...}, so ship died on KeyError 'Records' (exit 1).
    A cut answer is transient (exit 10), whichever request of the run it strikes; reruns end with every record
    delivered (at least once; exactly once per position for a consumer's dedup)."""
    changes = make_changes(3000)
    write_changelog(state_dir / "changelog", changes, per_segment=500)
    host, port = aws.endpoint_url.removeprefix("http://").split(":")
    with FaultProxy(host, int(port)) as proxy:
        sink = kinesis_sink(AWSSettings(**{**aws.__dict__, "endpoint_url": proxy.url}), stream)
        # Ended by a FIN (a half-close), not an RST: the client reads a clean end of stream, and botocore takes
        # the bytes it has for the answer. moto answers one request per connection: the first (DescribeStream-
        # Summary, ~0.5 KB) passes, the second is the first PutRecords (~30 KB), cut in its body.
        for budget in (2_000, 10_000, 25_000):
            proxy.reset_next([budget, budget], fin=True)
            with pytest.raises(TransientError, match="was cut short") as caught:
                sinks.ship(StateDir(state_dir), sink)
            assert caught.value.exit_code == ExitCode.TRANSIENT
        proxy.reset_next([])
        sinks.ship(StateDir(state_dir), sink)
    received = list(sinks.read_stream(kinesis, stream))
    assert set(received) == set(lines_of(changes))  # nothing missing, nothing foreign
    by_position = {orjson.loads(data)["position"]: data for data in received}
    assert Counter(by_position.values()) == lines_of(changes)
