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
    toml.write_text(f'state_dir = "{state_dir}"\n[aws]\nbucket = "{bucket}"\nprefix = "from-toml"\n')
    result = run("ship", "--to", "s3", "--config", str(toml), "--compression", "zstd", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["destination"] == f"s3://{bucket}/from-toml"
    assert read_s3_lines(s3, bucket, "from-toml/")[0] == lines_of(changes)


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


def _ship_argv(stream: str, state_dir: Path, *extra: str) -> list[str]:
    return [*ARGV, "ship", "--to", "kinesis", "--stream", stream, "--state-dir", str(state_dir), *extra]


@pytest.mark.parametrize("kind", ["kinesis", "s3"])
def test_kill_9_at_random_moments_then_rerun_loses_nothing(aws_env, stream, kinesis, s3, bucket, state_dir: Path,
                                                           kind: str) -> None:
    changes = make_changes(4000)
    write_changelog(state_dir / "changelog", changes, per_segment=100)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = _ship_argv(stream, state_dir) if kind == "kinesis" else [
        *ARGV, "ship", "--to", f"s3://{bucket}/killed", "--state-dir", str(state_dir)]
    rng = random.Random(3)
    # Kill when the checkpoint passes random record counts, plus a random few ms: that lands
    # inside requests and between data and checkpoint, not just before or after a run.
    for target in sorted(rng.sample(range(0, 3800, 100), 4)):
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: _shipped(state_dir, kind) > target or process.poll() is not None)
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
