"""`cdc resnapshot`: read tables again while tail keeps running (watermarks through the binlog, or locked reads)."""

# No `from __future__ import annotations`: @mysql_options re-wraps the signature and typer must see real types.

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Optional

import typer

from cdc.commands import logs, ui
from cdc.commands.logs import log_options
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, complete_tables, mysql_options, settings_from
from cdc.errors import ExitCode
from cdc.snapshot import RESNAPSHOT_CHUNK_SIZE, PurgeGap, ResnapshotProgress, ResnapshotRequest, ResnapshotSummary, run_resnapshot


class Mode(StrEnum):
    auto = "auto"
    watermarks = "watermarks"
    locked = "locked"


@log_options
@mysql_options
def resnapshot(
    tables: Annotated[Optional[list[str]], typer.Argument(help="db.table to read again; globs allowed (shop.*).",
                                                          autocompletion=complete_tables)] = None,
    chunk_size: Annotated[int, typer.Option("--chunk-size", help="Rows per chunk (one watermark window).")]
    = RESNAPSHOT_CHUNK_SIZE,
    wait_timeout: Annotated[float, typer.Option("--wait-timeout", help="Seconds to wait for tail to reach a "
                                                "watermark before giving up (exit 9; rerun to resume).")] = 600.0,
    all_tables: Annotated[bool, typer.Option("--all", help="Every captured table; first restarts tail at the binlog "
                                             "end if the binlog it needs was purged (docs/guide.md).")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Give the unfinished run up (tail stops waiting for its "
                                         "chunk; nothing more is emitted).")] = False,
    mode: Annotated[Mode, typer.Option("--mode", help="watermarks (written through the binlog: a writable "
                                       "watermark table), locked (each chunk read under LOCK TABLES ... READ: for a "
                                       "read-only replica), or auto: watermarks if the table is writable.")]
    = Mode.auto,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    *,
    mysql_flags: dict[str, object],
) -> None:
    """Read tables again while tail runs: repairs what the binlog did not carry (see docs/guide.md)."""
    settings = settings_from(config, state_dir, mysql_flags)
    request = ResnapshotRequest(tuple(tables or ()), chunk_size=chunk_size, wait_timeout=wait_timeout, cancel=cancel,
                                all=all_tables, mode=mode.value)
    with progress(not as_json, settings.log.status_seconds()) as on_progress:
        summary = run_resnapshot(settings, request, on_progress=on_progress, on_gap=gap_note)
    render(summary, as_json)
    raise typer.Exit(int(ExitCode.OK))


@contextmanager
def progress(enabled: bool, status_interval: float) -> Iterator[object]:
    """A progress bar per table with rows and ETA at a TTY; else a status log record now and then."""
    if not enabled or not logs.live():
        every = logs.Every(status_interval)

        def status(p: ResnapshotProgress) -> None:
            if every.due() or p.phase == "done":
                ui.note(f"resnapshot {p.phase} {p.table}: {p.rows:,} of ~{p.est_rows:,} rows, {p.chunks} chunk(s)",
                        stage="resnapshot", table=p.table, rows=p.rows, estimate=p.est_rows, chunks=p.chunks)

        yield status
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"),
                   TimeRemainingColumn(), console=ui.err)
    tasks: dict[str, object] = {}

    def update(p: ResnapshotProgress) -> None:
        if p.table not in tasks:
            tasks[p.table] = bar.add_task(ui.escape(p.table), total=p.est_rows)
        label = ui.escape(p.table) + ("" if p.phase == "reading" else f" ({p.phase})")
        bar.update(tasks[p.table], completed=p.rows, total=p.est_rows, description=label)  # type: ignore[arg-type]

    with bar:
        yield update


def gap_note(gap: PurgeGap) -> None:
    ui.note(f"tail's binlog was purged at {gap.purged_at} (the server's oldest is {gap.oldest}): tail's checkpoint "
            f"now is {gap.restarted_at}; start `cdc tail --follow` (or `cdc run --follow`) now, every captured table "
            "is read again through it", stage="resnapshot", **gap.to_dict())


def render(summary: ResnapshotSummary, as_json: bool) -> None:
    if as_json:
        ui.print_json(summary.to_dict())
        return
    ui.table(f"resnapshot {summary.run} ({summary.mode}" + (", resumed)" if summary.resumed else ")"), ["table", "rows", "chunks"],
             [(name, t["rows"], t["chunks"]) for name, t in summary.tables.items()])
    ui.note(f"read again in {summary.seconds:.1f}s; the rows reach the lake and Snowflake with the next "
            "spark-merge and snowflake-apply")
