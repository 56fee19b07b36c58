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

from cdc import completion
from cdc.commands import logs, ui
from cdc.config import Settings, load_settings, with_password
from cdc.errors import ConfigError
from cdc.state import StateDir


# Shell completion of option values (`cdc --install-completion`): thin adapters over cdc.completion, which
# holds what is offered. typer passes the context (the options parsed so far) and the word being completed.
def complete_ssl_mode(incomplete: str) -> list[str]:
    return completion.ssl_modes(incomplete)


def complete_tables(ctx: typer.Context, incomplete: str) -> list[str]:
    """Table names from the schema history of the state directory this command line names (no MySQL)."""
    params = ctx.params
    return completion.table_patterns(completion.state_dir_for(params.get("state_dir"), params.get("config")), incomplete)


def choices(values: tuple[str, ...]) -> Callable[[str], list[str]]:
    """A completion function offering fixed values (a command's --lock, --stage, --to ...)."""
    def complete(incomplete: str) -> list[str]:
        return completion.matching(values, incomplete)

    return complete


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
# `cdc init` takes the ones it records in cdc.toml by these names too.
_MY = "MySQL"
HostOpt = Annotated[Optional[str], typer.Option("--host", "-h", help="MySQL host.", rich_help_panel=_MY)]
PortOpt = Annotated[Optional[int], typer.Option("--port", "-P", help="MySQL port.", rich_help_panel=_MY)]
UserOpt = Annotated[Optional[str], typer.Option("--user", "-u", help="MySQL user.", rich_help_panel=_MY)]
SocketOpt = Annotated[Optional[str], typer.Option("--socket", "-S", help="Unix socket.", rich_help_panel=_MY)]
SslModeOpt = Annotated[Optional[str], typer.Option(
    "--ssl-mode", help="DISABLED | PREFERRED | REQUIRED | VERIFY_CA | VERIFY_IDENTITY.", rich_help_panel=_MY,
    autocompletion=complete_ssl_mode)]
SslCaOpt = Annotated[Optional[str], typer.Option("--ssl-ca", help="CA bundle (PEM).", rich_help_panel=_MY)]
SslCertOpt = Annotated[Optional[str], typer.Option("--ssl-cert", help="Client certificate.", rich_help_panel=_MY)]
SslKeyOpt = Annotated[Optional[str], typer.Option("--ssl-key", help="Client key.", rich_help_panel=_MY)]

MYSQL_OPTIONS: dict[str, Any] = {
    "host": HostOpt,
    "port": PortOpt,
    "user": UserOpt,
    "socket": SocketOpt,
    "defaults_file": Annotated[
        Optional[str],
        typer.Option("--defaults-file", help="MySQL option file (\\[client] section), e.g. ~/.my.cnf.", rich_help_panel=_MY),
    ],
    "ssl_mode": SslModeOpt,
    "ssl_ca": SslCaOpt,
    "ssl_cert": SslCertOpt,
    "ssl_key": SslKeyOpt,
    "server_id": Annotated[
        Optional[int],
        typer.Option("--server-id", help="server_id the binlog reader announces (default: derived, stable).", rich_help_panel=_MY),
    ],
    "ask_password": Annotated[
        bool,
        typer.Option("--password", "-p", help="Prompt for the password (hidden; TTY only).", rich_help_panel=_MY),
    ],
}


def password_on_argv(argv: list[str]) -> str | None:
    """How a password was given on the command line (`-pSECRET`, `--password=SECRET`, `-p SECRET`), never the
    password itself; None when it was not. No command takes a positional argument, so a word after -p is one."""
    for index, arg in enumerate(argv):
        if arg == "--":
            return None
        if arg.startswith("--password="):
            return "--password=..."
        if arg.startswith("-p") and not arg.startswith("--") and len(arg) > 2:
            return "-p followed by a value"
        if arg in ("-p", "--password") and index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            return f"a value after {arg}"
    return None


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


# State directories this process's command found missing: if the command fails, main.py removes each one that
# still holds nothing but bookkeeping (cdc.state.discard_if_unused).
NEW_STATE_DIRS: list[Path] = []


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
    if not Path(settings.state_dir).exists():
        NEW_STATE_DIRS.append(Path(settings.state_dir))
    if ask:
        settings = with_password(settings, _prompt_password(settings))
    # the password from an option file or the prompt, the hash key (environment or file): never written to a log
    logs.add_secrets([settings.mysql.password, settings.mysql.hash_key, _key_file_secret(settings)])
    return settings


def _key_file_secret(settings: Settings) -> str | None:
    """The hash key in mysql.hash_key_file, to redact; a key file that cannot be used is the error of the stage
    that hashes (a stage that does not need the key must not fail on it)."""
    if not settings.mysql.hash_key_file:
        return None
    from cdc.masking import load_hash_key  # only then: masking loads the schema model, a cost for every command

    try:
        key = load_hash_key(settings.mysql)
    except ConfigError:
        return None
    return key.secret.decode("utf-8", "replace") if key else None


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
