"""`cdc ship` / `cdc kinesis-read` the way a user runs them: CliRunner and subprocesses, kill -9 included."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from cdc import sinks
from tests.rig import MotoServer
from tests.sinks.changes import lines_of, make_changes, read_s3_lines, write_changelog
from tests.sinks.cli import ARGV, app

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_ship_json_summary_and_kinesis_read(aws_env, moto_server: MotoServer, stream, state_dir: Path) -> None:
    changes = make_changes(700)
    segments = write_changelog(state_dir / "changelog", changes, per_segment=300)
    result = run("ship", "--to", "kinesis", "--stream", stream, "--state-dir", str(state_dir), "--json",
                 "--endpoint-url", moto_server.endpoint_url)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["segments"], summary["records"], summary["remaining"]) == (len(segments), 700, 0)
    assert summary["destination"] == f"kinesis:{stream}" and summary["last_segment"] == segments[-1].name

    read = run("kinesis-read", "--stream", stream)
    assert read.exit_code == 0
    # the CliRunner decodes stdout as UTF-8; lines hold \u2028 etc. only as JSON escapes or raw UTF-8
    received = Counter(line.encode() for line in read.stdout.split("\n")[:-1])
    assert received == lines_of(changes)


def test_ship_to_s3_url_takes_settings_from_cdc_toml(aws_env, s3, bucket, state_dir: Path, tmp_path: Path) -> None:
    changes = make_changes(200)
    write_changelog(state_dir / "changelog", changes)
    toml = tmp_path / "cdc.toml"
    toml.write_text(f'state_dir = "{state_dir}"\n[aws]\nbucket = "{bucket}"\nprefix = "from-toml"\n'
                    'roll_size = 2\nroll_interval = 0.5\n')
    result = run("ship", "--to", "s3", "--config", str(toml), "--compression", "zstd", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["destination"] == f"s3://{bucket}/from-toml"
    assert (summary["batches"], summary["objects"]) == (1, 5)  # 5 tables in one batch
    lines, objects = read_s3_lines(s3, bucket, "from-toml/")
    assert lines == lines_of(changes)
    manifest = next(json.loads(body) for key, body in objects.items() if "/_manifests/" in key)
    assert manifest["roll_size"] == 2 * 2**20


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--to", "kinesis", "--stream", "no-such-stream"], "Kinesis stream 'no-such-stream'"),
        (["--to", "s3://no-such-bucket-cdc/p"], "S3 bucket 'no-such-bucket-cdc'"),
    ],
)
def test_permanent_error_exits_1_and_leaves_the_checkpoint(aws_env, state_dir: Path, args: list[str],
                                                           needle: str) -> None:
    write_changelog(state_dir / "changelog", make_changes(50))
    stage = "ship-kinesis" if "kinesis" in args else "ship-s3"
    destination = "kinesis:no-such-stream" if "kinesis" in args else "s3://no-such-bucket-cdc/p"
    before = json.dumps({"version": 1, "destination": destination, "last_segment": "seg-0", "records": 0})
    (state_dir / f"{stage}.json").write_text(before)
    result = run("ship", *args, "--state-dir", str(state_dir))
    assert result.exit_code == 1
    assert needle in result.stderr and "not found" in result.stderr and "fix:" in result.stderr
    assert (state_dir / f"{stage}.json").read_text() == before


def test_checkpoint_of_another_destination_is_refused(aws_env, stream, state_dir: Path) -> None:
    write_changelog(state_dir / "changelog", make_changes(20))
    (state_dir / "ship-kinesis.json").write_text('{"version": 1, "destination": "kinesis:other", "last_segment": "x"}')
    result = run("ship", "--to", "kinesis", "--stream", stream, "--state-dir", str(state_dir))
    assert result.exit_code == 5 and "belongs to kinesis:other" in result.stderr


def test_bad_options_are_usage_errors(aws_env, state_dir: Path) -> None:
    assert run("ship", "--to", "ftp", "--state-dir", str(state_dir)).exit_code == 2
    assert run("ship", "--to", "kinesis", "--stream", "s", "--partition-by", "row").exit_code == 2
    assert run("ship", "--to", "kinesis", "--stream", "s", "--explicit-hash-key", "shop.t=abc").exit_code == 2
    assert run("ship", "--to", "kinesis").exit_code == 3  # no stream anywhere
    assert run("ship", "--to", "s3://b/p", "--roll-size", "0").exit_code == 2
    assert run("ship", "--to", "s3://b/p", "--roll-interval", "-1").exit_code == 2


def _ship_argv(stream: str, state_dir: Path, *extra: str) -> list[str]:
    return [*ARGV, "ship", "--to", "kinesis", "--stream", stream, "--state-dir", str(state_dir), *extra]


@pytest.mark.parametrize("kind", ["kinesis", "s3"])
def test_kill_9_at_random_moments_then_rerun_loses_nothing(aws_env, stream, kinesis, s3, bucket, state_dir: Path,
                                                           kind: str) -> None:
    # s3: 1 MiB batches, so ~4 MiB make batches of several objects to be killed between and inside
    changes = make_changes(4000, big_every=40 if kind == "s3" else 0, big_size=20_000)
    write_changelog(state_dir / "changelog", changes, per_segment=100)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = _ship_argv(stream, state_dir) if kind == "kinesis" else [
        *ARGV, "ship", "--to", f"s3://{bucket}/killed", "--state-dir", str(state_dir), "--roll-size", "1"]
    rng = random.Random(3)
    # Kill when the checkpoint passes random record counts (s3: the bucket passes random object
    # counts), plus a random few ms: that lands inside requests and between data and checkpoint,
    # not just before or after a run.
    progress = (lambda: _shipped(state_dir, kind)) if kind == "kinesis" else (lambda: _object_count(s3, bucket))
    for target in sorted(rng.sample(range(0, 3800, 100) if kind == "kinesis" else range(0, 16), 4)):
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: progress() > target or process.poll() is not None)
        time.sleep(rng.uniform(0, 0.02))
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL, "finished before the kill: the test did not test anything"
    final = subprocess.run([*argv, "--json"], cwd=REPO, env=env, capture_output=True)
    assert final.returncode == 0, final.stderr.decode()

    received = list(sinks.read_stream(kinesis, stream)) if kind == "kinesis" else list(
        read_s3_lines(s3, bucket, "killed/")[0].elements())
    expected = lines_of(changes)
    assert set(received) == set(expected)  # nothing missing, nothing foreign
    if kind == "kinesis":
        assert len(received) > len(changes)  # the kills did cause replays (at-least-once)
    else:
        assert Counter(received) == expected  # deterministic keys: a replay rewrites the same objects
    by_position = {orjson.loads(data)["position"]: data for data in received}  # the consumer's dedup
    assert Counter(by_position.values()) == expected  # exactly once each after dedup
    checkpoint = json.loads((state_dir / f"ship-{kind}.json").read_text())
    assert checkpoint["last_segment"] == sorted(p.name for p in (state_dir / "changelog").iterdir())[-1]


def test_follow_ships_new_segments_and_stops_cleanly_on_sigterm(aws_env, stream, kinesis, state_dir: Path) -> None:
    first, later = make_changes(300, seed=1), make_changes(600, seed=1)[300:]
    write_changelog(state_dir / "changelog", first)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(_ship_argv(stream, state_dir, "--follow", "--poll-interval", "0.2", "--json"),
                               cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: (state_dir / "ship-kinesis.json").exists())
        write_changelog(state_dir / "changelog", later)
        _wait_for(lambda: json.loads((state_dir / "ship-kinesis.json").read_text())["records"] == 600)
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    assert json.loads(out)["records"] == 600
    assert Counter(sinks.read_stream(kinesis, stream)) == lines_of(first + later)


def test_kill_9_mid_batch_then_rerun_with_other_options_finishes_the_planned_batch(
        aws_env, s3, bucket, state_dir: Path) -> None:
    """The pending batch is re-shipped with its own range, part size and compression: same keys, same bytes."""
    changes = make_changes(3000, big_every=10, big_size=20_000)
    write_changelog(state_dir / "changelog", changes, per_segment=100)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [*ARGV, "ship", "--to", f"s3://{bucket}/pinned", "--state-dir", str(state_dir)]
    process = subprocess.Popen([*argv, "--roll-size", "1"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    # Kill once a batch is planned and some of its objects are up, before its manifest.
    _wait_for(lambda: _mid_batch(state_dir, s3, bucket) or process.poll() is not None)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "finished before the kill: the test did not test anything"
    pending = json.loads((state_dir / "ship-s3.json").read_text())["pending"]
    assert pending is not None and pending["roll_size"] == 2**20
    before = read_s3_lines(s3, bucket, "pinned/")[1]

    final = subprocess.run([*argv, "--roll-size", "3", "--compression", "zstd", "--json"], cwd=REPO, env=env,
                           capture_output=True)
    assert final.returncode == 0, final.stderr.decode()  # no "already exists with different content"
    lines, objects = read_s3_lines(s3, bucket, "pinned/")
    assert {key: objects[key] for key in before} == before  # what the killed run wrote is untouched
    assert lines == lines_of(changes)  # nothing missing, nothing twice across keys
    manifests = [json.loads(body) for key, body in objects.items() if "/_manifests/" in key]
    listed = {o["key"] for m in manifests for o in m["objects"]}
    assert listed == {key for key in objects if "/_manifests/" not in key}  # no orphan beside the manifests
    batch_id = pending["first"][:-6] if pending["first"] == pending["last"] else \
        f"{pending['first'][:-6]}_{pending['last'][:-6]}"
    finished = [m for m in manifests if m["batch"] == batch_id]
    assert len(finished) == 1 and finished[0]["compression"] == "gzip" and finished[0]["roll_size"] == 2**20
    later = [m for m in manifests if m["segments"][0] > pending["last"]]
    assert later and all(m["compression"] == "zstd" for m in later)  # the new options apply after it


def test_follow_ships_an_open_batch_once_the_roll_interval_has_passed(aws_env, s3, bucket, state_dir: Path) -> None:
    first, later, unplanned = (make_changes(900, seed=1)[i:i + 300] for i in (0, 300, 600))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([*ARGV, "ship", "--to", f"s3://{bucket}/f", "--state-dir", str(state_dir), "--follow",
                                "--roll-interval", "1.5", "--poll-interval", "0.1", "--json"],
                               cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for lines, total in ((first, 300), (later, 600)):
            written = time.time()
            write_changelog(state_dir / "changelog", lines, per_segment=100)
            _wait_for(lambda: _shipped(state_dir, "s3") == total)
            assert time.time() - written >= 1.4  # the open batch waited for its interval, not for more data
        write_changelog(state_dir / "changelog", unplanned, per_segment=100)  # a batch opens: SIGTERM within 1.5 s
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    summary = json.loads(out)
    assert (summary["records"], summary["batches"], summary["segments"], summary["remaining"]) == (600, 2, 6, 3)
    assert json.loads((state_dir / "ship-s3.json").read_text())["pending"] is None  # the open batch: nothing pinned
    lines, objects = read_s3_lines(s3, bucket, "f/")
    assert lines == lines_of(first + later) and len([k for k in objects if "/_manifests/" in k]) == 2
    assert _shipped(state_dir, "s3") == 600


def test_a_pending_batch_outside_the_change_log_exits_5(aws_env, bucket, state_dir: Path) -> None:
    write_changelog(state_dir / "changelog", make_changes(50))
    before = json.dumps({"version": 2, "destination": f"s3://{bucket}/p", "last_segment": None,
                         "pending": {"first": "seg-x.jsonl", "last": "seg-y.jsonl", "roll_size": 2**20,
                                     "compression": "gzip"}})
    (state_dir / "ship-s3.json").write_text(before)
    result = run("ship", "--to", f"s3://{bucket}/p", "--state-dir", str(state_dir))
    assert result.exit_code == 5 and "pending batch" in result.stderr and "does not match" in result.stderr
    assert (state_dir / "ship-s3.json").read_text() == before


def _mid_batch(state_dir: Path, s3: Any, bucket: str) -> bool:
    """A batch is pinned in the checkpoint and has data objects up, but no manifest yet."""
    try:
        pending = json.loads((state_dir / "ship-s3.json").read_text()).get("pending")
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    if not pending:
        return False
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    first = pending["first"][:-6]
    return any(first in k for k in keys) and not any("/_manifests/" in k and first in k for k in keys)


def _object_count(s3: Any, bucket: str) -> int:
    return int(s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0))


def _shipped(state_dir: Path, kind: str = "kinesis") -> int:
    try:
        return int(json.loads((state_dir / f"ship-{kind}.json").read_text())["records"])
    except FileNotFoundError:
        return -1


def _wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)
