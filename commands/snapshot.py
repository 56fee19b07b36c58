"""`cdc snapshot`: consistent initial copy of the selected tables, handed over to tail at an exact position."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from cdc.commands import logs, ui
from cdc.commands.logs import log_options
from cdc.commands.options import (
    ConfigOpt,
    JsonOpt,
    StateDirOpt,
    choices,
    complete_tables,
    mysql_options,
    runs_stage,
    settings_from,
)
from cdc.commands.resnapshot import progress as resnapshot_progress
from cdc.commands.resnapshot import render as render_resnapshot
from cdc.errors import ExitCode
from cdc.snapshot import (
    DEFAULT_CHUNK_SIZE,
    LOCK_MODES,
    RESNAPSHOT_CHUNK_SIZE,
    ResnapshotRequest,
    SnapshotRequest,
    SnapshotSummary,
    TableProgress,
    run_resnapshot,
    run_snapshot,
)

_SEL = "Selection"


@log_options
@mysql_options
def snapshot(
    tables: Annotated[Optional[list[str]], typer.Option(
        "--tables", help="db.table to copy; globs allowed (shop.*); repeatable.", rich_help_panel=_SEL,
        autocompletion=complete_tables)] = None,
    databases: Annotated[Optional[list[str]], typer.Option(
        "--databases", help="Copy every table of this database; repeatable.", rich_help_panel=_SEL)] = None,
    exclude_tables: Annotated[Optional[list[str]], typer.Option(
        "--exclude-tables", help="db.table glob to leave out; repeatable.", rich_help_panel=_SEL,
        autocompletion=complete_tables)] = None,
    chunk_size: Annotated[int, typer.Option("--chunk-size", help="Rows per chunk (one segment, one checkpoint).")]
    = DEFAULT_CHUNK_SIZE,
    lock: Annotated[str, typer.Option("--lock", help="auto | mariadb | global | tables | none "
                                      "(see docs/guide.md).", autocompletion=choices(LOCK_MODES))] = "auto",
    allow_no_pk: Annotated[bool, typer.Option("--allow-no-pk", help="Copy tables without a primary key "
                                              "(replicated as multisets of whole rows).")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Refuse (exit 4) when the copy would outlive "
                                         "the binlog retention, instead of warning.")] = False,
    workers: Annotated[int, typer.Option("--workers", help="Processes reading a big table's parts at once "
                                         "(MariaDB, in the same snapshot; see docs/guide.md).")] = 1,
    add_table: Annotated[Optional[list[str]], typer.Option(
        "--add-table", help="Add db.table to a running capture without stopping tail (read like `cdc resnapshot`; "
        "repeatable).", rich_help_panel=_SEL, autocompletion=complete_tables)] = None,
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
    if add_table:  # not the initial copy: tables read between watermarks into a running capture
        request_add = ResnapshotRequest(tuple(add_table), chunk_size=min(chunk_size, RESNAPSHOT_CHUNK_SIZE), add=True)
        with resnapshot_progress(not as_json, settings.log.status_seconds()) as on_step:
            render_resnapshot(run_resnapshot(settings, request_add, on_progress=on_step), as_json)
        raise typer.Exit(int(ExitCode.OK))
    runs_stage(settings, "snapshot", "cdc snapshot")
    request = SnapshotRequest(chunk_size=chunk_size, lock=lock, allow_no_pk=allow_no_pk, strict=strict,
                              workers=workers)
    # Warnings, and a line per table copied, are logged by the library (cdc.snapshot.run).
    with _progress(not as_json, settings.log.status_seconds()) as on_progress:
        summary = run_snapshot(settings, request, on_progress=on_progress)
    _render(summary, as_json)
    raise typer.Exit(int(ExitCode.OK))


@contextmanager
def _progress(enabled: bool, status_interval: float) -> Iterator[object]:
    """One rich progress bar per table with rows and ETA at a TTY; else a status log record now and then."""
    if not enabled or not logs.live():
        every = logs.Every(status_interval)

        def status(p: TableProgress) -> None:
            if not p.done and every.due():
                ui.note(f"snapshot copying {p.table}: {p.rows:,} of ~{p.estimate:,} rows, {p.chunks} chunk(s)",
                        stage="snapshot", table=p.table, rows=p.rows, estimate=p.estimate, chunks=p.chunks)

        yield status
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
