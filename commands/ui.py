"""Rendering shared by commands: data to stdout, status and errors to stderr."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from cdc.escapes import json_safe, visible

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

# Piped or logged output has no width: rich's default of 80 columns would fold table cells mid-word (an SQL fix
# split in two, a binlog position broken across lines). A terminal, or COLUMNS set by the user, keeps its width.
UNBOUNDED = 100_000

STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "info": "cyan", "skip": "dim"}


def sized(console: Console) -> Console:
    """`console` at a terminal or with COLUMNS set; else a console on the same stream with no width limit (rich
    clamps a print's width to its console's, so the width has to be the console's own)."""
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(file=console.file, width=UNBOUNDED, highlight=False, soft_wrap=True)


def is_tty() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def print_json(document: Any) -> None:
    """Machine output: one JSON document on stdout, nothing else there."""
    sys.stdout.write(json_safe(json.dumps(document, indent=2, sort_keys=True, default=str, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def print_json_line(document: Any, stream: TextIO | None = None) -> None:
    """Machine output for streams of records: one compact JSON object per line (stdout unless told)."""
    stream = stream or sys.stdout
    stream.write(json_safe(json.dumps(document, sort_keys=True, default=str, ensure_ascii=False)) + "\n")
    stream.flush()


def error(message: str, **fields: Any) -> None:
    """An error on stderr; a log record (with its fields) once the command's logs are set up (commands/logs.py)."""
    from cdc.commands import logs

    if logs.configured():
        logs.command_log().error(message, extra=fields)
    else:
        err.print(f"[bold red]error:[/] {escape(message)}")


def warn(message: str, **fields: Any) -> None:
    from cdc.commands import logs

    if logs.configured():
        logs.command_log().warning(message, extra=fields)
    else:
        err.print(f"[yellow]warning:[/] {escape(message)}")


def note(message: str, **fields: Any) -> None:
    """A message for people on stderr (an info record once the logs are set up); data goes to stdout."""
    from cdc.commands import logs

    if logs.configured():
        logs.command_log().info(message, extra=fields)
    else:
        err.print(escape(message))


def escape(text: str) -> str:
    """Text shown as it is: rich markup escaped, and control characters spelled out (`\\x1b`), so a table name
    or a value holding ESC cannot clear the screen, retitle the window or rewrite a line (#26)."""
    from rich.markup import escape as _escape

    return _escape(visible(text, newlines=True))


def status_text(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status.upper()}[/]"


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, status_column: int | None = None) -> None:
    """Print a table for people (stdout, so it can be paged); strings are never parsed as markup."""
    grid = Table(title=escape(title), show_lines=False, expand=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        cells = [escape("" if cell is None else str(cell)) for cell in row]
        if status_column is not None:
            cells[status_column] = status_text(str(row[status_column]))
        grid.add_row(*cells)
    sized(out).print(grid)
