"""One SparkSession for the whole suite (start-up costs seconds), with the job's own defaults, and one class
archive for the JVMs of the `cdc` processes the suite starts.

Registered for every test by tests/conftest.py (pytest_plugins): spark, verify and pipeline tests share them.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.config import SparkSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from cdc.spark.session import build_session

    session = build_session(SparkSettings(master="local[2]", driver_memory="1g"))
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_class_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Spark's class archive in the suite's cache (~/.cache/cdc), recorded once if missing, as a user's first
    `cdc spark-merge` records it; the JVMs of the `cdc run`s the suite starts map it.

    `cdc run` maps an archive but never records one, so without this, whether a test's runs found one hung on
    whether some spark-merge had run before it on this machine, and each JVM start without it cost more CPU
    (docs/performance.md, "Test suite"). Starting without an archive, recording it and a damaged one are
    tested by tests/spark/test_cli.py with a cache of its own. A lock keeps xdist's workers from recording twice;
    a recording that fails is a warning, not an error: the tests that need Spark fail by themselves.
    """
    from cdc.spark.session import class_archive
    from tests.spark.test_merge import build

    archive = class_archive()
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / ".suite-recording.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists():
            state = tmp_path_factory.mktemp("class-archive") / "state"
            w = build(state, seed=1)
            w.write_segments(w.lines, per_segment=10_000)
            done = subprocess.run([sys.executable, "-m", "cdc.spark.job", "--state-dir", str(state), "--master",
                                   "local[2]", "--driver-memory", "1g"], cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
            if done.returncode != 0 or not archive.exists():
                # Only speed is lost: the tests that need Spark fail on their own if it cannot start.
                warnings.warn(f"no Spark class archive recorded at {archive}: {done.stderr[-2000:]}", stacklevel=1)
    return archive
