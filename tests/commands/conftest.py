"""Run commands through typer's CliRunner with an environment that cannot leak a developer's settings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from cdc.commands.main import app
from tests.rig import MariaDB


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No CDC_* / MYSQL_PWD from the caller, no ~/.my.cnf, no ./cdc.toml: only what the test passes."""
    import os

    for name in list(os.environ):
        if name.startswith("CDC_") or name == "MYSQL_PWD":
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def cli(isolated: Path) -> Callable[..., Result]:
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(app, list(args), env=env, catch_exceptions=False)

    return invoke


def server_args(db: MariaDB, *, user: str = "root") -> list[str]:
    return ["--host", db.host, "--port", str(db.port), "--user", user]


def flat(text: str) -> str:
    """Output with rich's line wrapping undone (stderr wraps at the console width)."""
    return " ".join(text.split())
