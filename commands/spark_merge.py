"""`cdc spark-merge`: change log -> compacted per-key changes -> lake tables + a Snowflake-ready batch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cdc.commands import ui
from cdc.commands.options import ConfigOpt, JsonOpt, StateDirOpt, runs_stage, settings_from
from cdc.spark import TableResult, merge
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
    progress = None if as_json else _note_table
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


def _note_table(result: TableResult) -> None:
    ui.note(f"{result.table}: {result.changes:,} changes -> {result.batch_rows:,} batch rows, {result.lake_rows:,} lake rows")
