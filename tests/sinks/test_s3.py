"""S3 sink against moto's server: layout, deterministic bytes, conditional create, manifests, multipart."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from cdc import sinks
from cdc.config import AWSSettings
from cdc.errors import CdcError
from cdc.s3keys import encode_component
from cdc.sinks.s3 import S3Options, S3Sink, object_key, put_once
from cdc.state import StateDir
from tests.sinks.changes import lines_of, make_changes, read_s3_lines, write_changelog

SEG = r"seg-[0-9]{10}-[0-9]{12}-[bs][0-9]{12}"
KEY = re.compile(rf"^lake/table=[A-Za-z0-9_%-]+\.[A-Za-z0-9_%-]+/dt=\d{{4}}-\d{{2}}-\d{{2}}/{SEG}(_{SEG})?(-p\d{{4}})?"
                 r"\.jsonl(\.gz|\.zst)?$")


def s3_sink(aws: AWSSettings, url: str, **target: Any) -> sinks.S3Sink:
    sink = sinks.open_sink(aws, sinks.ShipTarget(to=url, **target))
    assert isinstance(sink, S3Sink)
    return sink


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_ship_to_s3_delivers_every_line_in_deterministic_objects(aws, s3, bucket, state_dir: Path,
                                                                 compression: str) -> None:
    """Many small segments, --until-now, default roll: one batch, one object per table, one manifest."""
    changes = make_changes(5000 if compression == "gzip" else 800, big_every=997)
    segments = write_changelog(state_dir / "changelog", changes, per_segment=100)
    summary = sinks.ship(StateDir(state_dir), s3_sink(aws, f"s3://{bucket}/lake", compression=compression))

    lines, objects = read_s3_lines(s3, bucket, "lake/")
    assert lines == lines_of(changes)
    data_keys = [k for k in objects if "/_manifests/" not in k]
    assert all(KEY.match(k) for k in data_keys), [k for k in data_keys if not KEY.match(k)]
    batch = f"{segments[0].name[:-6]}_{segments[-1].name[:-6]}"
    manifests = sorted(k for k in objects if "/_manifests/" in k)
    assert len(segments) > 5 and manifests == [f"lake/_manifests/{batch}.json"]
    assert (summary.records, summary.segments, summary.batches) == (len(changes), len(segments), 1)
    manifest = json.loads(objects[manifests[0]])
    assert manifest["segments"] == [segments[0].name, segments[-1].name]
    assert manifest["segment_names"] == [s.name for s in segments]
    assert manifest["batch"] == batch and manifest["compression"] == compression
    tables = [o["table"] for o in manifest["objects"]]
    assert sorted(tables) == sorted({f"{c['db']}.{c['table']}" for c in changes})  # one object per table
    assert sorted(o["key"] for o in manifest["objects"]) == sorted(data_keys) and summary.objects == len(tables)
    assert all(k.rsplit("/", 1)[1].startswith(batch + ".") for k in data_keys)
    assert sum(o["records"] for o in manifest["objects"]) == manifest["records"] == len(changes)
    for entry in manifest["objects"]:
        assert entry["first_position"] <= entry["last_position"] and entry["bytes"] == len(objects[entry["key"]])

    # A re-ship (checkpoint lost) writes the same keys with the same bytes: 412s, accepted as identical.
    (state_dir / "ship-s3.json").unlink()
    sinks.ship(StateDir(state_dir), s3_sink(aws, f"s3://{bucket}/lake", compression=compression))
    assert read_s3_lines(s3, bucket, "lake/")[1] == objects


def test_gzip_objects_are_byte_deterministic(aws, s3, bucket, tmp_path: Path) -> None:
    changes = make_changes(300)
    for run in ("a", "b"):
        write_changelog(tmp_path / run / "changelog", changes)
        sinks.ship(StateDir(tmp_path / run), s3_sink(aws, f"s3://{bucket}/{run}"))
    _, a = read_s3_lines(s3, bucket, "a/")
    _, b = read_s3_lines(s3, bucket, "b/")
    # the manifests name their keys, which differ only by the prefix
    assert {k[2:]: v.replace(b'"a/', b'"b/') for k, v in a.items()} == {k[2:]: v for k, v in b.items()}


def test_hostile_names_give_safe_unambiguous_keys() -> None:
    assert encode_component("customers") == "customers"
    assert encode_component('t"ab\\le 💥/x') == "t%22ab%5Cle%20%F0%9F%92%A5%2Fx"
    assert encode_component("..") == "%2E%2E"
    assert object_key("p", "a.b", "c", "2026-11-22T07:00:01Z", "seg-1", "gzip") != object_key(
        "p", "a", "b.c", "2026-11-22T07:00:01Z", "seg-1", "gzip")
    assert object_key("p", "shop", "a.b", "2026-11-22T07:00:01Z", "seg-1", "gzip") == \
        "p/table=shop.a%2Eb/dt=2026-11-22/seg-1.jsonl.gz"


def test_existing_object_with_other_content_stops(s3, bucket) -> None:
    put_once(s3, bucket, "k/x.jsonl", b"one\n", content_sha256=hashlib.sha256(b"one\n").hexdigest(), what="t")
    assert put_once(s3, bucket, "k/x.jsonl", b"one\n", content_sha256=hashlib.sha256(b"one\n").hexdigest(),
                    what="t") == 2  # 412 + HEAD: already there, identical
    with pytest.raises(CdcError, match="already exists with different content"):
        put_once(s3, bucket, "k/x.jsonl", b"two\n", content_sha256=hashlib.sha256(b"two\n").hexdigest(), what="t")
    assert s3.get_object(Bucket=bucket, Key="k/x.jsonl")["Body"].read() == b"one\n"


def test_large_objects_use_conditional_multipart(aws, s3, bucket, state_dir: Path) -> None:
    # one table, ~9 MB: two 5 MiB parts
    changes = [dict(c, db="shop", table="big") for c in make_changes(40, big_every=1, big_size=300_000)]
    write_changelog(state_dir / "changelog", changes, per_segment=1000)
    sink = S3Sink(sinks.make_client("s3", aws), S3Options(bucket=bucket, prefix="mp", compression="none",
                                                          multipart_threshold=5 * 2**20, part_size=5 * 2**20))
    summary = sinks.ship(StateDir(state_dir), sink)
    lines, objects = read_s3_lines(s3, bucket, "mp/")
    assert lines == lines_of(changes)
    assert len(objects) == 2 and summary.requests == 2 + 2 + 1  # create + 2 parts + complete, manifest
    (state_dir / "ship-s3.json").unlink()
    sinks.ship(StateDir(state_dir), sink)  # the conditional completion finds them there
    assert read_s3_lines(s3, bucket, "mp/")[1] == objects
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_missing_bucket_is_a_permanent_error(aws, state_dir: Path) -> None:
    write_changelog(state_dir / "changelog", make_changes(10))
    with pytest.raises(CdcError) as caught:
        sinks.ship(StateDir(state_dir), s3_sink(aws, "s3://no-such-bucket-cdc/x"))
    assert "no-such-bucket-cdc" in str(caught.value) and "aws s3 mb" in str(caught.value)
    assert not (state_dir / "ship-s3.json").exists()


# S3 API operation -> the IAM action that authorizes it.
_ACTIONS = {"PutObject": "s3:PutObject", "HeadObject": "s3:GetObject", "GetObject": "s3:GetObject",
            "CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject",
            "CompleteMultipartUpload": "s3:PutObject", "AbortMultipartUpload": "s3:AbortMultipartUpload",
            "ListObjectsV2": "s3:ListBucket", "HeadBucket": "s3:ListBucket"}


def _allowed(policy: dict[str, Any], action: str, bucket: str, key: str | None, prefix: str | None) -> bool:
    """A minimal IAM evaluation of the example policy (Allow statements, Resource and StringLike s3:prefix)."""
    import fnmatch

    resource = f"arn:aws:s3:::{bucket}" + (f"/{key}" if key is not None else "")
    for statement in policy["Statement"]:
        if action not in statement["Action"] or not fnmatch.fnmatchcase(resource, statement["Resource"]):
            continue
        wanted = statement.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
        if wanted is None or (prefix is not None and any(fnmatch.fnmatchcase(prefix, w) for w in wanted)):
            return True
    return False


def test_every_request_is_allowed_by_the_example_least_privilege_policy(aws, s3, state_dir: Path) -> None:
    """examples/iam-s3-policy.json grants only the ship prefix: a ship, a re-ship (412 + HEAD) and multipart fit it."""
    root = Path(__file__).resolve().parents[2]
    policy = json.loads((root / "examples" / "iam-s3-policy.json").read_text())
    bucket, prefix = "acme-cdc-landing", "mysql/hr"  # the policy's names
    # The moto server is the session's: test_init's runbook test may have made the bucket already (a serial run).
    if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=bucket)
    changes = [dict(c, db="hr", table="big") for c in make_changes(40, big_every=1, big_size=300_000)]
    write_changelog(state_dir / "changelog", changes, per_segment=1000)
    sink = S3Sink(sinks.make_client("s3", aws), S3Options(bucket=bucket, prefix=prefix, compression="none",
                                                          multipart_threshold=5 * 2**20, part_size=5 * 2**20))
    calls: list[tuple[str, dict[str, Any]]] = []
    sink.client.meta.events.register("provide-client-params.s3.*",
                                     lambda params, model, **_: calls.append((model.name, dict(params))))
    sinks.ship(StateDir(state_dir), sink)
    (state_dir / "ship-s3.json").unlink()
    sinks.ship(StateDir(state_dir), sink)
    assert {name for name, _ in calls} >= {"ListObjectsV2", "CreateMultipartUpload", "UploadPart", "PutObject",
                                          "HeadObject"}
    refused = [(name, params) for name, params in calls
               if not _allowed(policy, _ACTIONS[name], params["Bucket"], params.get("Key"), params.get("Prefix"))]
    assert refused == []
