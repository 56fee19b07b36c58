"""A password given through the environment appears nowhere: not in output, state files, or any process's argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPLICATION_PASSWORD
from tests.rig import DbUser, MariaDB

ROOT = Path(__file__).resolve().parents[1]


def argv_of_all_processes() -> list[str]:
    """Every process's command line, as `ps` shows it to any user on the machine."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue  # the process ended while we looked
    return lines


def test_password_from_environment_never_leaks(mariadb: MariaDB, replication_user: DbUser, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_") and k != "MYSQL_PWD"}
    env |= {"HOME": str(home), "CDC_MYSQL_PASSWORD": REPLICATION_PASSWORD, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "cdc", "check-binlog", "--json", "--state-dir", str(state),
            "--host", mariadb.host, "--port", str(mariadb.port), "--user", replication_user.name, "--server-id", "777004"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen_running, leaked = 0, []
    while proc.poll() is None:
        snapshot = argv_of_all_processes()
        seen_running += any("check-binlog" in line for line in snapshot)
        leaked += [line for line in snapshot if REPLICATION_PASSWORD in line]
        time.sleep(0.02)
    stdout, stderr = (stream.decode() for stream in proc.communicate(timeout=60))
    assert seen_running > 0 and leaked == []
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["server"]["user"] == f"{replication_user.name}@%"
    assert {c["name"]: c["status"] for c in report["checks"]}["grant_replication_slave"] == "ok"
    for text in (stdout, stderr):
        assert REPLICATION_PASSWORD not in text
    assert [p for p in state.rglob("*")] == []  # check-binlog is read-only
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert REPLICATION_PASSWORD.encode() not in path.read_bytes(), path
