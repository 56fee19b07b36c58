"""Sinks: deliver sealed change-log segments to Kinesis or S3, checkpoint after delivery.

    sink = open_sink(settings.aws, ShipTarget(to="kinesis"))
    summary = ship(StateDir(settings.state_dir), sink)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cdc.aws import make_client, sse_params
from cdc.config import AWSSettings
from cdc.errors import ConfigError, UsageError
from cdc.s3keys import split_s3_url
from cdc.sinks.common import BatchSink, Delivery, Progress, ShipSummary, Sink, ship
from cdc.sinks.kinesis import KinesisOptions, KinesisSink, parse_explicit_hash_keys, read_stream
from cdc.sinks.s3 import DEFAULT_MULTIPART_THRESHOLD, S3Options, S3Sink
from cdc.sinks.s3_batches import RollOptions

__all__ = [
    "BatchSink", "Delivery", "KinesisOptions", "KinesisSink", "Progress", "RollOptions", "S3Options", "S3Sink",
    "ShipSummary",
    "ShipTarget", "Sink", "make_client", "open_sink", "read_stream", "ship",
]


@dataclass(frozen=True)
class ShipTarget:
    """What the command line asked for, beyond the [aws] settings."""

    to: str  # "kinesis", "s3" or "s3://bucket/prefix"
    partition_by: str = "pk"
    explicit_hash_keys: tuple[str, ...] = ()  # "db.table=HASHKEY"
    oversize_url: str | None = None
    compression: str = "gzip"
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD


def open_sink(aws: AWSSettings, target: ShipTarget) -> Sink | BatchSink:
    """Build the sink for `target` with clients from the default credential chain."""
    if target.to.startswith("s3://"):
        bucket, prefix = split_s3_url(target.to)
        aws, target = replace(aws, bucket=bucket, prefix=prefix), replace(target, to="s3")
    elif aws.bucket and aws.bucket.startswith("s3://"):
        bucket, prefix = split_s3_url(aws.bucket)
        aws = replace(aws, bucket=bucket, prefix=prefix)
    if target.oversize_url:
        split_s3_url(target.oversize_url)  # a typo must fail now, not at the first big record
    if target.to == "kinesis":
        if not aws.stream:
            raise ConfigError("ship --to kinesis needs a stream", hint="pass --stream NAME or set [aws] stream in cdc.toml")
        options = KinesisOptions(
            stream=aws.stream, partition_by=target.partition_by,
            explicit_hash_keys=parse_explicit_hash_keys(list(target.explicit_hash_keys)),
            oversize_url=target.oversize_url, oversize_encryption=sse_params(aws),
        )
        s3_client = make_client("s3", aws) if target.oversize_url else None
        return KinesisSink(make_client("kinesis", aws), options, s3_client=s3_client)
    if target.to == "s3":
        if not aws.bucket:
            raise ConfigError("ship --to s3 needs a bucket", hint="pass --bucket NAME (or s3://bucket/prefix)")
        roll = RollOptions(size=aws.roll_size * 1024 * 1024, interval=aws.roll_interval)
        options_s3 = S3Options(bucket=aws.bucket, prefix=aws.prefix.strip("/"), compression=target.compression,
                               multipart_threshold=target.multipart_threshold, roll=roll,
                               encryption=sse_params(aws))
        return S3Sink(make_client("s3", aws), options_s3)
    raise UsageError(f"--to {target.to!r} is not kinesis, s3 or s3://bucket/prefix")
