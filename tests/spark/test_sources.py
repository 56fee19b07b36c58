"""spark-merge --source: what `cdc ship --to s3` wrote, read from s3:// (boto3 cache) or a local copy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from cdc import sinks
from cdc.config import AWSSettings
from cdc.errors import DataError
from cdc.spark import merge, read_lake_table
from cdc.spark.sources import LISTED
from cdc.state import StateDir
from tests.rig import MotoServer
from tests.sinks.changes import as_v1_manifest, read_s3_lines
from tests.spark.test_merge import build
from tests.spark.workload import T1, T2, model


def _ship(state: StateDir, aws: AWSSettings, url: str) -> None:
    summary = sinks.ship(state, sinks.open_sink(aws, sinks.ShipTarget(to=url)))
    assert summary.remaining == 0


def _merger(root: Path, source: StateDir) -> StateDir:
    """A state directory with only the schema history: its input is the shipped objects, not a change log."""
    state = StateDir(root)
    shutil.copytree(source.schema, state.schema)
    return state


def _lake(state: StateDir) -> dict[Any, Any]:
    return {t: read_lake_table(state.root / "lake", *t).by_key() for t in (T1, T2)}  # type: ignore[union-attr]


def _setup(moto_server: MotoServer, tmp_path: Path, bucket: str, seed: int) -> tuple[AWSSettings, Any, StateDir, Any,
                                                                                    StateDir]:
    """AWS settings, an S3 client and a fresh bucket; the shipper's state with a workload; the merger's state."""
    aws = AWSSettings(region=moto_server.region, endpoint_url=moto_server.endpoint_url)
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket=bucket)
    shipper = StateDir(tmp_path / "shipper")
    w = build(shipper.root, seed=seed)
    return aws, s3, shipper, w, _merger(tmp_path / "from-s3", shipper)


def test_merge_from_s3_and_from_a_local_copy_equals_the_change_log(aws_env: dict[str, str], moto_server: MotoServer,
                                                                   tmp_path: Path, spark: Any) -> None:
    aws, s3, shipper, w, from_s3 = _setup(moto_server, tmp_path, "merge-src", seed=17)
    half = len(w.lines) // 2

    # Two increments, each shipped as one batch of several segments: the second merge reads only the
    # batch whose manifest is new, and the merge checkpoint records a batch as its last segment.
    # The listing starts after the manifest the merge checkpoint ends at: ship writes one per batch, and a
    # listing from the start cost a request more per 1,000 batches ever shipped.
    starts = []
    for lines in (w.lines[:half], w.lines[half:]):
        w.write_segments(lines, per_segment=60)
        _ship(shipper, aws, "s3://merge-src/shipped")
        with moto_server.recording() as requests:
            summary = merge(from_s3, source="s3://merge-src/shipped", aws=aws, spark=spark)
        starts.append(_list_starts(requests))
        assert summary.batch_id is not None
        sealed = sorted(p.name for p in shipper.changelog.iterdir())
        assert summary.segments[1] == sealed[-1] and "_" in _manifest_keys(s3, "merge-src", "shipped/")[-1]
    keys = _manifest_keys(s3, "merge-src", "shipped/")
    assert len(keys) == 2 and starts == [[None], [keys[0]]]
    assert _lake(from_s3) == {t: model(w.lines, w.history)[t] for t in (T1, T2)}
    with moto_server.recording() as requests:
        assert merge(from_s3, source="s3://merge-src/shipped", aws=aws, spark=spark).batch_id is None
    assert _list_starts(requests) == [keys[1]]
    for listed in (from_s3.root / "merge-cache").rglob(LISTED):  # lost (or a checkpoint from elsewhere): from the start
        listed.write_text("{not json", encoding="utf-8")
    with moto_server.recording() as requests:
        assert merge(from_s3, source="s3://merge-src/shipped", aws=aws, spark=spark).batch_id is None
    assert _list_starts(requests) == [None]
    # What the merges took is not kept in the download cache: it would grow with every object ever shipped.
    assert not [p for p in (from_s3.root / "merge-cache").rglob("*") if p.is_file() and p.name != LISTED]

    # The same objects copied to a local directory (aws s3 sync s3://merge-src/shipped DIR).
    local = tmp_path / "synced"
    for key, body in read_s3_lines(s3, "merge-src", "shipped/")[1].items():
        path = local / key.removeprefix("shipped/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    from_dir = _merger(tmp_path / "from-dir", shipper)
    merge(from_dir, source=str(local), spark=spark)
    assert _lake(from_dir) == _lake(from_s3)


def test_merge_reads_a_v1_layout_then_batches_after_an_upgrade(aws_env: dict[str, str], moto_server: MotoServer,
                                                               tmp_path: Path, spark: Any) -> None:
    """A prefix shipped by cdc before batches (one manifest per segment, version 1), then by this one."""
    aws, s3, shipper, w, from_s3 = _setup(moto_server, tmp_path, "upgrade-src", seed=23)
    half = len(w.lines) // 2

    w.write_segments(w.lines[:half], per_segment=60)
    old = _ship_v1(shipper, aws, "upgrade-src", "up")
    assert merge(from_s3, source="s3://upgrade-src/up", aws=aws, spark=spark).segments[1] == old[-1].name
    w.write_segments(w.lines[half:], per_segment=60)
    _ship(shipper, aws, "s3://upgrade-src/up")  # reads the v1 checkpoint, ships the rest as one batch
    manifests = _manifest_keys(s3, "upgrade-src", "up/")
    assert len(manifests) == len(old) + 1 and "_" in manifests[-1]
    merge(from_s3, source="s3://upgrade-src/up", aws=aws, spark=spark)

    from_changelog = StateDir(tmp_path / "from-changelog")
    shutil.copytree(shipper.root, from_changelog.root, ignore=shutil.ignore_patterns("ship-s3.json", "locks"))
    merge(from_changelog, spark=spark)
    assert _lake(from_s3) == _lake(from_changelog) == {t: model(w.lines, w.history)[t] for t in (T1, T2)}


def _ship_v1(state: StateDir, aws: AWSSettings, bucket: str, prefix: str) -> list[Path]:
    """What cdc wrote before batches: per segment its objects and a version-1 manifest, and a v1 checkpoint."""
    sink = sinks.open_sink(aws, sinks.ShipTarget(to=f"s3://{bucket}/{prefix}"))
    assert isinstance(sink, sinks.S3Sink)
    segments = sorted(state.changelog.iterdir())
    for segment in segments:  # a one-segment batch has the v1 keys and bytes
        sink.deliver_batch(sink.new_batch([segment]), lambda *_: None)
        key = f"{prefix}/_manifests/{segment.name[:-6]}.json"
        manifest = json.loads(sink.client.get_object(Bucket=bucket, Key=key)["Body"].read())
        sink.client.put_object(Bucket=bucket, Key=key, Body=as_v1_manifest(manifest))
    (state.root / "ship-s3.json").write_text(json.dumps({
        "version": 1, "destination": sink.destination, "last_segment": segments[-1].name,
        "segments": len(segments), "records": 0}))
    return segments


def _list_starts(requests: list[dict[str, Any]]) -> list[str | None]:
    """The start-after of each ListObjectsV2 request recorded (None: from the start)."""
    queries = [parse_qs(urlsplit(r["url"]).query) for r in requests if r["method"] == "GET"]
    return [(q.get("start-after") or [None])[0] for q in queries if q.get("list-type") == ["2"]]


def _manifest_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    return sorted(k for k in read_s3_lines(s3, bucket, prefix)[1] if "/_manifests/" in k)


def test_local_source_with_a_missing_object_stops(tmp_path: Path) -> None:
    """A manifest names every object of its segment: a partial copy is refused, never merged in part."""
    local = tmp_path / "synced"
    (local / "_manifests").mkdir(parents=True)
    (local / "_manifests" / "seg-1.json").write_text(
        '{"objects": [{"key": "p/table=a.b/dt=2026-11-22/seg-1.jsonl.gz"}]}', encoding="utf-8")
    with pytest.raises(DataError, match="listed in .* but missing"):
        merge(StateDir(tmp_path / "state"), source=str(local))
