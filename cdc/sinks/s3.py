"""S3 sink: batches of sealed segments -> deterministic objects per table (cut into parts), then a manifest.

Layout (like Firehose dynamic partitioning, but every name derives from the batch's segment range,
so a re-ship writes the same keys with the same bytes and Snowpipe never loads a file twice):

    <prefix>/table=<db>.<table>/dt=YYYY-MM-DD/<batch-id>[-pNNNN].jsonl.gz
    <prefix>/_manifests/<batch-id>.json        written after the batch's data objects

<batch-id> is the segment id for a one-segment batch (the v1 layout), `<first>_<last>` otherwise;
-pNNNN numbers the parts of a table cut at --roll-size, only when there is more than one.
Objects are created with If-None-Match: * (S3 conditional writes); a 412 means a previous run
already wrote the key, which is accepted only after checking the content is identical.
How batches close and survive a crash: s3_batches.py; how parts are built: s3_parts.py.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from cdc.aws import error_code, http_status, map_error
from cdc.checkpoints import ShipS3Checkpoint
from cdc.errors import CdcError, UsageError
from cdc.s3keys import table_component
from cdc.sinks.common import Delivery, Report
from cdc.sinks.s3_batches import COMPRESSIONS, Batch, RollOptions
from cdc.sinks.s3_parts import cut_parts, first_date, index_tables, spool_part

MANIFEST_VERSION = 2  # v2: one manifest per batch (`batch`, `segments`, `segment_names`, parts)
MANIFESTS = "_manifests"
SHA_METADATA = "cdc-sha256"  # sha256 of the uncompressed content, kept as object metadata
DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
DEFAULT_PART_SIZE = 16 * 1024 * 1024


@dataclass(frozen=True)
class S3Options:
    bucket: str
    prefix: str = "cdc"
    compression: str = "gzip"
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    part_size: int = DEFAULT_PART_SIZE
    roll: RollOptions = field(default_factory=RollOptions)
    encryption: Mapping[str, str] = field(default_factory=dict)  # cdc.aws.sse_params: on every object

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise UsageError(f"--compression {self.compression!r} is not one of {', '.join(COMPRESSIONS)}")
        if self.part_size < 5 * 1024 * 1024:
            raise UsageError("the multipart part size must be at least 5 MiB (S3's minimum)")


def object_key(prefix: str, db: str, table: str, ts: str, segment_id: str, compression: str) -> str:
    head = f"{prefix}/" if prefix else ""
    return (f"{head}table={table_component(db, table)}/dt={ts[:10]}/"
            f"{segment_id}{COMPRESSIONS[compression]}")


class S3Sink:
    """Ship batches of change-log segments to partitioned objects under s3://bucket/prefix."""

    stage = ShipS3Checkpoint.STAGE

    def __init__(self, client: Any, options: S3Options) -> None:
        self.client = client
        self.options = options
        self.destination = f"s3://{options.bucket}/{options.prefix}".rstrip("/")

    def check(self) -> None:
        """Fail fast on a missing bucket or no access, asking only inside our prefix.

        A listing scoped to `<prefix>/` rather than HeadBucket: a least-privilege policy grants
        s3:ListBucket with an s3:prefix condition (examples/iam-s3-policy.json), which HeadBucket,
        carrying no prefix, never satisfies.
        """
        try:
            self.client.list_objects_v2(Bucket=self.options.bucket, Prefix=self._head, MaxKeys=1)
        except Exception as exc:
            raise map_error(exc, f"S3 bucket {self.options.bucket!r}", missing_hint=(
                f"create the bucket (aws s3 mb s3://{self.options.bucket}) or check --bucket, --region "
                "and --endpoint-url")) from None

    def new_batch(self, segments: list[Path]) -> Batch:
        return Batch(tuple(segments), self.options.roll.size, self.options.compression)

    def deliver_batch(self, batch: Batch, report: Report) -> Delivery:
        """Upload every table's parts of the batch, then its manifest (readers wait for the manifest)."""
        objects: list[dict[str, Any]] = []
        requests = 0
        for lines in index_tables(batch.segments):
            ranges = cut_parts(lines.length, batch.roll_size)
            for number, (start, end) in enumerate(ranges, start=1):
                name = batch.id + (f"-p{number:04d}" if len(ranges) > 1 else "")
                with spool_part(batch.segments, lines, start, end, batch.compression) as part:
                    key = object_key(self.options.prefix, lines.db, lines.table, first_date(part, lines.name, batch.id),
                                     name, batch.compression)
                    made = put_once(self.client, self.options.bucket, key, part.body, size=part.size,
                                    content_sha256=part.sha256, what=lines.name,
                                    multipart_threshold=self.options.multipart_threshold,
                                    part_size=self.options.part_size, encryption=self.options.encryption)
                report(part.records, part.uncompressed_bytes, made)
                requests += made
                objects.append({
                    "key": key, "table": lines.name, "records": part.records, "sha256": part.sha256,
                    "bytes": part.size, "uncompressed_bytes": part.uncompressed_bytes,
                    "first_position": part.first.get("position"), "last_position": part.last.get("position"),
                })
        body = manifest_bytes(batch, objects)
        key = f"{self._head}{MANIFESTS}/{batch.id}.json"
        made = put_once(self.client, self.options.bucket, key, body, content_sha256=hashlib.sha256(body).hexdigest(),
                        what=f"manifest of batch {batch.id}", encryption=self.options.encryption,
                        accept=lambda: self._is_v1_manifest_of(key, batch, objects))
        report(0, 0, made)
        return Delivery(records=sum(o["records"] for o in objects),
                        bytes=sum(o["uncompressed_bytes"] for o in objects), requests=requests + made,
                        objects=len(objects))

    def _is_v1_manifest_of(self, key: str, batch: Batch, objects: list[dict[str, Any]]) -> bool:
        """An older cdc's manifest of this same one segment, listing the same objects: an upgrade after a
        crash between that manifest and its checkpoint. Its data objects matched ours key for key (each
        passed the same check), so the batch is complete as it stands."""
        if len(batch.segments) != 1:
            return False
        found = orjson.loads(self.client.get_object(Bucket=self.options.bucket, Key=key)["Body"].read())
        ours = sorted((o["key"], o["sha256"]) for o in objects)
        return (found.get("version") == 1 and found.get("segment") == batch.first
                and sorted((o.get("key"), o.get("sha256")) for o in found.get("objects", [])) == ours)

    @property
    def _head(self) -> str:
        return f"{self.options.prefix}/" if self.options.prefix else ""


def manifest_bytes(batch: Batch, objects: list[dict[str, Any]]) -> bytes:
    """The batch's manifest: deterministic bytes (sorted keys, no clock) so a re-ship rewrites it identically."""
    manifest = {
        "version": MANIFEST_VERSION, "batch": batch.id, "compression": batch.compression,
        "roll_size": batch.roll_size, "segments": [batch.first, batch.last],
        "segment_names": [s.name for s in batch.segments],
        "records": sum(o["records"] for o in objects), "objects": objects,
        "first_position": min((o["first_position"] for o in objects), default=None),
        "last_position": max((o["last_position"] for o in objects), default=None),
    }
    return orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def put_once(
    client: Any, bucket: str, key: str, body: bytes | IO[bytes], *, content_sha256: str, what: str,
    size: int | None = None, multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
    part_size: int = DEFAULT_PART_SIZE, accept: Callable[[], bool] | None = None,
    encryption: Mapping[str, str] | None = None,
) -> int:
    """Create s3://bucket/key unless it exists with the same content; return the requests made.

    `body` is bytes or a file positioned at its start holding `size` bytes (a spooled part): a file
    at or above the multipart threshold is uploaded part by part, never read whole into memory.
    `accept` may still take an object there with other content (asked only then). `encryption`: the
    server-side encryption parameters (cdc.aws.sse_params), on the PutObject or the CreateMultipartUpload.
    """
    source = io.BytesIO(body) if isinstance(body, bytes) else body
    length = len(body) if isinstance(body, bytes) else size
    if length is None:
        raise ValueError("put_once needs the size of a file body")
    where = f"s3://{bucket}/{key} ({what})"
    try:
        if length >= multipart_threshold:
            return _multipart(client, bucket, key, source, content_sha256, part_size, encryption or {})
        client.put_object(Bucket=bucket, Key=key, Body=source.read(), IfNoneMatch="*",
                          Metadata={SHA_METADATA: content_sha256}, ContentType="application/x-ndjson",
                          **(encryption or {}))
        return 1
    except Exception as exc:
        if error_code(exc) in ("PreconditionFailed", "412") or http_status(exc) == 412:
            # A 412: a previous run wrote the key. Fine if it holds our content, else stop.
            stored = client.head_object(Bucket=bucket, Key=key).get("Metadata", {}).get(SHA_METADATA)
            if stored != content_sha256 and (accept is None or not accept()):
                raise _different(where, stored, content_sha256) from None
            return 2
        raise map_error(exc, f"writing {where}", missing_hint=(
            f"create the bucket (aws s3 mb s3://{bucket}) or check --bucket and --region")) from None


def _multipart(client: Any, bucket: str, key: str, source: IO[bytes], digest: str, part_size: int,
               encryption: Mapping[str, str]) -> int:
    """Multipart upload whose completion is conditional (the managed transfer cannot pass If-None-Match)."""
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, Metadata={SHA_METADATA: digest},
                                            ContentType="application/x-ndjson", **encryption)["UploadId"]
    try:
        parts: list[dict[str, Any]] = []
        while chunk := source.read(part_size):
            answer = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=len(parts) + 1,
                                        Body=chunk)
            parts.append({"PartNumber": len(parts) + 1, "ETag": answer["ETag"]})
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, IfNoneMatch="*",
                                         MultipartUpload={"Parts": parts})
        return len(parts) + 2
    except BaseException:
        try:  # leave no orphaned parts behind (they cost money until a lifecycle rule reaps them)
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
        raise


def _different(where: str, stored: str | None, digest: str) -> CdcError:
    return CdcError(
        f"{where} already exists with different content (sha256 {stored} != {digest}); a sealed segment "
        "never changes, so this prefix holds another pipeline's data",
        hint="ship into a fresh --prefix (or bucket), or remove the stale objects if the change log was rebuilt",
    )
