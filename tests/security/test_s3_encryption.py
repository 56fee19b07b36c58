"""`ship --to s3 --sse AES256 | aws:kms [--sse-kms-key-id]` (or cdc.toml [aws] sse): every object cdc writes (data,
multipart data, manifests) carries the server-side encryption asked for (#26). Against moto's S3 and KMS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc import sinks
from cdc.config import AWSSettings
from cdc.sinks.s3 import S3Options, S3Sink
from cdc.state import StateDir
from tests.rig import MotoServer
from tests.sinks.changes import lines_of, make_changes, read_s3_lines, write_changelog

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kms_key(aws_env: dict[str, str], moto_server: MotoServer) -> str:
    return str(moto_server.client("kms").create_key(Description="cdc landing")["KeyMetadata"]["Arn"])


def _changelog(state: Path) -> list[dict[str, Any]]:
    # Two small tables and one of ~9 MB (uploaded in parts above a 5 MiB threshold).
    changes = make_changes(200) + [dict(c, db="hr", table="big") for c in make_changes(30, big_every=1,
                                                                                          big_size=300_000)]
    write_changelog(state / "changelog", changes, per_segment=1000)
    return changes


def _encryption(s3: Any, bucket: str, prefix: str) -> dict[str, tuple[str | None, str | None]]:
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    heads = {key: s3.head_object(Bucket=bucket, Key=key) for key in keys}
    return {key: (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId")) for key, head in heads.items()}


@pytest.mark.parametrize("sse", ["AES256", "aws:kms"])
def test_every_request_that_creates_an_object_asks_for_the_encryption(aws_env: dict[str, str], moto_server: MotoServer,
                                                                      s3: Any, bucket: str, kms_key: str,
                                                                      tmp_path: Path, sse: str) -> None:
    key_id = kms_key if sse == "aws:kms" else None
    aws = AWSSettings(region=moto_server.region, endpoint_url=moto_server.endpoint_url, sse=sse, sse_kms_key_id=key_id)
    sink = sinks.open_sink(aws, sinks.ShipTarget(to=f"s3://{bucket}/enc", compression="none"))
    assert isinstance(sink, S3Sink)
    sink = S3Sink(sink.client, S3Options(**{**sink.options.__dict__, "multipart_threshold": 5 * 2**20,
                                            "part_size": 5 * 2**20}))
    calls: list[tuple[str, dict[str, Any]]] = []
    sink.client.meta.events.register("provide-client-params.s3.*",
                                     lambda params, model, **_: calls.append((model.name, dict(params))))
    changes = _changelog(tmp_path / "state")
    sinks.ship(StateDir(tmp_path / "state"), sink)

    wanted = {"ServerSideEncryption": sse} | ({"SSEKMSKeyId": kms_key} if key_id else {})
    creating = [(name, params) for name, params in calls if name in ("PutObject", "CreateMultipartUpload")]
    assert {name for name, _ in creating} == {"PutObject", "CreateMultipartUpload"}
    assert [(name, {k: params.get(k) for k in wanted}) for name, params in creating] == \
        [(name, wanted) for name, _ in creating]
    lines, objects = read_s3_lines(s3, bucket, "enc/")
    assert lines == lines_of(changes)  # and they read back as written
    assert set(_encryption(s3, bucket, "enc/").values()) == {(sse, kms_key if key_id else None)}


def _ship(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cdc", "ship", "--state-dir", str(tmp_path / "state"), "--json",
                           "--compression", "none", "--multipart-threshold", "5", *args],
                          cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=180)


def test_ship_flags_and_cdc_toml_encrypt_every_object(aws_env: dict[str, str], s3: Any, bucket: str, kms_key: str,
                                                       tmp_path: Path) -> None:
    changes = _changelog(tmp_path / "state")
    done = _ship(tmp_path, "--to", f"s3://{bucket}/kms", "--sse", "aws:kms", "--sse-kms-key-id", kms_key)
    assert done.returncode == 0, done.stderr
    found = _encryption(s3, bucket, "kms/")
    tables = {(c["db"], c["table"]) for c in changes}
    assert len(found) == len(tables) + 1 and any("/_manifests/" in key for key in found)  # an object a table, the manifest
    assert set(found.values()) == {("aws:kms", kms_key)}

    (tmp_path / "state" / "ship-s3.json").unlink()
    (tmp_path / "cdc.toml").write_text('[aws]\nsse = "AES256"\n')
    done = _ship(tmp_path, "--to", f"s3://{bucket}/s3")
    assert done.returncode == 0, done.stderr
    assert set(_encryption(s3, bucket, "s3/").values()) == {("AES256", None)}
    assert json.loads(done.stdout)["records"] == 230


@pytest.mark.parametrize(("args", "message"), [
    (["--sse", "aws:kms:dsse"], "aws.sse = 'aws:kms:dsse' (from flag --sse) is not one of AES256, aws:kms"),
    (["--sse", "AES256", "--sse-kms-key-id", "alias/cdc"],
     "aws.sse_kms_key_id (from flag --sse-kms-key-id) needs aws.sse = 'aws:kms', not 'AES256'"),
])
def test_an_encryption_s3_cannot_apply_is_a_configuration_error(aws_env: dict[str, str], bucket: str, tmp_path: Path,
                                                                args: list[str], message: str) -> None:
    done = _ship(tmp_path, "--to", f"s3://{bucket}/x", *args)
    assert done.returncode == 3, done.stderr
    assert f"ERROR cdc.commands.ship: {message}" in " ".join(done.stderr.split()), done.stderr


def test_the_iam_example_lets_ship_use_the_kms_key_and_nothing_else() -> None:
    policy = json.loads((ROOT / "examples" / "iam-s3-policy.json").read_text())
    kms = [s for s in policy["Statement"] if any(a.startswith("kms:") for a in s["Action"])]
    # PutObject and multipart uploads under SSE-KMS need GenerateDataKey; completing a multipart upload and
    # reading an object back (re-ship's checks, spark-merge) need Decrypt.
    assert [sorted(s["Action"]) for s in kms] == [["kms:Decrypt", "kms:GenerateDataKey"]]
    assert kms[0]["Resource"].startswith("arn:aws:kms:") and ":key/" in kms[0]["Resource"]  # one key, not "*"
    assert kms[0]["Condition"]["StringEquals"]["kms:ViaService"].startswith("s3.")  # only through S3
