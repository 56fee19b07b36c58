"""Ship throughput against a moto server: cdc's batched sinks beside the seed's one-call-per-row loop.

    .venv/bin/python benchmarks/bench_ship.py [--records 20000] [--naive-records 2000]

Prints records/s, requests made and records per request for Kinesis and S3, and the ratios
to the seed's approach (one put_record per row with str(dict) as payload; for S3 one
put_object per row), measured in the same run against the same server. moto is a local
Python server, so absolute numbers say little; the ratios and request counts carry over.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cdc import sinks  # noqa: E402
from cdc.changelog import decode_line, list_segments, read_raw_lines  # noqa: E402
from cdc.config import AWSSettings  # noqa: E402
from cdc.state import StateDir  # noqa: E402
from tests.rig import MotoServer  # noqa: E402
from tests.sinks.changes import make_changes, write_changelog  # noqa: E402


def count_requests(client: Any) -> list[int]:
    counter = [0]

    def on_send(**_: Any) -> None:
        counter[0] += 1

    client.meta.events.register("before-send", on_send)
    return counter


def timed(action: Callable[[], int], client: Any) -> tuple[int, float, int]:
    requests = count_requests(client)
    start = time.perf_counter()
    records = action()
    return records, time.perf_counter() - start, requests[0]


def seed_kinesis(client: Any, stream: str, lines: list[bytes]) -> int:
    for line in lines:  # the articles' loop: one call per row, str(dict) payload
        row = decode_line(line)
        client.put_record(StreamName=stream, Data=str(row), PartitionKey=str(row["key"]))
    return len(lines)


def seed_s3(client: Any, bucket: str, lines: list[bytes]) -> int:
    for number, line in enumerate(lines):
        client.put_object(Bucket=bucket, Key=f"seed/{number}.json", Body=line)
    return len(lines)


def row(name: str, records: int, seconds: float, requests: int) -> dict[str, float]:
    rate = records / seconds
    print(f"  {name:<34} {records:>8,} records {rate:>10,.0f} rec/s {requests:>7,} requests "
          f"{records / max(requests, 1):>8.1f} rec/request")
    return {"rate": rate, "per_request": records / max(requests, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--naive-records", type=int, default=2_000, help="rows for the slow seed loop")
    args = parser.parse_args()
    with MotoServer() as moto, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(moto.env)  # dummy credentials; never a real account
        aws = AWSSettings(region=moto.region, endpoint_url=moto.endpoint_url, stream="bench", bucket="bench")
        moto.client("kinesis").create_stream(StreamName="bench", ShardCount=4)
        moto.client("s3").create_bucket(Bucket="bench")
        write_changelog(Path(tmp) / "k" / "changelog", make_changes(args.records), per_segment=5000)
        write_changelog(Path(tmp) / "s" / "changelog", make_changes(args.records), per_segment=5000)
        lines = [ln for seg in list_segments(Path(tmp) / "k" / "changelog") for ln in read_raw_lines(seg)]
        lines = lines[: args.naive_records]
        for kind in ("kinesis", "s3"):
            sink = sinks.open_sink(aws, sinks.ShipTarget(to=kind))
            state = StateDir(Path(tmp) / kind[0])
            print(f"{kind}:")
            ours = row("cdc ship (batched)", *timed(lambda: sinks.ship(state, sink).records, sink.client))
            naive = seed_kinesis if kind == "kinesis" else seed_s3
            target = "bench"
            seed = row("seed (one call per row)", *timed(lambda: naive(sink.client, target, lines), sink.client))
            print(f"  ratio: {ours['rate'] / seed['rate']:.1f}x records/s, "
                  f"{ours['per_request'] / seed['per_request']:.0f}x records per request")


if __name__ == "__main__":
    main()
