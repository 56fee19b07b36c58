"""`cdc verify`: compare MySQL with the lake / Snowflake at a pinned binlog position (the cut-over gate)."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from pathlib import Path
from typing import Annotated, Optional

import typer

from cdc.commands import ui
from cdc.commands.options import (
    ConfigOpt,
    JsonOpt,
    SfConnectionOpt,
    SfDatabaseOpt,
    SfSchemaOpt,
    StateDirOpt,
    complete_tables,
    mysql_options,
    settings_from,
)
from cdc.durations import parse_duration
from cdc.pipeline.verify import TableResult, VerifyReport, VerifyRequest
from cdc.pipeline.verify import verify as run_verify

_SEL = "Selection"
_STYLE = {"OK": "green", "DIFF": "bold red", "BEHIND": "yellow", "MISSING": "bold red"}


@mysql_options
def verify(
    target: Annotated[Optional[list[str]], typer.Option(
        "--target", help="lake | snowflake | all (default: every target whose stage has run); repeatable.")] = None,
    tables: Annotated[Optional[list[str]], typer.Option(
        "--tables", help="db.table to compare; globs allowed; repeatable (default: every table in the state).",
        rich_help_panel=_SEL, autocompletion=complete_tables)] = None,
    databases: Annotated[Optional[list[str]], typer.Option(
        "--databases", help="Compare every table of this database; repeatable.", rich_help_panel=_SEL)] = None,
    lake: Annotated[Optional[Path], typer.Option("--lake", help="Lake directory (spark-merge --target; "
                                                 "default: <state>/lake).")] = None,
    wait: Annotated[Optional[str], typer.Option("--wait", help="While a target is BEHIND, re-pin and retry for "
                                                "this long (500ms, 5s, 10m, 2h).")] = None,
    sample: Annotated[int, typer.Option("--sample", help="Differing keys listed per table.")] = 20,
    page: Annotated[int, typer.Option("--page", help="Rows per primary-key range.")] = 10_000,
    connection_name: SfConnectionOpt = None,
    sf_database: SfDatabaseOpt = None,
    sf_schema: SfSchemaOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, object],
) -> None:
    """Compare source and targets row by row at a pinned binlog position: exit 0 equal, 7 different or behind."""
    settings = settings_from(config, state_dir, mysql_flags, **{
        "mysql.tables": tuple(tables or ()), "mysql.databases": tuple(databases or ()),
        "snowflake.connection": connection_name, "snowflake.database": sf_database, "snowflake.schema": sf_schema})
    request = VerifyRequest(targets=tuple(target or ()), lake=lake, sample=sample, page=page,
                            wait=None if wait is None else parse_duration(wait, "--wait"))
    report = run_verify(settings, request, on_progress=_progress)
    if as_json:
        ui.print_json(report.to_dict())
    else:
        _render(report)
    raise typer.Exit(int(report.exit_code))


def _progress(result: TableResult) -> None:
    ui.note(f"{result.table} -> {result.target}: {result.status}")


def _render(report: VerifyReport) -> None:
    pinned = report.pinned
    grid = [(t.table, t.target, _count(t.source_rows), _count(t.target_rows), t.status, _keys(t)) for t in report.tables]
    ui.table(f"cdc verify at {pinned.file}:{pinned.pos}", ["table", "target", "source rows", "target rows", "status",
                                                         "differing keys"], grid)
    for t in report.tables:
        if t.detail:
            style = _STYLE.get(t.status, "white")
            ui.err.print(f"[{style}]{t.status}[/] {ui.escape(t.table)} -> {ui.escape(t.target)}: {ui.escape(t.detail)}")
    verdict = "[green]all equal[/]" if report.ok else "[bold red]differences found[/]"
    ui.err.print(f"{verdict} ({len(report.tables)} comparison(s), {report.seconds:.1f}s, attempt {report.attempts})")


def _count(value: Optional[int]) -> str:
    return "-" if value is None else f"{value:,}"


def _keys(result: TableResult) -> str:
    # A keyless table's differing rows say how many copies differ ("missing 2x a=1,b='x'").
    shown = ", ".join(f"{d['kind']} {str(d['copies']) + 'x ' if 'copies' in d else ''}{_key(d['key'])}"
                      for d in result.differing)
    return shown + (f" (+{result.more} more)" if result.more else "")


def _key(key: dict) -> str:
    return ",".join(f"{k}={v!r}" for k, v in key.items())
