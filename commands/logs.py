"""Logs of the long-running commands: `--log-level`, `--log-format`, one handler on stderr.

The library (cdc/) only logs, through `logging.getLogger(__name__)`; it never adds a handler or sets a
level. A command decorated with @log_options sets the logs up here before it does anything else:

- one handler on stderr, on the root logger; `cdc.*` at the chosen level; every other logger (py4j,
  botocore, snowflake.connector, pymysqlreplication...) at WARNING unless the level is debug;
- `text`: at a terminal the message alone (`warning:` / `error:` in colour), written through the rich
  console so it lands above a live display; elsewhere `<ISO-8601 UTC> <LEVEL> <logger>: <message>`;
- `json`: one JSON object per line: ts, level, logger, message, then the record's structured fields
  (stage, position, lag_seconds, rows, rows_per_second...; `exc` with a traceback);
- every secret the process knows (the MySQL password once settings are loaded, the password and key
  variables of the environment, Snowflake's from connections.toml) is replaced by *** in whatever is
  written, whichever library logged it and at whatever level.

The commands' own notes (ui.note, ui.warn, ui.error) become log records once this is set up, so with
`--log-format json` every line on stderr is one JSON object.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import re
import sys
import time
import traceback
import typing
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cdc.config import LogSettings, env_name, load_log_settings
from cdc.errors import ConfigError
from cdc.escapes import json_safe
from cdc.settings import LOG_FORMATS

_LOG = "Logs"


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class LogFormat(StrEnum):
    text = "text"
    json = "json"


LOG_OPTIONS: dict[str, Any] = {
    "log_level": Annotated[Optional[LogLevel], typer.Option(
        "--log-level", help="Messages on stderr from this level on (default info; CDC_LOG_LEVEL, cdc.toml \\[log] level).",
        rich_help_panel=_LOG, show_default=False)],
    "log_format": Annotated[Optional[LogFormat], typer.Option(
        "--log-format", help="text, or json: one JSON object per line on stderr (CDC_LOG_FORMAT, cdc.toml \\[log] format).",
        rich_help_panel=_LOG, show_default=False)],
}
# tail, run: the periodic status line when no live display shows it.
StatusIntervalOpt = Annotated[Optional[str], typer.Option(
    "--status-interval", help="Log a status line this often (30s, 1m; 0 = never) where no live display shows it "
    "(default 30s; CDC_LOG_STATUS_INTERVAL, cdc.toml \\[log] status_interval).", rich_help_panel=_LOG)]

# Third-party loggers that are chatty below WARNING. Every logger outside `cdc` stays at WARNING unless the
# level is debug (the root logger's level); these are named too, so that one that sets its own level is
# brought back in line.
NOISY = ("py4j", "pyspark", "botocore", "boto3", "s3transfer", "urllib3", "snowflake.connector", "pymysqlreplication",
         "pymysql", "filelock", "asyncio")
# Environment variables whose values are secrets wherever they turn up.
SECRET_ENV = ("CDC_MYSQL_PASSWORD", "CDC_MYSQL_HASH_KEY", "MYSQL_PWD", "SNOWFLAKE_PASSWORD", "SNOWFLAKE_PRIVATE_KEY_FILE_PWD",
              "SNOWFLAKE_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
REDACTED = "***"
# What a LogRecord holds of its own; anything else on it came as `extra=` and is a structured field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class _State:
    handler: logging.Handler | None = None
    saved_levels: dict[str, int] = {}  # the levels configure() changed, as they were (reset() puts them back)
    settings: LogSettings = LogSettings()
    command_logger: str = "cdc.commands"
    secrets: set[str] = set()


_state = _State()


def configured() -> bool:
    """True once a command has set its logs up (ui.note and friends then log instead of printing)."""
    return _state.handler is not None


def is_json() -> bool:
    return configured() and _state.settings.format == "json"


def live() -> bool:
    """A live display (progress bar, status line) may be drawn: stderr is a terminal and the logs are text."""
    from cdc.commands import ui

    return ui.err.is_terminal and not is_json()


def command_log() -> logging.Logger:
    """The logger of the running command (cdc.commands.tail...): its notes, warnings and errors."""
    return logging.getLogger(_state.command_logger)


def add_secrets(values: Iterable[object]) -> None:
    """Values never to be written, whoever logs them (shorter than 4 characters: nothing could be logged at all).

    Each also as repr() and JSON write it (quotes and backslashes escaped): a library logs `password=%r`.
    """
    for value in (str(v) for v in values if v is not None and len(str(v)) >= 4):
        _state.secrets.update({value, repr(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]})


# A secret this short is replaced only where it stands alone, not inside a longer word: the stand-in's Snowflake
# password "snow" turned every `snowflake.connector` logger name into `***flake.connector`. Longer ones are
# replaced wherever they occur.
_SHORT_SECRET = 8


def redact(text: str) -> str:
    for secret in sorted(_state.secrets, key=len, reverse=True):
        if secret not in text:
            continue
        if len(secret) >= _SHORT_SECRET:
            text = text.replace(secret, REDACTED)
        else:
            text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", REDACTED, text)
    return text


def configure(settings: LogSettings, *, command: str = "cdc.commands", env: dict[str, str] | None = None) -> None:
    """Set the logs up (again): one handler on stderr at the root; idempotent, the last call wins."""
    root = logging.getLogger()
    if _state.handler is not None:
        root.removeHandler(_state.handler)
    else:
        _state.saved_levels = {name: logging.getLogger(name or None).level for name in ("", "cdc", *NOISY)}
    handler = _Handler(settings.format)
    root.addHandler(handler)
    level = getattr(logging, settings.level.upper())
    debug = level <= logging.DEBUG
    # Third parties at WARNING unless debug; never quieter than asked (--log-level error).
    root.setLevel(logging.DEBUG if debug else max(level, logging.WARNING))
    logging.getLogger("cdc").setLevel(level)
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.DEBUG if debug else max(level, logging.WARNING))
    logging.captureWarnings(True)  # a library's warnings.warn() is a record too, not a stray line on stderr
    environment = os.environ if env is None else env
    add_secrets(environment.get(name) for name in SECRET_ENV)
    _state.handler, _state.settings, _state.command_logger = handler, settings, command


def reset() -> None:
    """Take the handler away again (tests that run commands in-process, one after the other)."""
    if _state.handler is None:
        return
    logging.getLogger().removeHandler(_state.handler)
    for name, level in _state.saved_levels.items():
        logging.getLogger(name or None).setLevel(level)
    logging.captureWarnings(False)
    _state.handler, _state.settings = None, LogSettings()


def setup(flags: dict[str, Any], config_path: Path | None, command: str) -> LogSettings:
    """Resolve [log] (flag > CDC_LOG_* > cdc.toml > default) and configure; a bad setting is logged as asked, then raised."""
    try:
        chosen = load_log_settings(flags, config_path=config_path)
    except ConfigError:
        try:  # the error itself in the format the flags or the environment ask for, where they can tell
            configure(load_log_settings(flags, read_toml=False), command=command)
        except ConfigError:
            fmt = flags.get("log.format") or os.environ.get(env_name("log.format"))
            configure(LogSettings(format=fmt if fmt in LOG_FORMATS else "text"), command=command)
        raise
    configure(chosen, command=command)
    return chosen


def log_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add --log-level and --log-format to a long-running command and set its logs up before it runs.

    The command keeps its own parameters (it must have `config`, the cdc.toml path, to read [log] from).
    """
    signature = inspect.signature(command)
    # Real types, not the strings of a module with `from __future__ import annotations`: typer reads this signature.
    hints = typing.get_type_hints(command, include_extras=True)
    own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]
    keyword_only = [p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY]
    positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
             for name, annotation in LOG_OPTIONS.items()]
    logger_name = command.__module__

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        level, fmt = kwargs.pop("log_level"), kwargs.pop("log_format")
        flags = {"log.level": level.value if level else None, "log.format": fmt.value if fmt else None}
        setup(flags, kwargs.get("config"), logger_name)
        return command(*args, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=positional + added + keyword_only)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**hints, **LOG_OPTIONS}
    return wrapper


class Every:
    """True at most once per `seconds` (the first call included); never when seconds <= 0."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self.last: float | None = None

    def due(self) -> bool:
        if self.seconds <= 0:
            return False
        now = self.clock()
        if self.last is not None and now - self.last < self.seconds:
            return False
        self.last = now
        return True


# --- rendering -------------------------------------------------------------------------------------------

def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _exception(record: logging.LogRecord) -> str | None:
    if record.exc_info and record.exc_info[0] is not None:
        return "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
    return record.exc_text or None


def json_line(record: logging.LogRecord) -> str:
    """ts, level, logger, message, the structured fields, `exc`: secrets redacted before encoding."""
    document: dict[str, Any] = {}
    for key, value in fields_of(record).items():
        document[key] = _redact_value(value)
    exc = _exception(record)
    if exc:
        document["exc"] = redact(exc)
    document.update(ts=timestamp(record), level=record.levelname.lower(), logger=record.name,
                    message=redact(record.getMessage()))
    ordered = {k: document[k] for k in ("ts", "level", "logger", "message")} | document
    return json_safe(json.dumps(ordered, default=str, ensure_ascii=False))  # C1 and bidi characters escaped too


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value(v) for v in value]
    return redact(str(value))


def text_line(record: logging.LogRecord) -> str:
    """For files and journals: `2025-05-01T12:00:00.123Z INFO    cdc.commands.tail: message`."""
    line = f"{timestamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
    exc = _exception(record)
    return redact(f"{line}\n{exc}" if exc else line)


_TTY_PREFIX = {logging.WARNING: ("warning: ", "yellow"), logging.ERROR: ("error: ", "bold red"),
               logging.CRITICAL: ("error: ", "bold red")}


class _Handler(logging.Handler):
    """Writes to the current sys.stderr (test runners swap it), through rich at a terminal with text logs."""

    def __init__(self, fmt: str) -> None:
        super().__init__(logging.NOTSET)
        self.fmt = fmt

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.fmt == "json":
                self._write(json_line(record))
            elif _stderr_is_terminal():
                self._print(record)
            else:
                self._write(text_line(record))
        except Exception:  # a log line must never take the command down
            self.handleError(record)

    @staticmethod
    def _write(line: str) -> None:
        stream = sys.stderr
        stream.write(line + "\n")
        stream.flush()

    @staticmethod
    def _print(record: logging.LogRecord) -> None:
        from rich.text import Text

        from cdc.commands import ui

        prefix, style = _TTY_PREFIX.get(record.levelno, ("", ""))
        if record.levelno >= logging.CRITICAL:
            prefix = "error: "
        text = Text(prefix, style=style) if prefix else Text()
        message = record.getMessage()
        exc = _exception(record)
        text.append(redact(f"{message}\n{exc}" if exc else message), style="dim" if record.levelno < logging.INFO else "")
        ui.err.print(text)


def _stderr_is_terminal() -> bool:
    from cdc.commands import ui

    return ui.err.is_terminal
