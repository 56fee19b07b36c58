"""Where spark-merge reads change lines: the local change log, shipped objects, or S3; and the lines read by Spark.

    changelog (default)      <state>/changelog/seg-*.jsonl (sealed segments)
    /local/dir               a copy of `cdc ship --to s3` output: table=<db>.<table>/dt=.../<batch>.jsonl.gz
                             plus _manifests/<batch>.json (a batch counts once its manifest exists)
    s3://bucket/prefix       new objects are downloaded with boto3 into <state>/merge-cache/ first
                             (one machine: no hadoop-aws jars needed), then read as a local directory
    s3a://bucket/prefix      manifests listed with boto3, objects read by Spark directly (cluster with hadoop-aws)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cdc.changelog import list_segments
from cdc.checkpoints import MergeCheckpoint
from cdc.config import AWSSettings
from cdc.errors import DataError, PositionError
from cdc.state import StateDir, write_bytes_atomic

MANIFESTS = "_manifests"
# In an s3:// source's merge cache: the manifest keys its last listing found, by the segment each counts as, so
# that the next one starts after the manifest the merge checkpoint ends at (ship writes one per batch, tens of
# thousands a day: a listing from the start grew by a request per 1,000 with every merge).
LISTED = ".listed.json"
LISTED_KEEP = 10_000


@dataclass(frozen=True)
class Segment:
    """One unit of input: a sealed segment, or a shipped batch of segments named by its LAST segment
    (`seg-....jsonl`, what spark-merge's checkpoint records as `last_segment`), and the files holding its lines."""

    name: str
    files: tuple[str, ...]
    bytes: int


def list_input(state: StateDir, source: str | None, after: str | None, aws: AWSSettings | None = None) -> list[Segment]:
    """Sealed segments whose name sorts after `after`, in source order."""
    if source in (None, "", "changelog"):
        sealed = list_segments(state.changelog, after, reader=MergeCheckpoint.STAGE)
        return [Segment(p.name, (str(p),), p.stat().st_size) for p in sealed]
    if source.startswith(("s3://", "s3a://")):
        return _list_s3(state, source, after, aws or AWSSettings())
    directory = Path(source)
    if not directory.is_dir():
        raise DataError(f"--source {source} is not a directory", hint="pass changelog, a local directory or s3://bucket/prefix")
    return _list_shipped(directory, after)


def _segment_name(manifest_name: str) -> str:
    """`_manifests/<batch-id>.json` -> the batch's last segment: `seg-A.json` -> `seg-A.jsonl` (one segment,
    also every v1 manifest), `seg-A_seg-B.json` -> `seg-B.jsonl` (a batch counts as its last segment)."""
    return manifest_name.removesuffix(".json").rpartition("_")[2] + ".jsonl"


def _in_order(names: list[str]) -> list[str]:
    """Manifest names sorted by the segment each counts as (then by first segment): merge order."""
    return sorted(names, key=lambda name: (_segment_name(name.rsplit("/", 1)[-1]), name))


def _relative(key: str) -> str:
    """`prefix/table=x/dt=d/seg.jsonl.gz` -> `table=x/dt=d/seg.jsonl.gz` (the layout is fixed: 3 levels)."""
    return "/".join(key.split("/")[-3:])


def _list_shipped(directory: Path, after: str | None) -> list[Segment]:
    found = []
    for path in _in_order([str(p) for p in (directory / MANIFESTS).glob("seg-*.json")]):
        manifest = Path(path)
        name = _segment_name(manifest.name)
        if after is not None and name <= after:
            continue
        files: list[Path] = []
        for obj in _manifest(manifest.read_bytes(), str(manifest))["objects"]:
            local = directory / _relative(obj["key"])
            if not local.exists():
                raise DataError(f"{local} is listed in {manifest} but missing",
                                hint="copy the shipped objects completely (aws s3 sync), then rerun")
            files.append(local)
        found.append(Segment(name, tuple(str(p) for p in files), sum(p.stat().st_size for p in files)))
    return found


def _manifest(body: bytes, where: str) -> dict[str, Any]:
    try:
        document: dict[str, Any] = orjson.loads(body)
        document["objects"]  # noqa: B018 - shape check
        return document
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise PositionError(f"ship manifest {where} is corrupt ({exc})", hint="re-ship the segment") from exc


def _list_s3(state: StateDir, url: str, after: str | None, aws: AWSSettings) -> list[Segment]:
    from cdc.aws import make_client, map_error

    scheme, _, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    head = f"{prefix}/" if prefix else ""
    client = make_client("s3", aws)
    cache = state.root / "merge-cache" / bucket / prefix
    segments = []
    known = _listed(cache) if after is not None else {}
    start = known.get(after or "")  # every manifest after it in merge order has a key sorting after its key
    listed = {after: start} if after is not None and start is not None else {}
    try:
        for key in _in_order(_keys(client, bucket, f"{head}{MANIFESTS}/", start)):
            name = _segment_name(key.rsplit("/", 1)[-1])
            if not name.startswith("seg-") or (after is not None and name <= after):
                continue
            listed[name] = key
            manifest = _manifest(client.get_object(Bucket=bucket, Key=key)["Body"].read(), f"s3://{bucket}/{key}")
            objects = manifest["objects"]
            if scheme == "s3a":
                files = tuple(f"s3a://{bucket}/{o['key']}" for o in objects)
                segments.append(Segment(name, files, sum(int(o.get("uncompressed_bytes", 0)) for o in objects)))
                continue
            paths = [_download(client, bucket, o["key"], cache / _relative(o["key"])) for o in objects]
            segments.append(Segment(name, tuple(str(p) for p in paths), sum(p.stat().st_size for p in paths)))
    except Exception as exc:
        if isinstance(exc, (DataError, PositionError)):
            raise
        raise map_error(exc, f"reading s3://{bucket}/{head}", missing_hint="check --source, --region, --endpoint-url") from None
    if scheme != "s3a":
        _drop_merged(cache, {path for segment in segments for path in segment.files})
    if listed != known:
        newest = dict(list(listed.items())[-LISTED_KEEP:])
        write_bytes_atomic(cache / LISTED, orjson.dumps({"version": 1, "keys": newest}))
    return segments


def _listed(cache: Path) -> dict[str, str]:
    """The keys an earlier listing of this source found (a hint: without it, or when the checkpoint is not among
    them, e.g. it came from another source and a shipped batch may straddle it, the listing starts from the start)."""
    try:
        document = orjson.loads((cache / LISTED).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    keys = document.get("keys") if isinstance(document, dict) else None
    return {str(k): str(v) for k, v in keys.items()} if isinstance(keys, dict) else {}


def _drop_merged(cache: Path, wanted: set[str]) -> None:
    """Delete the cached objects this merge does not read: those of segments an earlier merge took (its checkpoint
    is past them, under the merge's lock), which the cache would otherwise keep for ever."""
    if not cache.is_dir():
        return
    for folder, _, files in os.walk(cache, topdown=False):
        for name in files:
            path = os.path.join(folder, name)
            if path not in wanted and name != LISTED:
                os.unlink(path)
        if folder != str(cache) and not os.listdir(folder):
            os.rmdir(folder)


def _keys(client: Any, bucket: str, prefix: str, start_after: str | None = None) -> list[str]:
    keys: list[str] = []
    where = {"StartAfter": start_after} if start_after else {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, **where):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return sorted(keys)


def _download(client: Any, bucket: str, key: str, path: Path) -> Path:
    # Objects are immutable (ship writes each key once), so a cached copy never goes stale.
    if not path.exists():
        write_bytes_atomic(path, client.get_object(Bucket=bucket, Key=key)["Body"].read())
    return path


def spark_lines(spark: Any, schema: Any, files: list[str], merged_upto: str | None, cut: str | None = None,
                lake_marks: bool = False) -> Any:
    """The change lines of `files` read by Spark with `schema`, after `merged_upto` (and before `cut`), FAILFAST: a
    damaged line stops the merge, never a row of NULLs. lake_marks: with `_lake` (in_lake_mark)."""
    lines = spark.read.schema(schema).option("mode", "FAILFAST").json(files)
    return in_run(lines.withColumn("_lake", in_lake_mark()) if lake_marks else lines, merged_upto, cut)


def in_lake_mark() -> Any:
    """Whether a JSON line read from one of the superseded-lines pass's files has a key the lake holds: it is in one
    of the files cdc.spark.lake_keys named so (only for the tables in Fewer.in_lake). Read on the file scan itself."""
    from pyspark.sql import functions as F

    from cdc.spark.lake_keys import IN_LAKE

    return F.col("_metadata.file_name").startswith(IN_LAKE)


def in_run(lines: Any, merged_upto: str | None, cut: str | None) -> Any:
    """The lines after `merged_upto` and before `cut`: a line merged before (a replay) is never merged again."""
    from pyspark.sql import functions as F

    lines = lines.filter(F.col("position") > merged_upto) if merged_upto else lines
    return lines.filter(F.col("position") < F.lit(cut)) if cut else lines
