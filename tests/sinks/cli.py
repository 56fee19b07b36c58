"""Run `cdc` for the ship tests: the real root app, as a user would.

While other commands of the tree are still being written, commands.main may not import yet;
then a stand-in root app with the same error-to-exit-code rule serves ship and kinesis-read.
Run as `python -m tests.sinks.cli ship ...` for subprocess tests.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

try:
    from commands.main import app
except ModuleNotFoundError as exc:  # a sibling command module is missing (work in progress)
    if not str(exc.name or "").startswith("commands."):
        raise
    from typer.core import TyperGroup

    from cdc.errors import CdcError, ExitCode
    from commands import ui
    from commands.kinesis_read import kinesis_read
    from commands.ship import ship

    class _Group(TyperGroup):
        def invoke(self, ctx: Any) -> Any:
            try:
                return super().invoke(ctx)
            except CdcError as error:
                ui.error(str(error))
                raise typer.Exit(int(error.exit_code)) from None
            except KeyboardInterrupt:
                ui.error("interrupted")
                raise typer.Exit(int(ExitCode.INTERRUPTED)) from None

    app = typer.Typer(cls=_Group, pretty_exceptions_show_locals=False)
    app.command("ship")(ship)
    app.command("kinesis-read")(kinesis_read)

ARGV = [sys.executable, "-m", "tests.sinks.cli"]

if __name__ == "__main__":
    app()
