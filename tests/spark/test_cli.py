"""`cdc spark-merge` as a user runs it: a subprocess, killed with SIGKILL mid-merge, then rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from tests.spark.workload import T1, T2, model
from tests.spark.test_merge import batch_rows, build, check_batch

ROOT = Path(__file__).resolve().parents[2]


def run_cli(state: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "cdc", "spark-merge", "--state-dir", str(state), "--master", "local[2]",
                             "--driver-memory", "1g", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_9_mid_merge_then_rerun_equals_uninterrupted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    w = build(state, seed=9)
    w.write_segments(w.lines, per_segment=10_000)
    proc = run_cli(state, "--json")
    # kill once Spark has started writing the lake (the worst moment: half-written version)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not (state / "lake").exists():
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the kill must land mid-merge, else this test tests nothing
    assert proc.returncode == -signal.SIGKILL and not (state / "merge.json").exists()
    rerun = run_cli(state, "--json")
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err.decode()
    summary = json.loads(out)
    assert summary["batch_id"] == "b000000000001"
    expected = model(w.lines, w.history)
    batch_dir = state / "batches" / "b000000000001"
    manifest = json.loads((batch_dir / "manifest.json").read_text())
    everything = {line["position"] for line in w.lines}
    for table in (T1, T2):
        assert read_lake_table(state / "lake", *table).by_key() == expected[table]  # type: ignore[union-attr]
        check_batch({}, expected[table], batch_rows(batch_dir, manifest, table), everything)
    assert not list((state / "batches").glob(".*.tmp"))  # no staging left behind
    assert merge(StateDir(state)).batch_id is None  # nothing new: no Spark started, nothing changes


def test_help_documents_sources() -> None:
    from typer.testing import CliRunner

    from commands.main import app

    result = CliRunner().invoke(app, ["spark-merge", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "s3://bucket/prefix" in result.output and "--max-segments" in result.output


@pytest.mark.parametrize("bad", ["nokey", "=v"])
def test_bad_conf_is_a_config_error(bad: str) -> None:
    from cdc.errors import ConfigError
    from cdc.spark.session import parse_conf

    with pytest.raises(ConfigError, match="is not key=value"):
        parse_conf([bad])
