"""The `cdc` command: one root Typer app; the single place where CdcError becomes an exit code."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from cdc import __version__
from cdc.commands import logs, options, ui
from cdc.commands.options import password_on_argv, stage_run
from cdc.errors import CdcError, ExitCode
from cdc.pipeline import failures
from cdc.signals import Terminated, terminate_by_exception
from cdc.state import discard_if_unused, is_disk_full, keep_files_private

# (command name, module in commands/, function) in the order `cdc --help` lists them:
# the pipeline's stages first, then the tools around them.
COMMANDS: list[tuple[str, str, str]] = [
    ("check-binlog", "check_binlog", "check_binlog"),
    ("set-retention", "set_retention", "set_retention"),
    ("snapshot", "snapshot", "snapshot"),
    ("resnapshot", "resnapshot", "resnapshot"),
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
    ("prune", "prune", "prune_command"),
    ("init", "init", "init"),
]


class CdcGroup(TyperGroup):
    """Turn our errors into a red message and their documented exit code, for every command."""

    # ctx is typed Any: the Context class lives in click, or in typer itself since typer vendored click (0.2x).
    def list_commands(self, ctx: Any) -> list[str]:
        return [name for name, _, _ in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        # A command's module (and the libraries it imports: PySpark, pyarrow, questionary...) loads when the command
        # is named, not at every start: every command's took `cdc --version` 1.3 s on a slow machine (0.24 s now).
        if cmd_name not in self.commands and cmd_name in _BY_NAME:
            self.add_command(_click_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # typer's "Did you mean ...?" draws on the commands loaded so far: for a name that is none of ours, all of them.
        if args and args[0] not in _BY_NAME:
            for name in _BY_NAME:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        keep_files_private()
        # Before click parses: its "unexpected extra argument (...)" would print the password given after -p.
        argv = [str(arg) for arg in (sys.argv[1:] if args is None else args)]
        if (mistake := password_on_argv(argv)) is not None:
            ui.error(f"{mistake}: cdc never takes a password on the command line (any user can read it with ps)\n"
                     "  fix: give -p/--password alone to be asked for it at a terminal, or set CDC_MYSQL_PASSWORD, "
                     "or put it in an option file (--defaults-file, ~/.my.cnf)")
            sys.exit(int(ExitCode.USAGE))
        return super().main(args, *rest, **kwargs)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        # A signal while the command line is still being parsed (typer imports its validators lazily: seconds on a
        # loaded machine) is a stop before any work, said as such: not a traceback and exit 1 (SIGTERM) or a silent 130.
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            ui.error("interrupted (Ctrl-C) while starting; nothing was done", exit_code=int(ExitCode.INTERRUPTED))
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Terminated:
            ui.error("terminated (SIGTERM) while starting; nothing was done", exit_code=int(ExitCode.TERMINATED))
            raise typer.Exit(int(ExitCode.TERMINATED)) from None

    def invoke(self, ctx: Any) -> Any:
        options.NEW_STATE_DIRS.clear()
        token = stage_run.set(None)
        try:
            return self._invoke_recorded(ctx)
        except typer.Exit as exc:
            if exc.exit_code != 0:
                for root in options.NEW_STATE_DIRS:
                    discard_if_unused(root)
            raise
        finally:
            stage_run.reset(token)

    def _invoke_recorded(self, ctx: Any) -> Any:
        try:
            result = super().invoke(ctx)
        except typer.Exit as exit_:
            if exit_.exit_code == ExitCode.OK:
                _succeeded()
            raise
        except CdcError as exc:
            _failed(exc)
            ui.error(str(exc), exit_code=int(exc.exit_code))
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            ui.error("interrupted (Ctrl-C); state is consistent, rerun to continue",
                     exit_code=int(ExitCode.INTERRUPTED))
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Terminated:
            ui.error("terminated (SIGTERM); state is consistent, rerun to continue", exit_code=int(ExitCode.TERMINATED))
            raise typer.Exit(int(ExitCode.TERMINATED)) from None
        except OSError as exc:
            if not is_disk_full(exc):
                _failed(exc)
                _log_if_json(exc)
                raise
            # Last resort for writers that do not name their file (Spark, pyarrow): stages write data before
            # they advance a checkpoint, so nothing was lost.
            message = (f"no space left on device{f' writing {exc.filename}' if exc.filename else ''}; the checkpoint "
                       "was not advanced")
            _failed(CdcError(message, hint="free space (df -h), then rerun the same command"))
            ui.error(f"{message}\n  fix: free space (df -h), then rerun the same command", exit_code=int(ExitCode.FAILURE))
            raise typer.Exit(int(ExitCode.FAILURE)) from None
        except Exception as exc:  # a bug: the traceback follows, and the stage's record says so too
            _failed(exc)
            _log_if_json(exc)
            raise
        else:
            _succeeded()
            return result
        finally:
            logs.reset()  # the next command run in this process (tests) starts without them


def _log_if_json(exc: Exception) -> None:
    """A bug's traceback, with --log-format json, is one JSON record (exit 1) rather than lines of text on stderr."""
    # click's and typer's own exceptions (exit, abort, usage) are theirs to render.
    if logs.is_json() and type(exc).__module__.split(".")[0] not in ("click", "typer"):
        logs.command_log().critical(f"unexpected error: {exc!r}", exc_info=exc, extra={"exit_code": 1})
        raise typer.Exit(int(ExitCode.FAILURE)) from None


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


_BY_NAME = {name: (module, function) for name, module, function in COMMANDS}


def command_function(name: str) -> Callable[..., Any]:
    """The function behind `cdc <name>` (its docstring is its --help), its module imported now."""
    module, function = _BY_NAME[name]
    return getattr(importlib.import_module(f"cdc.commands.{module}"), function)  # type: ignore[no-any-return]


def _click_command(name: str) -> Any:
    """`cdc <name>` as click's command, built as the root app would have built it had it been registered there."""
    one = typer.Typer(rich_markup_mode="rich", add_completion=False)
    one.command(name)(command_function(name))
    return typer.main.get_command(one)


def run() -> None:
    """Console-script entry point."""
    terminate_by_exception()
    app()
