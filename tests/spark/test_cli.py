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
from tests.spark.test_merge import batch_rows, build, check_batch, lake_state
from tests.spark.workload import T1, T2, model

ROOT = Path(__file__).resolve().parents[2]


def run_cli(state: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "cdc", "spark-merge", "--state-dir", str(state), "--master", "local[2]",
                             "--driver-memory", "1g", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.spark  # cdc spark-merge in a subprocess starts its own JVM
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
    # Without a terminal, a log line per phase on stderr (stdout: the summary alone), in order.
    said = [line.split("cdc.commands.spark_merge: ", 1)[1].removeprefix("spark-merge: ")
            for line in err.decode().splitlines() if "cdc.commands.spark_merge: " in line]
    kinds = {"finding new segments": "listing", "starting Spark (local[2])": "starting", "scanning ": "scanning",
             "merging ": "merging", "writing batch b000000000001 ": "writing"}
    seen = [next((kind for start, kind in kinds.items() if line.startswith(start)),
                 "table" if " changes -> " in line else line) for line in said]
    assert seen == ["listing", "starting", "scanning", "merging", "table", "merging", "table", "writing"], said
    assert said[3].endswith("(1/2): compacting") and said[5].endswith("(2/2): compacting")
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

    from cdc.commands.main import app

    result = CliRunner().invoke(app, ["spark-merge", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "s3://bucket/prefix" in result.output and "--max-segments" in result.output


@pytest.mark.parametrize("bad", ["nokey", "=v"])
def test_bad_conf_is_a_config_error(bad: str) -> None:
    from cdc.errors import ConfigError
    from cdc.spark.session import parse_conf

    with pytest.raises(ConfigError, match="is not key=value"):
        parse_conf([bad])


# 122 s on a slow 2-core machine (three fresh JVMs): -m slow; CI keeps test_session's archive test.
@pytest.mark.slow
@pytest.mark.spark  # cdc spark-merge in a subprocess starts its own JVM
def test_class_archive_recorded_once_then_used_and_a_damaged_one_dropped(tmp_path: Path) -> None:
    """The first run's JVM records Spark's classes (AppCDS); later runs map them; a damaged archive costs nothing but speed.

    Two runs: a third (no archive again, so recording again) repeated the first at ~40 s of CI time.
    """
    cache, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()
    # TMPDIR: the JVM that meets the damaged archive may leave its crash report (cdc-jvm-error-<pid>.log) there.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache), "TMPDIR": str(temp)}
    outputs = []
    for run in range(2):
        state = tmp_path / f"state{run}"
        w = build(state, seed=4)
        w.write_segments(w.lines, per_segment=10_000)
        done = subprocess.run([sys.executable, "-m", "cdc.spark.job", "--state-dir", str(state), "--master", "local[2]",
                               "--driver-memory", "1g"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        archives = list((cache / "cdc").glob("spark-classes-*.jsa"))
        if run == 0:
            assert json.loads(done.stdout)["batch_id"] == "b000000000001"  # stdout is the summary alone
            assert len(archives) == 1 and not list((cache / "cdc").glob(".*.tmp"))
            archives[0].write_bytes(archives[0].read_bytes()[: 1 << 20])  # damaged (truncated) before run 2
        elif run == 1:
            assert archives == []  # dropped: the JVM could not map it, the merge started without it
            assert json.loads(done.stdout)["batch_id"]  # what the failed JVM printed went to stderr
        outputs.append({t: read_lake_table(state / "lake", *t).by_key() for t in (T1, T2)})  # type: ignore[union-attr]
    assert outputs[0] == outputs[1] == {t: model(w.lines, w.history)[t] for t in (T1, T2)}


def test_unadopted_class_archives_are_dropped_after_ten_minutes(tmp_path: Path) -> None:
    """A recording JVM that outlived its run (killed, or slower than stop_session's wait) leaves a temp archive."""
    from cdc.spark.session import _drop_stale_recordings

    old, fresh = tmp_path / ".spark-classes-k.jsa.11.tmp", tmp_path / ".spark-classes-k.jsa.12.tmp"
    for path in (old, fresh):
        path.write_bytes(b"archive")
    os.utime(old, (time.time() - 601, time.time() - 601))
    _drop_stale_recordings(tmp_path)
    assert not old.exists() and fresh.exists()  # the fresh one may still be being written


@pytest.mark.parametrize("java_home", ["/nonexistent-jdk", "fake-java-8"])
def test_without_a_usable_java_exits_4_naming_it_before_spark_starts(tmp_path: Path, java_home: str) -> None:
    """No JVM is started (nothing to mark as spark): the check runs before PySpark launches one."""
    if java_home == "fake-java-8":  # a java that says it is 8: too old for PySpark 4
        (tmp_path / "jdk" / "bin").mkdir(parents=True)
        fake = tmp_path / "jdk" / "bin" / "java"
        fake.write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
        fake.chmod(0o755)
        java_home = str(tmp_path / "jdk")
    state = tmp_path / "state"
    w = build(state, seed=3)
    w.write_segments(w.lines[:20], per_segment=10)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAVA_HOME": java_home}
    done = subprocess.run([sys.executable, "-m", "cdc", "spark-merge", "--state-dir", str(state)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stderr
    assert "Spark needs Java 17+" in done.stderr and f"{java_home}/bin/java" in done.stderr, done.stderr
    assert "apt-get install openjdk-17-jre-headless" in done.stderr and "Traceback" not in done.stderr
    assert not (state / "merge.json").exists() and not (state / "lake").exists()


# `cdc spark-merge` with the superseded-lines pass made at any size (its thresholds are for a 1M-change merge).
ANY_SIZE = """
import sys
import cdc.spark.latest
cdc.spark.latest.FEWER_LINES_BYTES = 0
cdc.spark.latest.SKIP_AT_LEAST = 0.0
sys.argv = ["cdc", *sys.argv[1:]]
from cdc.commands.main import run
run()
"""


@pytest.mark.spark  # its own JVM
def test_a_fresh_process_leaves_superseded_lines_out_beside_its_jvms_start(tmp_path: Path) -> None:
    """The pass runs on a thread while the session starts (its C code holds no interpreter lock), and the lake and the
    batch are the model's."""
    state = tmp_path / "state"
    w = build(state, seed=13)
    w.write_segments(w.lines, per_segment=40)
    done = subprocess.run([sys.executable, "-c", ANY_SIZE, "spark-merge", "--state-dir", str(state), "--master",
                           "local[2]", "--driver-memory", "1g", "--json"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["superseded"] > 0 and {"latest", "scan", "session"} <= summary["phases"].keys(), summary
    expected = model(w.lines, w.history)
    batch_dir = state / "batches" / summary["batch_id"]
    manifest = json.loads((batch_dir / "manifest.json").read_text())
    for table in (T1, T2):
        assert lake_state(state / "lake", table) == expected[table], table
        check_batch({}, expected[table], batch_rows(batch_dir, manifest, table), {line["position"] for line in w.lines})
    assert not list(state.rglob("latest-*")), "the pass's files outlived the run"
