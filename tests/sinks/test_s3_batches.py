"""S3 batches: rolling by size and time, parts, the pending batch pinned in the checkpoint, v1 migration."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdc import sinks
from cdc.config import AWSSettings
from cdc.errors import CdcError, PositionError, UsageError
from cdc.sinks.s3_batches import RollOptions, plan_batch
from cdc.state import StateDir
from tests.sinks.changes import as_v1_manifest, lines_of, make_changes, read_s3_lines, write_changelog

MIB = 1024 * 1024


def s3_sink(aws: AWSSettings, url: str, roll_size: int = 128, **target: Any) -> sinks.S3Sink:
    sink = sinks.open_sink(AWSSettings(**{**aws.__dict__, "roll_size": roll_size}), sinks.ShipTarget(to=url, **target))
    assert isinstance(sink, sinks.S3Sink)
    return sink


def mixed_changelog(directory: Path) -> tuple[list[dict[str, Any]], list[Path]]:
    """~6 MiB in small segments, then one 2+ MiB segment of a single table (cut into parts at 1 MiB)."""
    changes = make_changes(2000, big_every=10, big_size=40_000)
    changes[1500:] = [dict(c, db="shop", table="big") for c in changes[1500:]]
    segments = write_changelog(directory, changes[:1500], per_segment=50)
    segments += write_changelog(directory, changes[1500:], per_segment=1000)
    return changes, segments


def manifests_of(objects: dict[str, bytes]) -> list[dict[str, Any]]:
    return [json.loads(body) for key, body in sorted(objects.items()) if "/_manifests/" in key]


def uncompressed(key: str, body: bytes) -> bytes:
    return gzip.decompress(body) if key.endswith(".gz") else body


def test_small_roll_size_gives_batches_and_parts_within_it(aws, s3, bucket, state_dir: Path) -> None:
    changes, segments = mixed_changelog(state_dir / "changelog")
    summary = sinks.ship(StateDir(state_dir), s3_sink(aws, f"s3://{bucket}/r", roll_size=1))

    lines, objects = read_s3_lines(s3, bucket, "r/")
    assert lines == lines_of(changes)  # every line exactly once across all batches and parts
    data = {k: uncompressed(k, v) for k, v in objects.items() if "/_manifests/" not in k}
    assert max(len(body) for body in data.values()) <= MIB
    manifests = manifests_of(objects)
    assert (summary.batches, summary.objects, summary.segments) == (len(manifests), len(data), len(segments))
    assert len(manifests) > 5
    # the batches tile the change log: consecutive, no segment twice, none left out
    assert [n for m in manifests for n in m["segment_names"]] == [s.name for s in segments]
    assert sorted(k for m in manifests for k in (o["key"] for o in m["objects"])) == sorted(data)
    big = [o for m in manifests for o in m["objects"] if o["table"] == "shop.big"]
    batch = segments[-1].name.removesuffix(".jsonl")
    assert [o["key"].rsplit("/", 1)[1] for o in big] == [f"{batch}-p{n:04d}.jsonl.gz" for n in range(1, len(big) + 1)]
    assert len(big) == 2 and all(o["uncompressed_bytes"] <= MIB for o in big)
    assert [o["first_position"] for o in big] == sorted(o["first_position"] for o in big)
    checkpoint = json.loads((state_dir / "ship-s3.json").read_text())
    assert (checkpoint["version"], checkpoint["pending"], checkpoint["last_segment"]) == (2, None, segments[-1].name)
    assert (checkpoint["batches"], checkpoint["segments"], checkpoint["records"]) == (len(manifests), len(segments), 2000)


def test_a_crash_mid_batch_is_finished_with_the_planned_range_and_bytes(aws, s3, bucket, state_dir: Path) -> None:
    """The progress hook raising after the first object stands in for a crash between uploads."""
    changes, segments = mixed_changelog(state_dir / "changelog")

    def crash(progress: sinks.Progress) -> None:
        if progress.requests >= 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sinks.ship(StateDir(state_dir), s3_sink(aws, f"s3://{bucket}/c"), on_progress=crash)
    pending = json.loads((state_dir / "ship-s3.json").read_text())["pending"]
    assert pending == {"first": segments[0].name, "last": segments[-1].name, "roll_size": 128 * MIB,
                       "compression": "gzip"}  # default roll: everything sealed in one batch
    before = read_s3_lines(s3, bucket, "c/")[1]
    assert len(before) == 1 and not any("/_manifests/" in k for k in before)

    # Rerun with other options: the pending batch keeps its range, part size and compression.
    summary = sinks.ship(StateDir(state_dir), s3_sink(aws, f"s3://{bucket}/c", roll_size=1, compression="zstd"))
    lines, after = read_s3_lines(s3, bucket, "c/")
    assert {k: after[k] for k in before} == before
    assert lines == lines_of(changes) and summary.batches == 1
    assert all(k.endswith((".jsonl.gz", ".json")) for k in after)
    checkpoint = json.loads((state_dir / "ship-s3.json").read_text())
    assert (checkpoint["pending"], checkpoint["last_segment"]) == (None, segments[-1].name)


@pytest.mark.parametrize(("pending", "needle"), [
    ({"first": "seg-0000000001-000000000004-b000000000000.jsonl", "last": "seg-0000000009-000000000004-b000000000000.jsonl",
      "roll_size": MIB, "compression": "gzip"}, "does not match the change log"),
    ("first", "is corrupt"),
    ({"first": "a", "last": "b", "roll_size": "big", "compression": "gzip"}, "is corrupt"),
])
def test_a_pending_batch_that_does_not_fit_stops_and_leaves_the_checkpoint(aws, s3, bucket, state_dir: Path,
                                                                          pending: Any, needle: str) -> None:
    write_changelog(state_dir / "changelog", make_changes(300), per_segment=100)
    sink = s3_sink(aws, f"s3://{bucket}/x")
    before = json.dumps({"version": 2, "destination": sink.destination, "last_segment": None, "pending": pending})
    (state_dir / "ship-s3.json").write_text(before)
    with pytest.raises(PositionError, match=needle) as caught:
        sinks.ship(StateDir(state_dir), sink)
    assert "pending" in caught.value.hint
    assert (state_dir / "ship-s3.json").read_text() == before
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_v1_checkpoint_resumes_after_its_segment(aws, s3, bucket, state_dir: Path) -> None:
    changes = make_changes(600)
    segments = write_changelog(state_dir / "changelog", changes, per_segment=100)
    sink = s3_sink(aws, f"s3://{bucket}/v1")
    (state_dir / "ship-s3.json").write_text(json.dumps({
        "version": 1, "destination": sink.destination, "last_segment": segments[1].name, "segments": 2,
        "records": 7}))
    summary = sinks.ship(StateDir(state_dir), sink)
    assert summary.segments == len(segments) - 2 and summary.first_segment == segments[2].name
    expected = Counter(line for s in segments[2:] for line in s.read_bytes().splitlines())
    assert read_s3_lines(s3, bucket, "v1/")[0] == expected
    checkpoint = json.loads((state_dir / "ship-s3.json").read_text())
    assert {k: checkpoint[k] for k in ("version", "pending", "batches", "segments")} == {
        "version": 2, "pending": None, "batches": 3, "segments": len(segments)}


NOW = 1_800_000_000.0


def _segments(tmp_path: Path, sizes: list[int], ages: list[float]) -> list[Path]:
    """Segment files of these sizes, sealed (mtime) these many seconds before NOW."""
    tmp_path.mkdir(exist_ok=True)
    paths = []
    for number, (size, age) in enumerate(zip(sizes, ages)):
        path = tmp_path / f"seg-{number:03d}.jsonl"
        path.write_bytes(b"x" * size)
        os.utime(path, (NOW - age, NOW - age))
        paths.append(path)
    return paths


def test_plan_batch_closes_on_size_interval_or_until_now(tmp_path: Path) -> None:
    roll = RollOptions(size=MIB, interval=60)
    now = NOW
    fresh = _segments(tmp_path, [400_000, 400_000, 400_000], [5, 4, 3])
    assert plan_batch(fresh, roll, final=False, now=now) == (fresh[:2], 0.0)  # the third would not fit
    assert plan_batch(fresh[:2], roll, final=True, now=now) == (fresh[:2], 0.0)  # until-now: all sealed
    taken, wait = plan_batch(fresh[:2], roll, final=False, now=now)
    assert (taken, wait) == ([], 55.0)  # open: due 60 s after its oldest segment was sealed
    old = _segments(tmp_path / "old", [10], [61])
    assert plan_batch(old, roll, final=False, now=now) == (old, 0.0)
    huge = _segments(tmp_path / "huge", [3 * MIB, 10], [1, 1])
    assert plan_batch(huge, roll, final=False, now=now) == (huge[:1], 0.0)  # a big segment is a batch alone
    assert plan_batch([], roll, final=True, now=now) == ([], 0.0)


def test_roll_options_are_checked() -> None:
    with pytest.raises(UsageError, match="at least 1 MiB"):
        RollOptions(size=1000)
    with pytest.raises(UsageError, match="0 or more seconds"):
        RollOptions(interval=-1)


def test_a_big_batch_is_shipped_without_holding_its_lines(aws, s3, bucket, state_dir: Path) -> None:
    """~40 MiB in one batch: Python's peak allocation stays a fraction of it (index + one chunk + one part)."""
    import tracemalloc

    changes = make_changes(600, big_every=1, big_size=100_000)
    write_changelog(state_dir / "changelog", changes, per_segment=50)
    expected = lines_of(changes)
    payload = sum(p.stat().st_size for p in (state_dir / "changelog").iterdir())
    del changes
    sink = s3_sink(aws, f"s3://{bucket}/m")
    tracemalloc.start()
    try:
        summary = sinks.ship(StateDir(state_dir), sink)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert payload > 40 * MIB and summary.batches == 1
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB for a {payload / MIB:.1f} MiB batch"
    assert read_s3_lines(s3, bucket, "m/")[0] == expected


@pytest.mark.parametrize("same_objects", [True, False])
def test_upgrade_after_a_v1_crash_between_manifest_and_checkpoint(aws, s3, bucket, state_dir: Path,
                                                                   same_objects: bool) -> None:
    """cdc before batches shipped segment 2 with its manifest, then died before its checkpoint."""
    segments = write_changelog(state_dir / "changelog", make_changes(200), per_segment=100)
    assert len(segments) == 2
    sink = s3_sink(aws, f"s3://{bucket}/up")
    sink.deliver_batch(sink.new_batch(segments[1:]), lambda *_: None)  # the one-segment batch has the v1 keys
    key = f"up/_manifests/{segments[1].name[:-6]}.json"
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    if not same_objects:
        manifest["objects"][0]["sha256"] = "0" * 64
    s3.put_object(Bucket=bucket, Key=key, Body=as_v1_manifest(manifest))
    (state_dir / "ship-s3.json").write_text(json.dumps({
        "version": 1, "destination": sink.destination, "last_segment": segments[0].name, "segments": 1,
        "records": 100}))
    if not same_objects:  # not the same objects: another pipeline's manifest, never taken as ours
        with pytest.raises(CdcError, match="already exists with different content"):
            sinks.ship(StateDir(state_dir), sink)
        assert json.loads((state_dir / "ship-s3.json").read_text())["last_segment"] == segments[0].name
        return
    summary = sinks.ship(StateDir(state_dir), sink)
    assert (summary.segments, summary.last_segment) == (1, segments[1].name)
    assert json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())["version"] == 1  # left as it was
    assert read_s3_lines(s3, bucket, "up/")[0] == Counter(segments[1].read_bytes().splitlines())
