"""Helpers and fixtures shared by the snapshot tests (no tests here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc.changelog import list_segments, read_segment
from cdc.commands.main import app  # noqa: F401  (re-exported for the snapshot tests' CliRunner)
from cdc.config import Settings, load_settings
from tests.hash_key import ENV, HASH_KEY
from tests.rig import MariaDB

ARGV = [sys.executable, "-m", "cdc"]
REPO = Path(__file__).resolve().parents[2]


def subprocess_env(home: Path) -> dict[str, str]:
    """The environment for `cdc` subprocesses: this checkout importable, no CDC_* or ~/.my.cnf of the developer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_") and k != "MYSQL_PWD"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["HOME"] = str(home)
    return env


def mysql_args(server: MariaDB) -> list[str]:
    return ["--host", server.host, "--port", str(server.port), "--user", "root"]


def make_settings(server: MariaDB, state: Path, **flags: Any) -> Settings:
    """Settings for the session server, isolated from the developer's cdc.toml and CDC_* variables (the test hash
    key is in the environment they are resolved from)."""
    base = {"mysql.host": server.host, "mysql.port": server.port, "mysql.user": "root", "state_dir": str(state)}
    return load_settings({**base, **{f"mysql.{k}": v for k, v in flags.items()}},
                         env={"HOME": str(state), ENV: HASH_KEY}, cwd=state.parent)


def changelog_lines(state: Path) -> list[dict[str, Any]]:
    """Every line of every sealed segment, in position order (asserting the segments are already in it)."""
    lines = [line for seg in list_segments(state / "changelog") for line in read_segment(seg)]
    positions = [line["position"] for line in lines]
    assert positions == sorted(positions), "segments out of position order"
    assert len(set(positions)) == len(positions), "a position appears twice"
    return lines


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"
