"""The `cdc` command: one root Typer app; the single place where CdcError becomes an exit code."""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from cdc import __version__
from cdc.commands import ui
from cdc.commands.options import stage_run
from cdc.errors import CdcError, ExitCode
from cdc.pipeline import failures
from cdc.state import is_disk_full

# (command name, module in commands/, function) in the order `cdc --help` lists them:
# the pipeline's stages first, then the tools around them.
COMMANDS: list[tuple[str, str, str]] = [
    ("check-binlog", "check_binlog", "check_binlog"),
    ("set-retention", "set_retention", "set_retention"),
    ("snapshot", "snapshot", "snapshot"),
    ("tail", "tail", "tail"),
    ("ship", "ship", "ship"),
    ("spark-merge", "spark_merge", "spark_merge"),
    ("snowflake-bootstrap", "snowflake_bootstrap", "snowflake_bootstrap"),
    ("snowflake-apply", "snowflake_apply", "snowflake_apply"),
    ("run", "run", "run"),
    ("kinesis-read", "kinesis_read", "kinesis_read"),
    ("status", "status", "status"),
    ("verify", "verify", "verify"),
    ("wait", "wait", "wait"),
    ("init", "init", "init"),
]


class CdcGroup(TyperGroup):
    """Turn our errors into a red message and their documented exit code, for every command."""

    # ctx is typed Any: the Context class lives in click, or in typer itself since typer vendored click (0.2x).
    def list_commands(self, ctx: Any) -> list[str]:
        return [name for name, _, _ in COMMANDS if name in self.commands]

    def invoke(self, ctx: Any) -> Any:
        token = stage_run.set(None)
        try:
            result = super().invoke(ctx)
        except typer.Exit as exit_:
            if exit_.exit_code == ExitCode.OK:
                _succeeded()
            raise
        except CdcError as exc:
            _failed(exc)
            ui.error(str(exc))
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            ui.error("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except OSError as exc:
            if not is_disk_full(exc):
                _failed(exc)
                raise
            # Last resort for writers that do not name their file (Spark, pyarrow): stages write data before
            # they advance a checkpoint, so nothing was lost.
            message = (f"no space left on device{f' writing {exc.filename}' if exc.filename else ''}; the checkpoint "
                       "was not advanced")
            _failed(CdcError(message, hint="free space (df -h), then rerun the same command"))
            ui.error(f"{message}\n  fix: free space (df -h), then rerun the same command")
            raise typer.Exit(int(ExitCode.FAILURE)) from None
        except Exception as exc:  # a bug: the traceback follows, and the stage's record says so too
            _failed(exc)
            raise
        else:
            _succeeded()
            return result
        finally:
            stage_run.reset(token)


def _failed(error: Exception) -> None:
    """Record the failure of a stage command as the stage's last error (best effort: never masks `error`)."""
    run = stage_run.get()
    if run is None:
        return
    try:
        failures.record_failure(run.state, run.stage, error, command=run.command,
                                secrets=failures.known_secrets(run.settings))
    except (OSError, CdcError) as exc:
        ui.note(f"note: the error could not be recorded for `cdc status` in {run.state.errors}: {exc}")


def _succeeded() -> None:
    run = stage_run.get()
    if run is None:
        return
    try:
        failures.clear_failure(run.state, run.stage)
    except OSError as exc:
        ui.note(f"note: the last error of {run.stage} could not be cleared from {run.state.errors}: {exc}")


app = typer.Typer(
    name="cdc",
    cls=CdcGroup,
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,  # locals may hold passwords
    help="Replicate MySQL into Snowflake through the binary log.\n\n"
    "Stages chain through checkpoint files in a state directory (default ./.cdc): "
    "check-binlog -> snapshot -> tail -> ship -> spark-merge -> snowflake-apply.",
    context_settings={"help_option_names": ["--help"]},
)


def _version(value: bool) -> None:
    if value:
        ui.out.print(f"cdc {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = None,
) -> None:
    """Replicate MySQL into Snowflake through the binary log."""


for _name, _module, _function in COMMANDS:
    app.command(_name)(getattr(importlib.import_module(f"cdc.commands.{_module}"), _function))


def run() -> None:
    """Console-script entry point."""
    app()
