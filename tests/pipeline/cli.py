"""Run `cdc` for the pipeline-tool tests through the real root app, as a user would."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from cdc.commands.main import app


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input, env=env, catch_exceptions=False)
