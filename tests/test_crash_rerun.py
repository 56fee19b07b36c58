"""tests/crash_rerun.py: a test runs again only when a MariaDB server crashed under it, and only once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

INNER = '''
import os
import shutil
import signal
import time
from pathlib import Path

import pymysql
import pytest

from tests.rig import MariaDB

HERE = Path(__file__).parent


def attempt(name):
    """Which run of the test this is (1, 2, ...), counted in a file beside this one."""
    counter = HERE / name
    count = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(count))
    return count


@pytest.fixture(scope="module")
def server():
    started = MariaDB().start()
    yield started
    started.stop()  # not cleanup(): it keeps a crashed server's error log for a look, and this crash is wanted
    shutil.rmtree(started.base_dir, ignore_errors=True)


@pytest.mark.mariadb
def test_segfault_then_pass(server):
    if attempt("segfault") == 1:
        os.kill(server.pid, signal.SIGSEGV)
        for _ in range(300):
            if not server.is_running:
                break
            time.sleep(0.1)
        pymysql.connect(host=server.host, port=server.port, user="root", connect_timeout=5)


@pytest.mark.mariadb
def test_fails_without_a_crash(server):
    attempt("plain")
    assert False, "a plain failure"
'''


@pytest.mark.mariadb
def test_only_a_test_a_server_crashed_under_runs_again_once(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.crash_rerun", "-p", "no:cacheprovider",
                          "-o", "markers=mariadb", "-o", "addopts=", "--rootdir", str(tmp_path), "-rA", "-W",
                          "default", str(tmp_path / "test_inner.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert (tmp_path / "segfault").read_text() == "2", out  # crashed once, ran again, passed
    assert (tmp_path / "plain").read_text() == "1", out  # a failure without a crash: never rerun
    assert "PASSED test_inner.py::test_segfault_then_pass" in out, out
    assert "FAILED test_inner.py::test_fails_without_a_crash" in out, out
    assert "test_segfault_then_pass ran again: a MariaDB server crashed under it" in out, out
    assert "1 failed, 1 passed" in out, out
