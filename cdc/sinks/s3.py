"""S3 sink: one deterministic object per table per segment, then a manifest per segment.

Layout (like Firehose dynamic partitioning, but every name derives from the segment id, so
a re-ship writes the same keys with the same bytes and Snowpipe never loads a file twice):

    <prefix>/table=<db>.<table>/dt=YYYY-MM-DD/<segment-id>.jsonl.gz
    <prefix>/_manifests/<segment-id>.json        written after the segment's data objects

Objects are created with If-None-Match: * (S3 conditional writes); a 412 means a previous run
already wrote the key, which is accepted only after checking the content is identical.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cdc.errors import CdcError, DataError, UsageError
from cdc.sinks.aws import error_code, http_status, map_error
from cdc.sinks.common import Delivery, Report

COMPRESSIONS = {"gzip": ".jsonl.gz", "zstd": ".jsonl.zst", "none": ".jsonl"}
MANIFEST_VERSION = 1
SHA_METADATA = "cdc-sha256"  # sha256 of the uncompressed content, kept as object metadata
DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
DEFAULT_PART_SIZE = 16 * 1024 * 1024
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class S3Options:
    bucket: str
    prefix: str = "cdc"
    compression: str = "gzip"
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    part_size: int = DEFAULT_PART_SIZE

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise UsageError(f"--compression {self.compression!r} is not one of {', '.join(COMPRESSIONS)}")
        if self.part_size < 5 * 1024 * 1024:
            raise UsageError("the multipart part size must be at least 5 MiB (S3's minimum)")


def split_s3_url(url: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> ("bucket", "some/prefix")."""
    if not url.startswith("s3://") or len(url) <= 5:
        raise UsageError(f"{url!r} is not an s3://bucket/prefix URL")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def encode_component(name: str) -> str:
    """Percent-encode every byte that is not [A-Za-z0-9_-] (dots too: `db.table` must stay unambiguous)."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode("utf-8"))


def object_key(prefix: str, db: str, table: str, ts: str, segment_id: str, compression: str) -> str:
    head = f"{prefix}/" if prefix else ""
    return (f"{head}table={encode_component(db)}.{encode_component(table)}/dt={ts[:10]}/"
            f"{segment_id}{COMPRESSIONS[compression]}")


def compress(payload: bytes, compression: str) -> bytes:
    """Deterministic compression: gzip with mtime=0 and no file name, zstd at a fixed level."""
    if compression == "gzip":
        return gzip.compress(payload, compresslevel=6, mtime=0)
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3, write_content_size=True).compress(payload)
    return payload


class S3Sink:
    """Ship change lines to partitioned objects under s3://bucket/prefix."""

    stage = "ship-s3"

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
        head = f"{self.options.prefix}/" if self.options.prefix else ""
        try:
            self.client.list_objects_v2(Bucket=self.options.bucket, Prefix=head, MaxKeys=1)
        except Exception as exc:
            raise map_error(exc, f"S3 bucket {self.options.bucket!r}", missing_hint=(
                f"create the bucket (aws s3 mb s3://{self.options.bucket}) or check --bucket, --region "
                "and --endpoint-url")) from None

    def deliver(self, segment: Path, lines: list[bytes], report: Report) -> Delivery:
        segment_id = segment.name.removesuffix(".jsonl")
        objects, requests, size = [], 0, 0
        for (db, table), group in _group_by_table(segment, lines).items():
            payload = b"\n".join(line for line, _ in group) + b"\n"
            first_ts = str(group[0][1].get("ts") or "")
            if not _DATE.match(first_ts):
                raise DataError(f"{segment}: first change of {db}.{table} has no commit ts ({first_ts!r})")
            key = object_key(self.options.prefix, db, table, first_ts, segment_id, self.options.compression)
            digest = hashlib.sha256(payload).hexdigest()
            made = self._put(key, compress(payload, self.options.compression), digest, f"{db}.{table}")
            report(len(group), len(payload), made)
            requests += made
            size += len(payload)
            objects.append({
                "key": key, "table": f"{db}.{table}", "records": len(group), "sha256": digest,
                "uncompressed_bytes": len(payload),
                "first_position": group[0][1].get("position"), "last_position": group[-1][1].get("position"),
            })
        manifest = {
            "version": MANIFEST_VERSION, "segment": segment.name, "compression": self.options.compression,
            "records": len(lines), "objects": objects,
            "first_position": min((o["first_position"] for o in objects), default=None),
            "last_position": max((o["last_position"] for o in objects), default=None),
        }
        body = orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
        head = f"{self.options.prefix}/" if self.options.prefix else ""
        made = self._put(f"{head}_manifests/{segment_id}.json", body, hashlib.sha256(body).hexdigest(),
                         f"manifest of {segment.name}")
        report(0, 0, made)
        requests += made
        return Delivery(records=len(lines), bytes=size, requests=requests)

    def _put(self, key: str, body: bytes, digest: str, what: str) -> int:
        return put_once(self.client, self.options.bucket, key, body, content_sha256=digest, what=what,
                        multipart_threshold=self.options.multipart_threshold, part_size=self.options.part_size)


def _group_by_table(segment: Path, lines: list[bytes]) -> dict[tuple[str, str], list[tuple[bytes, dict[str, Any]]]]:
    groups: dict[tuple[str, str], list[tuple[bytes, dict[str, Any]]]] = {}
    for number, line in enumerate(lines, start=1):
        change = orjson.loads(line)
        if not isinstance(change.get("db"), str) or not isinstance(change.get("table"), str):
            raise DataError(f"{segment}:{number}: change has no db/table",
                            hint="the segment does not follow docs/formats.md; rerun tail for it")
        groups.setdefault((change["db"], change["table"]), []).append((line, change))
    return groups


def put_once(
    client: Any, bucket: str, key: str, body: bytes, *, content_sha256: str, what: str,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD, part_size: int = DEFAULT_PART_SIZE,
) -> int:
    """Create s3://bucket/key unless it exists with the same content; return the requests made."""
    where = f"s3://{bucket}/{key} ({what})"
    try:
        if len(body) >= multipart_threshold:
            return _multipart(client, bucket, key, body, content_sha256, part_size)
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*",
                          Metadata={SHA_METADATA: content_sha256}, ContentType="application/x-ndjson")
        return 1
    except Exception as exc:
        if error_code(exc) in ("PreconditionFailed", "412") or http_status(exc) == 412:
            _check_same(client, bucket, key, content_sha256, where)
            return 2
        raise map_error(exc, f"writing {where}", missing_hint=(
            f"create the bucket (aws s3 mb s3://{bucket}) or check --bucket and --region")) from None


def _multipart(client: Any, bucket: str, key: str, body: bytes, digest: str, part_size: int) -> int:
    """Multipart upload whose completion is conditional (the managed transfer cannot pass If-None-Match)."""
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, Metadata={SHA_METADATA: digest},
                                            ContentType="application/x-ndjson")["UploadId"]
    try:
        parts = []
        for number, offset in enumerate(range(0, len(body), part_size), start=1):
            answer = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number,
                                        Body=body[offset:offset + part_size])
            parts.append({"PartNumber": number, "ETag": answer["ETag"]})
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, IfNoneMatch="*",
                                         MultipartUpload={"Parts": parts})
        return len(parts) + 2
    except BaseException:
        try:  # leave no orphaned parts behind (they cost money until a lifecycle rule reaps them)
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
        raise


def _check_same(client: Any, bucket: str, key: str, digest: str, where: str) -> None:
    """A 412 on a conditional create: fine if the object there holds our content, else stop."""
    head = client.head_object(Bucket=bucket, Key=key)
    if head.get("Metadata", {}).get(SHA_METADATA) == digest:
        return
    raise CdcError(
        f"{where} already exists with different content (sha256 {head.get('Metadata', {}).get(SHA_METADATA)} "
        f"!= {digest}); a sealed segment never changes, so this prefix holds another pipeline's data",
        hint="ship into a fresh --prefix (or bucket), or remove the stale objects if the change log was rebuilt",
    )
