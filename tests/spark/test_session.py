"""JVM settings: a one-shot merge's driver JVM (and `cdc run --until-now`'s) gets JIT_OPTIONS, a long-lived session
keeps HotSpot's defaults, `cdc run --follow`'s is bounded (heap, metaspace) for a life of days."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc.spark.session import C1_ONLY_BYTES, JIT_OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def _wanted(option: str) -> tuple[str, str]:
    name = option.removeprefix("-XX:")
    if name[0] in "+-":  # a boolean flag: the bean reports "true"/"false"
        return name[1:], "true" if name[0] == "+" else "false"
    key, value = name.split("=")
    return key, value


WANTED = dict(_wanted(option) for option in JIT_OPTIONS.split())
# What a fresh JVM reports for the options (from its HotSpotDiagnosticMXBean) in a one-shot session.
_PROBE = """
import json, sys
from cdc.config import SparkSettings
from cdc.spark.session import build_session
spark = build_session(SparkSettings(master="local[1]", driver_memory="512m"), **json.loads(sys.argv[2]))
jvm = spark.sparkContext._jvm
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print(json.dumps({name: bean.getVMOption(name).getValue() for name in json.loads(sys.argv[1])}))
spark.stop()
"""


def _probe(names: list[str], tmp_path: Path, **build: Any) -> dict[str, str]:
    """The values of the JVM options `names` in a fresh session's JVM, built with `build`."""
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(names), json.dumps(build)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _values(spark: Any) -> dict[str, str]:
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    return {name: bean.getVMOption(name).getValue() for name in WANTED}


@pytest.mark.spark
def test_one_shot_session_jvm_runs_with_the_jit_options(tmp_path: Path) -> None:
    assert len(WANTED) == 8 and _probe(list(WANTED), tmp_path, one_shot=True) == WANTED


@pytest.mark.spark
def test_one_shot_session_of_a_small_input_runs_c1_only(tmp_path: Path) -> None:
    """A fresh merge of a few changes ends before C2's code pays back its compiling; a big one keeps C2."""
    small = _probe(["TieredStopAtLevel"], tmp_path, one_shot=True, input_bytes=C1_ONLY_BYTES)
    big = _probe(["TieredStopAtLevel"], tmp_path, one_shot=True, input_bytes=C1_ONLY_BYTES + 1)
    assert (small, big) == ({"TieredStopAtLevel": "1"}, {"TieredStopAtLevel": "4"})


# `cdc run`'s session (cdc.pipeline.run_stages.Context), started and closed as a run does.
_RUN = """
import sys, threading
from pathlib import Path
from cdc.config import Settings, SparkSettings
from cdc.pipeline.run_stages import Context
from cdc.state import StateDir
ctx = Context(Settings(spark=SparkSettings(master="local[1]", driver_memory="512m")), StateDir(Path(sys.argv[1])),
              threading.Event(), lambda progress: None)
assert ctx.spark_session().range(3).count() == 3
ctx.close()
"""


@pytest.mark.slow  # 69 s on a slow 2-core machine (fresh JVMs): with test_cli's archive test, -m slow
@pytest.mark.spark
def test_run_records_the_class_archive_its_later_sessions_map(tmp_path: Path) -> None:
    """`cdc run` (its JVM started without an archive) records Spark's classes as it ends, as a one-shot merge does."""
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-c", _RUN, str(tmp_path / "state")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 0, done.stderr
    assert len(list((cache / "cdc").glob("spark-classes-*.jsa"))) == 1 and not list((cache / "cdc").glob(".*.tmp"))


# The JVM options of a `cdc run`'s session started at a merge of argv[2] bytes (argv[3]: --follow or not).
_RUN_OPTIONS = """
import json, sys, threading
from pathlib import Path
from cdc.config import Settings, SparkSettings
from cdc.pipeline.run_stages import Context
from cdc.state import StateDir
ctx = Context(Settings(spark=SparkSettings(master="local[1]", driver_memory="512m")), StateDir(Path(sys.argv[1])),
              threading.Event(), lambda progress: None, follow=sys.argv[3] == "follow")
jvm = ctx.spark_session(int(sys.argv[2])).sparkContext._jvm
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print(json.dumps({name: bean.getVMOption(name).getValue() for name in ("TieredStopAtLevel", "UseSerialGC")}))
ctx.close()
"""


@pytest.mark.spark
def test_until_now_run_s_jvm_is_a_one_shot_merge_s(tmp_path: Path) -> None:
    """`cdc run` without --follow merges what is there and exits: its JVM gets a one-shot merge's options, C1 only
    for a few changes (measured: test_hostile_names' three runs, 91-105 s -> 75-83 s wall, docs/performance.md)."""
    done = subprocess.run([sys.executable, "-c", _RUN_OPTIONS, str(tmp_path / "state"), str(C1_ONLY_BYTES), "once"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"TieredStopAtLevel": "1", "UseSerialGC": "true"}


@pytest.mark.spark
def test_follow_session_jvm_has_a_bounded_heap_and_metaspace(tmp_path: Path) -> None:
    """`cdc run --follow`'s JVM lives as long as the run: follow_driver_memory (not driver_memory) and
    follow_java_options (issue #27: its heap grew to the cap and stayed; metaspace had no bound)."""
    found = _probe(["MaxHeapSize", "MaxMetaspaceSize", "MinHeapFreeRatio", "MaxHeapFreeRatio", "G1PeriodicGCInterval",
                    "UseG1GC"], tmp_path, follow=True)
    assert found == {"MaxHeapSize": str(2**30), "MaxMetaspaceSize": str(384 * 2**20), "MinHeapFreeRatio": "10",
                     "MaxHeapFreeRatio": "30", "G1PeriodicGCInterval": "60000", "UseG1GC": "true"}


def test_long_lived_session_keeps_hotspot_defaults(spark: Any) -> None:
    assert _values(spark) == {"Tier4InvocationThreshold": "5000", "Tier4MinInvocationThreshold": "600",
                              "Tier4CompileThreshold": "15000", "Tier4BackEdgeThreshold": "40000",
                              "UseSerialGC": "false", "MaxInlineLevel": "15", "InlineSmallCode": "2500",
                              "FreqInlineSize": "325"}


@pytest.mark.parametrize(("line", "level"), [
    ("12:00:01 ERROR Executor: Exception in task 0.0", logging.ERROR),
    ("12:00:01 WARN NativeCodeLoader: Unable to load native-hadoop library", logging.WARNING),
    ("# A fatal error has been detected by the Java Runtime Environment:", logging.ERROR),
    ("Error: Could not find or load main class", logging.ERROR),
    ("WARNING: Using incubator modules: jdk.incubator.vector", logging.DEBUG),
    ('Setting default log level to "WARN".', logging.DEBUG),
    ("something else the JVM said", logging.INFO),
])
def test_jvm_lines_are_logged_at_their_level(line: str, level: int) -> None:
    from cdc.spark.session import jvm_level

    assert jvm_level(line) == level
