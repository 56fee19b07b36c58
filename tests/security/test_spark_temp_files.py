"""The Spark JVM's files are cdc's own: its logging config is not a fixed name in the shared temp directory, where
another local user could plant a symlink (cdc would write through it) or a config of their own (the JVM would load
it); its shuffle and spill files (rows) are not world-readable there; a killed process's leftovers are swept."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.spark import private

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_CONFIG = "rootLogger.level = trace\n# planted by another user\n"
_PROBE = """
import glob, json, os, stat, sys, time
from cdc.config import SparkSettings
from cdc.spark.session import build_session
spark = build_session(SparkSettings(master="local[1]", driver_memory="512m"))
loaded = spark.sparkContext._jvm.java.lang.System.getProperty("log4j2.configurationFile")
rows = spark.range(0, 50000).selectExpr("id", "uuid() AS secret").repartition(3)
rows.groupBy((rows.id % 5).alias("k")).count().collect()  # a shuffle: Spark writes its files
blocks = glob.glob(os.path.join(os.path.dirname(loaded), "local", "blockmgr-*"))
found = {"path": loaded, "file": os.lstat(loaded).st_mode, "dir": os.lstat(os.path.dirname(loaded)).st_mode,
         "owner": os.lstat(os.path.dirname(loaded)).st_uid, "text": open(loaded).read(), "blocks": blocks,
         "shuffle": sum(len(files) for _, _, files in os.walk(blocks[0]))}
print(json.dumps(found), flush=True)
if sys.argv[1:] == ["hang"]:
    time.sleep(600)  # killed -9 by the test, the JVM with it
spark.stop()
"""


@pytest.mark.spark
@pytest.mark.parametrize("planted", ["symlink", "file"])
def test_a_planted_log4j_config_is_neither_followed_nor_loaded(planted: str, tmp_path: Path) -> None:
    shared = tmp_path / "shared-tmp"  # stands for /tmp: TMPDIR points the code at it
    shared.mkdir()
    old = shared / f"cdc-spark-log4j2-{os.getuid()}.properties"  # the name cdc used to write and load
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's file\n")
    if planted == "symlink":
        old.symlink_to(victim)
    else:
        old.write_text(HOSTILE_CONFIG)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(shared), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])

    assert victim.read_text() == "the victim's file\n"
    assert old.is_symlink() if planted == "symlink" else old.read_text() == HOSTILE_CONFIG
    loaded = Path(found["path"])
    assert loaded != old and loaded.parent.parent == shared and loaded.name == "log4j2.properties"
    assert stat.S_ISREG(found["file"]) and stat.S_IMODE(found["file"]) == 0o600
    assert stat.S_ISDIR(found["dir"]) and stat.S_IMODE(found["dir"]) == 0o700 and found["owner"] == os.getuid()
    assert found["text"].startswith("rootLogger.level = error\n")
    assert sorted(p.name for p in shared.iterdir()) == [old.name]  # the private directory went at exit
    # Spark's block manager (shuffle files, spilled blocks) lived under the 0700 directory, not in the shared one.
    assert found["blocks"] and found["shuffle"] > 0, found


def test_a_killed_process_leftovers_are_swept_but_not_a_live_one_or_a_crash_report(tmp_path: Path) -> None:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = int(gone.stdout)  # a pid that just exited (a reuse by now only keeps its directory: not asserted)
    killed = shared / f"cdc-spark-{dead}-abc"
    (killed / "local" / "blockmgr-1" / "0c").mkdir(parents=True, mode=0o700)
    (killed / "local" / "blockmgr-1" / "0c" / "shuffle_0_0_0.data").write_text("rows")
    (killed / "log4j2.properties").write_text("rootLogger.level = error\n")
    crashed = shared / f"cdc-spark-{dead}-def"
    (crashed / "local").mkdir(parents=True)
    (crashed / f"cdc-jvm-error-{dead}.log").write_text("# A fatal error has been detected\n")
    live = shared / f"cdc-spark-{os.getppid()}-ghi"
    (live / "local").mkdir(parents=True)
    other = shared / "cdc-spark-unrelated"
    other.mkdir()
    link = shared / f"cdc-spark-{dead}-link"
    link.symlink_to(other)

    swept = private.sweep_dead(shared)

    assert sorted(p.name for p in swept) == sorted([killed.name, crashed.name])  # only these looked into
    assert not killed.exists()
    assert sorted(p.name for p in crashed.iterdir()) == [f"cdc-jvm-error-{dead}.log"]  # kept for the user
    assert (live / "local").is_dir() and other.is_dir() and link.is_symlink()


@pytest.mark.spark
def test_a_process_killed_with_its_jvm_leaves_nothing_once_the_next_one_starts(tmp_path: Path) -> None:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(shared), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYTHONUNBUFFERED": "1"}
    hung = subprocess.Popen([sys.executable, "-c", _PROBE, "hang"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        first = json.loads(hung.stdout.readline() if hung.stdout else "")
    finally:
        os.killpg(hung.pid, 9)  # the Python process and its JVM: no exit hook of either runs
        hung.wait(timeout=60)
    left = Path(first["path"]).parent
    assert first["shuffle"] > 0 and (left / "local").is_dir()  # the shuffle files stayed behind

    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=300)

    assert done.returncode == 0, done.stderr
    assert not left.exists()
    assert list(shared.iterdir()) == []  # the second one's went at its exit
