"""`cdc snapshot`: consistent initial copy of the selected tables, handed over to tail at an exact position."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from cdc.commands import ui
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, mysql_options, runs_stage, settings_from
from cdc.errors import ExitCode
from cdc.snapshot import DEFAULT_CHUNK_SIZE, SnapshotRequest, SnapshotSummary, TableProgress, run_snapshot

_SEL = "Selection"


@mysql_options
def snapshot(
    tables: Annotated[Optional[list[str]], typer.Option(
        "--tables", help="db.table to copy; globs allowed (shop.*); repeatable.", rich_help_panel=_SEL)] = None,
    databases: Annotated[Optional[list[str]], typer.Option(
        "--databases", help="Copy every table of this database; repeatable.", rich_help_panel=_SEL)] = None,
    exclude_tables: Annotated[Optional[list[str]], typer.Option(
        "--exclude-tables", help="db.table glob to leave out; repeatable.", rich_help_panel=_SEL)] = None,
    chunk_size: Annotated[int, typer.Option("--chunk-size", help="Rows per chunk (one segment, one checkpoint).")]
    = DEFAULT_CHUNK_SIZE,
    lock: Annotated[str, typer.Option("--lock", help="auto | mariadb | global | tables | none "
                                      "(see docs/guide.md).")] = "auto",
    allow_no_pk: Annotated[bool, typer.Option("--allow-no-pk", help="Copy tables without a primary key "
                                              "(key = all columns).")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Refuse (exit 4) when the copy would outlive "
                                         "the binlog retention, instead of warning.")] = False,
    workers: Annotated[int, typer.Option("--workers", help="Processes reading a big table's parts at once "
                                         "(MariaDB, in the same snapshot; see docs/guide.md).")] = 1,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, object],
) -> None:
    """Copy the selected tables consistently into the change log and record tail's hand-over position."""
    settings = settings_from(config, state_dir, mysql_flags, **{
        "mysql.tables": tuple(tables or ()), "mysql.databases": tuple(databases or ()),
        "mysql.exclude_tables": tuple(exclude_tables or ())})
    runs_stage(settings, "snapshot", "cdc snapshot")
    request = SnapshotRequest(chunk_size=chunk_size, lock=lock, allow_no_pk=allow_no_pk, strict=strict,
                              workers=workers)
    with _progress(enabled=not as_json) as on_progress:
        summary = run_snapshot(settings, request, on_progress=on_progress, on_warning=_warn)
    _render(summary, as_json)
    raise typer.Exit(int(ExitCode.OK))


def _warn(message: str) -> None:
    ui.err.print(f"[yellow]warning:[/] {ui.escape(message)}")


@contextmanager
def _progress(enabled: bool) -> Iterator[object]:
    """One rich progress bar per table with rows and ETA (stderr, TTY only)."""
    if not enabled or not ui.err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"),
                   TimeRemainingColumn(), console=ui.err)
    tasks: dict[str, object] = {}

    def update(p: TableProgress) -> None:
        if p.table not in tasks:
            tasks[p.table] = bar.add_task(ui.escape(p.table), total=p.estimate)
        bar.update(tasks[p.table], completed=p.rows, total=p.estimate)  # type: ignore[arg-type]

    with bar:
        yield update


def _render(summary: SnapshotSummary, as_json: bool) -> None:
    if as_json:
        ui.print_json(summary.to_dict())
        return
    h = summary.checkpoint.handover
    doc = summary.to_dict()
    ui.table(f"snapshot {summary.status}", ["table", "rows", "chunks"],
             [(name, t["rows"], t["chunks"]) for name, t in doc["tables"].items()])
    ui.note(f"hand-over {h.file}:{h.pos} gtid={h.gtid or '-'}; lock {doc['lock']} held {doc['lock_seconds']:.3f}s; "
            f"{doc['rows']} rows in {doc['chunks']} chunks, {doc['seconds']:.1f}s. Next: cdc tail")
