"""`cdc spark-merge`: change log -> compacted per-key changes -> lake tables + a Snowflake-ready batch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cdc.commands import logs, ui
from cdc.commands.logs import log_options
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, runs_stage, settings_from
from cdc.spark import MergeProgress, TableResult, merge
from cdc.state import StateDir

_SPARK = "Spark"
SourceOpt = Annotated[Optional[str], typer.Option("--source", help=(
    "changelog (default: <state>/changelog), a local directory of `cdc ship --to s3` objects, "
    "s3://bucket/prefix (new objects downloaded with boto3 into <state>/merge-cache/, no hadoop-aws needed) "
    "or s3a://bucket/prefix (read by Spark directly; a cluster with hadoop-aws)."))]
TargetOpt = Annotated[Optional[Path], typer.Option("--target", help="Lake directory (default: <state>/lake).")]
MasterOpt = Annotated[Optional[str], typer.Option("--master", help="Spark master (default: local[*]).", rich_help_panel=_SPARK)]
MemoryOpt = Annotated[Optional[str], typer.Option("--driver-memory", help="Driver memory (default: 2g).", rich_help_panel=_SPARK)]
ConfOpt = Annotated[Optional[list[str]], typer.Option("--conf", help="Spark setting k=v (repeatable).", rich_help_panel=_SPARK)]
MaxOpt = Annotated[Optional[int], typer.Option("--max-segments", help="Merge at most this many segments in this run.")]


@log_options
def spark_merge(
    source: SourceOpt = None,
    target: TargetOpt = None,
    master: MasterOpt = None,
    driver_memory: MemoryOpt = None,
    conf: ConfOpt = None,
    max_segments: MaxOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge new change-log segments into the lake tables and write one Snowflake-ready batch.

    On a cluster: spark-submit --py-files cdc.zip cdc/spark/job.py --state-dir DIR --source s3a://...
    """
    settings = settings_from(config, state_dir, **{"spark.master": master, "spark.driver_memory": driver_memory,
                                                   "spark.conf": tuple(conf or ())})
    runs_stage(settings, "spark-merge", "cdc spark-merge")
    # `--conf spark.hadoop.fs.s3a.secret.key=...`: py4j's debug log would show it.
    logs.add_secrets(value for key, _, value in (item.partition("=") for item in settings.spark.conf)
                     if any(word in key.lower() for word in ("secret", "password", "token", "credential")))
    with _progress(live=logs.live() and not as_json, master=settings.spark.master) as progress:
        summary = merge(StateDir(settings.state_dir), source=source, target=target, settings=settings.spark,
                        aws=settings.aws, max_segments=max_segments, on_progress=progress)
    if as_json:
        ui.print_json(summary.to_dict())
    elif summary.batch_id is None:
        ui.note("nothing to merge: no sealed segment after the checkpoint (merge.json)")
    else:
        ui.table(f"batch {summary.batch_id}" + (" (finished a crashed run)" if summary.resumed else ""),
                 ["table", "changes", "batch rows", "inserts", "deletes", "lake rows"],
                 [(t.table, t.changes, t.batch_rows, t.inserts, t.deletes, t.lake_rows) for t in summary.tables])
        ui.note(f"merged segments {summary.segments[0]} .. {summary.segments[-1]} in {summary.seconds:.1f}s; "
                f"lake {summary.lake}, batch {summary.batch_dir}")
        for warning in summary.warnings:  # a cascade into a table that is not captured (issue #24)
            ui.warn(warning)


@contextmanager
def _progress(live: bool, master: str) -> Iterator[Callable[[MergeProgress], None]]:
    """At a terminal a progress display (phase, tables done, change lines merged); else a log record per phase and
    per table. A finished table is noted either way."""
    if not live:
        seen: list[tuple[str, Optional[str]]] = []

        def log_phase(p: MergeProgress) -> None:
            if p.result is not None:
                _note_table(p.result, p)
            elif p.phase == "done":
                pass  # the summary follows
            elif (p.phase, p.table) not in seen[-1:]:
                ui.note(f"spark-merge: {_describe(p, master)}", **_fields(p))
            elif p.step:  # a table's next step: for --log-level debug
                logs.command_log().debug(f"spark-merge: {_describe(p, master)}", extra=_fields(p))
            seen[:] = [(p.phase, p.table)]

        yield log_phase
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                   TimeElapsedColumn(), console=ui.err, transient=True)
    task = bar.add_task("spark-merge", total=None, counts="")

    def update(p: MergeProgress) -> None:
        if p.result is not None:
            _note_table(p.result, p)
        counts = f"tables {p.tables_done}/{p.tables_total}  {p.changes_done:,}/{p.changes_total:,} changes" \
            if p.tables_total else ""
        bar.update(task, description=ui.escape(_describe(p, master)), completed=p.changes_done,
                   total=p.changes_total or None, counts=counts)

    with bar:
        yield update


_STEPS = {"compacting": "compacting", "lake": "writing the lake version", "batch": "writing the batch files"}


def _describe(p: MergeProgress, master: str) -> str:
    if p.phase == "listing":
        return "finding new segments"
    if p.phase == "starting":
        return f"starting Spark ({master})"
    if p.phase == "scanning":
        return f"scanning {p.segments} segment(s)"
    if p.phase == "merging":
        step = f": {_STEPS.get(p.step or '', p.step)}" if p.step else ""
        return f"merging {p.table} ({min(p.tables_done + 1, p.tables_total)}/{p.tables_total}){step}"
    if p.phase == "writing":
        return f"writing batch {p.batch_id} (manifest, lake pointers, checkpoint)"
    return f"done in {p.seconds:,.1f}s"


def _fields(p: MergeProgress) -> dict[str, Any]:
    return {"stage": "spark-merge", "phase": p.phase, "batch_id": p.batch_id, "table": p.table, "step": p.step,
            "tables_done": p.tables_done, "tables_total": p.tables_total, "rows": p.changes_done,
            "rows_total": p.changes_total, "seconds": p.seconds}


def _note_table(result: TableResult, p: MergeProgress) -> None:
    rate = p.changes_done / p.seconds if p.seconds > 0 else 0.0
    ui.note(f"{result.table}: {result.changes:,} changes -> {result.batch_rows:,} batch rows, {result.lake_rows:,} lake rows",
            **_fields(p), rows_per_second=round(rate, 1))
