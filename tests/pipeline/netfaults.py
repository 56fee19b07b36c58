"""What the network-fault tests share: `cdc` subprocesses pointed through a FaultProxy, and waiting on checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cdc.changelog import file_seq
from tests.rig import MariaDB
from tests.rig.faultproxy import FaultProxy

ROOT = Path(__file__).resolve().parents[2]


def cdc_env(mysql: MariaDB | FaultProxy, **extra: str) -> dict[str, str]:
    """The test's environment with the MySQL connection pointing at `mysql` (a server, or a proxy in front of one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDC_", "MYSQL_"))}
    env.update(CDC_MYSQL_HOST=mysql.host, CDC_MYSQL_PORT=str(mysql.port), CDC_MYSQL_USER="root",
               PYTHONPATH=str(ROOT), **extra)
    return env


def spawn_cdc(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`python -m cdc ARGS` in its own process group (kill -9 takes Spark's JVM too), output to pipes."""
    return subprocess.Popen([sys.executable, "-m", "cdc", *args], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(process: subprocess.Popen[str], timeout: float = 30) -> tuple[str, str]:
    """SIGTERM (the way --follow ends), then kill -9 of the process group if it does not end in time: its output."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate(timeout=30)
        return out, err + f"\n[test] no exit within {timeout}s of SIGTERM: killed"


def tail_reached(state: Path, target: tuple[str, int]) -> bool:
    """Whether tail.json's position is at or past `target` (file, pos)."""
    try:
        checkpoint = json.loads((state / "tail.json").read_text())
    except (OSError, ValueError):  # not written yet, or being replaced right now
        return False
    return (file_seq(checkpoint["file"]), checkpoint["pos"]) >= (file_seq(target[0]), target[1])


def wait_for_tail(state: Path, server: MariaDB, timeout: float) -> float | None:
    """Wait until tail's checkpoint reaches the server's current binlog end: the seconds it took (None: not in time)."""
    target, began = server.binlog_position(), time.monotonic()
    while not tail_reached(state, target):
        if time.monotonic() - began > timeout:
            return None
        time.sleep(0.2)
    return time.monotonic() - began


def reconnect_delays(faults: list[tuple[float, str]], accepted: list[float], kind: str = "drop") -> list[float]:
    """For each fault of `kind`, the seconds until the proxy accepted the next connection (a reconnect)."""
    delays = []
    for at, fault in faults:
        if fault == kind:
            after = [t for t in accepted if t > at]
            delays.append(after[0] - at if after else float("inf"))
    return delays
