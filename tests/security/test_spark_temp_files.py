"""The Spark JVM's logging config is cdc's own: not a fixed name in the shared temp directory, where another
local user could plant a symlink (cdc would write through it) or a config of their own (the JVM would load it)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_CONFIG = "rootLogger.level = trace\n# planted by another user\n"
_PROBE = """
import json, os, stat
from cdc.config import SparkSettings
from cdc.spark.session import build_session
spark = build_session(SparkSettings(master="local[1]", driver_memory="512m"))
loaded = spark.sparkContext._jvm.java.lang.System.getProperty("log4j2.configurationFile")
found = {"path": loaded, "file": os.lstat(loaded).st_mode, "dir": os.lstat(os.path.dirname(loaded)).st_mode,
         "owner": os.lstat(os.path.dirname(loaded)).st_uid, "text": open(loaded).read()}
spark.stop()
print(json.dumps(found))
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
