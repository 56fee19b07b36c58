"""Options shared by several commands, defined once (STYLE: Annotated options)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cdc.commands import ui
from cdc.config import Settings, load_settings, with_password
from cdc.errors import ConfigError
from cdc.state import StateDir

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="cdc.toml to read (default: ./cdc.toml).")]
StateDirOpt = Annotated[Optional[Path], typer.Option("--state-dir", help="State directory (default: ./.cdc).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON document on stdout for scripts.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would be done; change nothing.")]

# Snowflake connection options (verify, snowflake-apply, snowflake-bootstrap); credentials come only
# from connections.toml or the SNOWFLAKE_* environment, never from argv.
_SF = "Snowflake"
SfConnectionOpt = Annotated[Optional[str], typer.Option("--connection", help="Connection in connections.toml.",
                                                        rich_help_panel=_SF)]
SfDatabaseOpt = Annotated[Optional[str], typer.Option("--database", help="Snowflake database.", rich_help_panel=_SF)]
SfSchemaOpt = Annotated[Optional[str], typer.Option("--schema", help="Snowflake schema (created by "
                                                    "snowflake-bootstrap if missing).", rich_help_panel=_SF)]
SfRoleOpt = Annotated[Optional[str], typer.Option("--role", help="Snowflake role.", rich_help_panel=_SF)]

# MySQL connection options follow the mysql client's spelling; there is deliberately no
# option that takes a password value: argv is visible to every user through ps.
MYSQL_OPTIONS: dict[str, Any] = {
    "host": Annotated[Optional[str], typer.Option("--host", "-h", help="MySQL host.", rich_help_panel="MySQL")],
    "port": Annotated[Optional[int], typer.Option("--port", "-P", help="MySQL port.", rich_help_panel="MySQL")],
    "user": Annotated[Optional[str], typer.Option("--user", "-u", help="MySQL user.", rich_help_panel="MySQL")],
    "socket": Annotated[Optional[str], typer.Option("--socket", "-S", help="Unix socket.", rich_help_panel="MySQL")],
    "defaults_file": Annotated[
        Optional[str],
        typer.Option("--defaults-file", help="MySQL option file (\\[client] section), e.g. ~/.my.cnf.", rich_help_panel="MySQL"),
    ],
    "ssl_mode": Annotated[
        Optional[str],
        typer.Option("--ssl-mode", help="DISABLED | PREFERRED | REQUIRED | VERIFY_CA | VERIFY_IDENTITY.",
                     rich_help_panel="MySQL"),
    ],
    "ssl_ca": Annotated[Optional[str], typer.Option("--ssl-ca", help="CA bundle (PEM).", rich_help_panel="MySQL")],
    "ssl_cert": Annotated[Optional[str], typer.Option("--ssl-cert", help="Client certificate.", rich_help_panel="MySQL")],
    "ssl_key": Annotated[Optional[str], typer.Option("--ssl-key", help="Client key.", rich_help_panel="MySQL")],
    "server_id": Annotated[
        Optional[int],
        typer.Option("--server-id", help="server_id the binlog reader announces (default: derived, stable).", rich_help_panel="MySQL"),
    ],
    "ask_password": Annotated[
        bool,
        typer.Option("--password", "-p", help="Prompt for the password (hidden; TTY only).", rich_help_panel="MySQL"),
    ],
}


def mysql_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the MySQL connection options to a command; it receives them as `mysql_flags`."""
    signature = inspect.signature(command)
    own = [p for p in signature.parameters.values() if p.name != "mysql_flags"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False if name == "ask_password" else None,
                          annotation=annotation)
        for name, annotation in MYSQL_OPTIONS.items()
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = {f"mysql.{name}": kwargs.pop(name) for name in MYSQL_OPTIONS}
        return command(*args, mysql_flags=flags, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
    hints = {k: v for k, v in getattr(command, "__annotations__", {}).items() if k != "mysql_flags"}
    wrapper.__annotations__ = hints | MYSQL_OPTIONS
    return wrapper


def settings_from(
    config: Path | None,
    state_dir: Path | None,
    mysql_flags: dict[str, Any] | None = None,
    **flags: Any,
) -> Settings:
    """Resolve settings for a command: flags > CDC_* environment > cdc.toml > option file > defaults."""
    mysql_flags = dict(mysql_flags or {})
    ask = bool(mysql_flags.pop("mysql.ask_password", False))
    merged: dict[str, Any] = {**mysql_flags, **flags}
    if state_dir is not None:
        merged["state_dir"] = str(state_dir)
    settings = load_settings(merged, config_path=config)
    if ask:
        settings = with_password(settings, _prompt_password(settings))
    return settings


def _prompt_password(settings: Settings) -> str:
    if not ui.is_tty():
        raise ConfigError(
            "--password asks for the password at a terminal, but there is none",
            hint="set CDC_MYSQL_PASSWORD (or MYSQL_PWD), or put it in an option file (--defaults-file)",
        )
    import questionary

    answer = questionary.password(f"Password for {settings.mysql.user}@{settings.mysql.describe()}:").ask()
    if answer is None:
        raise typer.Abort()
    return str(answer)


@dataclass(frozen=True)
class StageRun:
    """What CdcGroup needs to record a stage command's failure, or clear it after a success."""

    state: StateDir
    stage: str
    command: str
    settings: Settings


# Set by a stage's command once its settings are known; read by CdcGroup when the command ends.
stage_run: ContextVar[StageRun | None] = ContextVar("stage_run", default=None)


def runs_stage(settings: Settings, stage: str, command: str) -> None:
    """Declare this command a run of `stage`: its failure becomes the stage's last error in the state directory,
    its success clears that (cdc.pipeline.failures; `cdc status` shows it)."""
    stage_run.set(StageRun(StateDir(settings.state_dir), stage, command, settings))
