"""Kinesis Data Streams sink: PutRecords in batches, resubmitting exactly the entries that failed.

Each record's data is one change-log line, byte for byte (without the newline). The default
partition key is table + primary key, so all changes of one row land on one shard in order.
https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cdc.aws import map_error
from cdc.changelog import encode_line
from cdc.checkpoints import ShipKinesisCheckpoint
from cdc.durations import backoff
from cdc.errors import CdcError, DataError, TransientError, UsageError
from cdc.sinks.common import Delivery, Report

# PutRecords limits: 500 entries and 5 MiB (data + partition keys) per request.
MAX_BATCH_RECORDS = 500
MAX_BATCH_BYTES = 5 * 1024 * 1024
# The per-record limit is read from the stream (MaxRecordSizeInKiB); this is the historic default.
DEFAULT_MAX_RECORD_KIB = 1024
MAX_PARTITION_KEY_CHARS = 256
PARTITION_BY = ("pk", "table", "transaction")
# Per-entry error codes worth resubmitting; anything else (KMS access, ...) is permanent.
RETRYABLE_ENTRY_ERRORS = frozenset({"ProvisionedThroughputExceededException", "InternalFailure", "KMSThrottlingException"})


@dataclass(frozen=True)
class KinesisOptions:
    stream: str
    partition_by: str = "pk"
    # "db.table" -> ExplicitHashKey (decimal, 0..2**128-1): pins a hot table to a chosen shard.
    explicit_hash_keys: Mapping[str, str] = field(default_factory=dict)
    oversize_url: str | None = None  # s3://bucket/prefix for records over the stream's limit
    oversize_encryption: Mapping[str, str] = field(default_factory=dict)  # cdc.aws.sse_params of those objects
    max_rounds: int = 60  # resubmission rounds per batch before giving up (checkpoint untouched)
    retry_base: float = 0.1
    retry_cap: float = 5.0

    def __post_init__(self) -> None:
        if self.partition_by not in PARTITION_BY:
            raise UsageError(f"--partition-by {self.partition_by!r} is not one of {', '.join(PARTITION_BY)}")
        for table, value in self.explicit_hash_keys.items():
            if not value.isdigit() or int(value) >= 2**128:
                raise UsageError(
                    f"--explicit-hash-key {table}={value}: the hash key must be a decimal in 0..2**128-1",
                    hint="use a shard's StartingHashKey from `aws kinesis list-shards`",
                )


def parse_explicit_hash_keys(items: list[str]) -> dict[str, str]:
    """`db.table=HASH` pairs from the command line into a mapping."""
    found: dict[str, str] = {}
    for item in items:
        table, sep, value = item.rpartition("=")
        if not sep or not table:
            raise UsageError(f"--explicit-hash-key {item!r} is not DB.TABLE=HASHKEY")
        found[table] = value.strip()
    return found


def partition_key(change: Mapping[str, Any], partition_by: str) -> str:
    """A stable partition key; long ones are hashed (Kinesis allows 256 characters)."""
    table = f"{change.get('db')}.{change.get('table')}"
    if partition_by == "table" or (partition_by == "pk" and change.get("key") is None):
        text = table  # DDL lines have no key: keep them with their table's first shard choice
    elif partition_by == "pk":
        text = table + ":" + orjson.dumps(change["key"], option=orjson.OPT_SORT_KEYS).decode()
    else:
        src = change.get("src") or {}
        text = src.get("gtid") or f"{src.get('file')}:{src.get('xid') or src.get('pos')}"
    if len(text) > MAX_PARTITION_KEY_CHARS or not text:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return text


def _entry_size(entry: Mapping[str, Any]) -> int:
    return len(entry["Data"]) + len(entry["PartitionKey"].encode())


class KinesisSink:
    """Ship change lines to one Kinesis stream."""

    stage = ShipKinesisCheckpoint.STAGE

    def __init__(self, client: Any, options: KinesisOptions, *, s3_client: Any = None) -> None:
        self.client = client
        self.options = options
        self.s3_client = s3_client
        self.destination = f"kinesis:{options.stream}"
        self.max_record_bytes = DEFAULT_MAX_RECORD_KIB * 1024

    def _missing_hint(self) -> str:
        return (f"create the stream (aws kinesis create-stream --stream-name {self.options.stream}) "
                "or check --stream, --region and --endpoint-url")

    def check(self) -> None:
        """Fail fast on a missing stream and learn its per-record size limit."""
        try:
            summary = self.client.describe_stream_summary(StreamName=self.options.stream)["StreamDescriptionSummary"]
        except Exception as exc:  # botocore raises a class per code; map_error sorts them
            raise map_error(exc, f"Kinesis stream {self.options.stream!r}", missing_hint=self._missing_hint()) from None
        # MaxRecordSizeInKiB is absent on streams (and endpoints) that predate configurable sizes.
        self.max_record_bytes = int(summary.get("MaxRecordSizeInKiB") or DEFAULT_MAX_RECORD_KIB) * 1024

    def deliver(self, segment: Path, lines: list[bytes], report: Report) -> Delivery:
        batch: list[dict[str, Any]] = []
        batch_bytes = records = size = requests = 0
        for number, line in enumerate(lines, start=1):
            entry = self._entry(segment, number, line)
            entry_bytes = _entry_size(entry)
            if batch and (len(batch) == MAX_BATCH_RECORDS or batch_bytes + entry_bytes > MAX_BATCH_BYTES):
                requests += self._put_all(batch, report)
                batch, batch_bytes = [], 0
            batch.append(entry)
            batch_bytes += entry_bytes
            records += 1
            size += len(entry["Data"])
        if batch:
            requests += self._put_all(batch, report)
        return Delivery(records=records, bytes=size, requests=requests)

    def _entry(self, segment: Path, number: int, line: bytes) -> dict[str, Any]:
        change = orjson.loads(line)
        entry: dict[str, Any] = {"Data": line, "PartitionKey": partition_key(change, self.options.partition_by)}
        hash_key = self.options.explicit_hash_keys.get(f"{change.get('db')}.{change.get('table')}")
        if hash_key is not None:
            entry["ExplicitHashKey"] = hash_key
        if _entry_size(entry) > self.max_record_bytes:
            entry["Data"] = self._oversize(segment, number, change, line, entry_bytes=_entry_size(entry))
        return entry

    def _oversize(self, segment: Path, number: int, change: dict[str, Any], line: bytes, entry_bytes: int) -> bytes:
        """Store a too-big line in S3 and return a pointer record, or stop: never drop a change."""
        where = (f"change {change.get('position')} ({change.get('db')}.{change.get('table')} key "
                 f"{orjson.dumps(change.get('key')).decode()[:200]}) at {segment}:{number}")
        if not self.options.oversize_url or self.s3_client is None:
            raise DataError(
                f"{where} is {entry_bytes} bytes; stream {self.options.stream!r} takes at most "
                f"{self.max_record_bytes} bytes per record",
                hint="pass --oversize s3://bucket/prefix to park big records in S3 behind a pointer record, "
                "or raise the stream's limit (aws kinesis update-max-record-size)",
            )
        from cdc.s3keys import split_s3_url
        from cdc.sinks.s3 import put_once

        bucket, prefix = split_s3_url(self.options.oversize_url)
        key = f"{prefix}/_oversize/{segment.stem}/{change.get('position')}.jsonl".lstrip("/")
        digest = hashlib.sha256(line).hexdigest()  # of the record data the pointer stands for
        put_once(self.s3_client, bucket, key, line + b"\n", content_sha256=digest, what=where,
                 encryption=self.options.oversize_encryption)
        pointer = {k: change.get(k) for k in ("db", "table", "key", "op", "position", "src", "ts", "v")}
        pointer["oversize"] = {"url": f"s3://{bucket}/{key}", "bytes": len(line), "sha256": digest}
        return encode_line(pointer).rstrip(b"\n")

    def _put_all(self, entries: list[dict[str, Any]], report: Report) -> int:
        """PutRecords until every entry is acknowledged; resubmit only the failed ones."""
        pending, requests = entries, 0
        for attempt in range(self.options.max_rounds + 1):
            results = self._put_records(pending)
            requests += 1
            failed = [(entry, result) for entry, result in zip(pending, results, strict=True) if result.get("ErrorCode")]
            acked_bytes = sum(len(e["Data"]) for e in pending) - sum(len(e["Data"]) for e, _ in failed)
            report(len(pending) - len(failed), acked_bytes, 1)
            permanent = [r for _, r in failed if r["ErrorCode"] not in RETRYABLE_ENTRY_ERRORS]
            if permanent:
                raise CdcError(
                    f"Kinesis stream {self.options.stream!r} refused {len(permanent)} record(s): "
                    f"{permanent[0]['ErrorCode']}: {permanent[0].get('ErrorMessage', '')}",
                    hint="fix the stream's encryption key policy or the caller's permissions, then rerun",
                )
            if not failed:
                return requests
            pending = [entry for entry, _ in failed]
            time.sleep(backoff(attempt, self.options.retry_base, self.options.retry_cap))
        raise TransientError(
            f"Kinesis stream {self.options.stream!r}: {len(pending)} record(s) still throttled after "
            f"{self.options.max_rounds} resubmissions",
            hint="add shards (aws kinesis update-shard-count) or spread hot keys (--explicit-hash-key), then rerun",
        )

    def _put_records(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            response = self.client.put_records(StreamName=self.options.stream, Records=entries)
        except Exception as exc:
            raise map_error(exc, f"PutRecords to Kinesis stream {self.options.stream!r}",
                            missing_hint=self._missing_hint()) from None
        results: list[dict[str, Any]] = response.get("Records") or []  # none: an answer we cannot trust
        if len(results) != len(entries):
            raise TransientError(f"PutRecords answered {len(results)} results for {len(entries)} records")
        return results


def read_stream(client: Any, stream: str, *, limit: int = 10000) -> Iterator[bytes]:
    """Yield every record's data of every shard, from TRIM_HORIZON to the current tip."""
    what = f"Kinesis stream {stream!r}"
    try:
        shards = client.get_paginator("list_shards").paginate(StreamName=stream)
        shard_ids = [shard["ShardId"] for page in shards for shard in page["Shards"]]
    except Exception as exc:
        raise map_error(exc, what, missing_hint="check --stream, --region and --endpoint-url") from None
    for shard_id in shard_ids:
        iterator = client.get_shard_iterator(
            StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            response = client.get_records(ShardIterator=iterator, Limit=limit)
            for record in response["Records"]:
                yield record["Data"]
            # An empty page while behind the tip is normal on real Kinesis; stop only at the tip.
            if not response["Records"] and not response.get("MillisBehindLatest"):
                break
            iterator = response.get("NextShardIterator")
