"""Fixtures for the tail tests: settings and environments pointing at a rig server, a CLI runner, change-log readers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cdc.capture import Filters, StartRequest, TailOptions, TailSummary, run_tail
from cdc.changelog import list_segments
from cdc.config import Settings, load_settings
from tests.hash_key import ENV, HASH_KEY
from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]


def settings_for(server: MariaDB, state_dir: Path, **flags: Any) -> Settings:
    """Settings for root on a rig server, ignoring the developer's environment and ~/.my.cnf (the test hash key
    is in the environment they are resolved from)."""
    values = {"mysql.host": server.host, "mysql.port": server.port, "mysql.user": "root", "state_dir": str(state_dir),
              **flags}
    return load_settings(values, env={"HOME": str(state_dir), ENV: HASH_KEY}, cwd=state_dir)


def env_for(server: MariaDB, **extra: str) -> dict[str, str]:
    """Environment for `python -m cdc` subprocesses against a rig server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDC_", "MYSQL_"))}
    env.update(CDC_MYSQL_HOST=server.host, CDC_MYSQL_PORT=str(server.port), CDC_MYSQL_USER="root",
               PYTHONPATH=str(ROOT), **extra)
    return env


def tail_once(server: MariaDB, state_dir: Path, db: str, start: str | None = None, **options: Any) -> TailSummary:
    """`cdc tail --until-now` in-process, filtered to one database."""
    opts = TailOptions(start=StartRequest(position=start), filters=Filters(databases=(db,)), **options)
    return run_tail(settings_for(server, state_dir), opts)


def changelog_bytes(state_dir: Path) -> bytes:
    """All sealed segments concatenated in order: what an uninterrupted run must equal byte for byte."""
    return b"".join(path.read_bytes() for path in list_segments(state_dir / "changelog"))


def changelog_lines(state_dir: Path) -> list[dict[str, Any]]:
    import orjson

    return [orjson.loads(line) for line in changelog_bytes(state_dir).splitlines()]


def binlog_start(server: MariaDB) -> str:
    file, pos = server.binlog_position()
    return f"{file}:{pos}"


@pytest.fixture
def cli(mariadb: MariaDB, tmp_path: Path) -> Callable[..., Any]:
    """Invoke `cdc ...` in-process (CliRunner) against the session server with state in tmp_path/state."""
    from cdc.commands.main import app

    runner = CliRunner()

    def invoke(*args: str, server: MariaDB | None = None, state: Path | None = None) -> Any:
        env = env_for(server or mariadb)
        argv = [*args, "--state-dir", str(state or tmp_path / "state")]
        return runner.invoke(app, argv, env={**{k: None for k in os.environ if k.startswith("CDC_")}, **env})

    return invoke


def spawn_tail(server: MariaDB, state_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    """`python -m cdc tail ...` as a user runs it (for kill -9 and signals)."""
    argv = [sys.executable, "-m", "cdc", "tail", "--state-dir", str(state_dir), *args]
    return subprocess.Popen(argv, cwd=ROOT, env=env_for(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
