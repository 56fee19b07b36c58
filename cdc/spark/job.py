"""The merge job: change lines after merge.json -> lake versions + one Snowflake-ready batch.

Library entry point `merge(...)`; also a Spark application:

    spark-submit --master yarn --py-files cdc.zip cdc/spark/job.py --state-dir /data/.cdc \
        --source s3a://bucket/cdc --target s3a://...   (target: a path Spark and this driver can both write)
    python -m cdc.spark.job --state-dir .cdc

Order of a run N (crash-safe, each step idempotent):
  1. per table: write lake version vN and the batch's Parquet files (deterministic names);
  2. write the run journal (<target>/_runs/bN.json: the pointers to switch), then manifest.json (seals the batch);
  3. switch each lake table's pointer to vN; 4. write merge.json (data first, checkpoint last).
A rerun after a crash before 2 redoes everything onto the same base versions; after 2 it only
finishes steps 3-4, so the batch a downstream reader may already have loaded is never rewritten.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.checkpoints import MergeCheckpoint
from cdc.config import AWSSettings, SparkSettings
from cdc.errors import CdcError, DataError
from cdc.masking import masked_history
from cdc.schema import SchemaHistory
from cdc.spark import batches, flat, lake, lake_keys, latest, renames, scan, small_tables
from cdc.spark.parallel import PARALLEL_TABLES, merge_tables
from cdc.spark.rekey import key_change_cut
from cdc.spark.report import MergeSummary, Progress, Reporter, TableResult, timed
from cdc.spark.scan import TableStats
from cdc.spark.sources import Segment, in_run, list_input, spark_lines
from cdc.spark.table_merge import merge_table
from cdc.spark.types import keyed_schema
from cdc.state import StateDir, keep_files_private, read_json, write_json_atomic

# Local input up to this size is scanned in Python (scan.local_stats) even with a session up: a follow
# cycle's few lines cost milliseconds so, against a Spark job's second or more on a loaded machine. With the C
# scanner built, local input of any size is: 1M change lines took it 0.4 s against Spark's 3.2 s.
LOCAL_SCAN_BYTES = 16 * 1024 * 1024
# Input up to this size is read as one partition: a follow cycle's few lines spread over its 8-10 small segment
# files made ~2 partitions per table branch of the small tables' union (30 tasks for 16 tables), and scheduling
# them cost more than their rows: the one job's run 1.1-1.3 s -> 0.4-0.5 s (docs/performance.md, "Freshness").
ONE_PARTITION_BYTES = 16 * 1024 * 1024


def merge(
    state: StateDir,
    *,
    source: str | None = None,
    target: Path | str | None = None,
    settings: SparkSettings | None = None,
    aws: AWSSettings | None = None,
    spark: Any = None,
    max_segments: int | None = None,
    on_progress: Progress | None = None,
) -> MergeSummary:
    """Merge the sealed segments after merge.json into the lake and one batch; None batch if nothing new.

    on_progress: called with a MergeProgress at each phase (PHASES, in order), and per table at each step.
    """
    started = time.monotonic()
    report = Reporter(on_progress, started)
    state.ensure()
    target_dir = Path(target) if target else state.lake
    with state.lock(MergeCheckpoint.STAGE):
        checkpoint = MergeCheckpoint.read(state) or MergeCheckpoint()
        run = batches.run_number(checkpoint.last_batch) + 1
        report("listing")
        segments = list_input(state, source, checkpoint.last_segment, aws)[:max_segments]
        summary = MergeSummary(batch_id=None, lake=str(target_dir))
        if not segments:
            report("done")
            return summary
        batch = batches.batch_id(run)
        batch_dir = state.batch_dir(batch)
        journal_path = target_dir / "_runs" / f"{batch}.json"
        manifest = batches.read_manifest(state.manifest_path(batch))
        summary.resumed = manifest is not None
        report.set(batch_id=batch, segments=len(segments))
        if manifest is None:
            own, ahead = spark is None, None
            shutil.rmtree(batches.staging_dir(state.batches, batch), ignore_errors=True)
            if own:
                spark, ahead = _start(settings or SparkSettings(), state, segments, run, checkpoint.last_position,
                                      summary.phases, report, target_dir)
            jobs = _jobs_started(spark)
            try:
                # A fresh JVM (own session) merges table after table: its first queries are compiled as they run,
                # and concurrent ones measured no faster there (docs/performance.md, "Freshness").
                journal = _run(spark, state, segments, run, target_dir, checkpoint.last_position, report,
                               summary.phases, ahead, 1 if own else PARALLEL_TABLES)
                summary.spark_jobs = _jobs_started(spark) - jobs
            finally:
                if own:
                    from cdc.spark.session import stop_session

                    stop_session(spark)
            report("writing", table=None, step=None, result=None)
            write_json_atomic(journal_path, journal)
            tables = {t["result"]["table"]: t["manifest"] for t in journal["tables"] if t["manifest"]}
            manifest = batches.write_manifest(state.manifest_path(batch), batch, (segments[0].name, segments[-1].name),
                                              tables, journal.get("renames", []))
        stored = read_json(journal_path)
        if stored is None:
            raise DataError(f"batch {batch_dir} is sealed but its run journal {journal_path} is missing",
                            hint="the lake --target differs from the run that wrote the batch; pass the same --target")
        journal = stored
        if summary.resumed:
            report("writing")
        for entry in journal["tables"]:
            lake.switch(target_dir / entry["dir"], entry["pointer"])
        for name in journal.get("removed", []):  # renamed away: the table lives on under its new name
            shutil.rmtree(target_dir / name, ignore_errors=True)
        # last_position (beyond the documented fields): lines re-read at or before it (a tail replay
        # after a crash) were merged by an earlier run and are dropped, never re-applied.
        last_position = max(filter(None, [journal.get("max_position"), checkpoint.last_position]), default=None)
        # A run cut before a key change keeps its segment: the next run reads the rest of its input again.
        segment = checkpoint.last_segment if journal.get("key_change") else manifest["segments"][1]
        MergeCheckpoint(segment, batch, last_position).write(state)
        shutil.rmtree(batches.staging_dir(state.batches, batch), ignore_errors=True)
        summary.batch_id, summary.batch_dir = batch, str(batch_dir)
        summary.segments = list(manifest["segments"])
        summary.tables = [TableResult(**entry["result"]) for entry in journal["tables"]]
        summary.warnings = list(journal.get("warnings", []))
        summary.key_change = journal.get("key_change")
        summary.superseded = journal.get("superseded", 0)
        summary.cascade_lookups = journal.get("cascade_lookups", 0)
        summary.seconds = time.monotonic() - started
        report("done")
        return summary


def _jobs_started(spark: Any) -> int:
    """Spark jobs the session has started so far (job ids count up from 0; 0 before the session exists)."""
    if spark is None:
        return 0
    # The largest id taken in the JVM: PySpark's StatusTracker copies the array into Python one element per Py4J
    # round trip (two each), and the array holds every job the session still remembers (up to
    # spark.ui.retainedJobs, 1,000): ~4,000 round trips per merge once a `cdc run --follow` has run that long.
    sc = spark.sparkContext
    ids = sc._jsc.statusTracker().getJobIdsForGroup(None)
    return int(sc._jvm.java.util.Arrays.stream(ids).max().orElse(-1)) + 1


@dataclass
class _Ahead:
    """What a fresh process learns beside its JVM's start: the table stats, and the superseded-lines pass made."""

    infos: list[TableStats]
    fewer: latest.Fewer | None  # the pass's result (None: not worth it)
    made: bool  # whether the pass was made; _run decides whether its files are read


def _start(settings: SparkSettings, state: StateDir, segments: list[Segment], run: int, merged_upto: str | None,
           phases: dict[str, float], report: Reporter, target: Path) -> tuple[Any, _Ahead | None]:
    """This run's own SparkSession and, for local input, what a thread learns while its JVM starts: the table stats
    (read by a child process) and then the superseded-lines pass, whose C code holds no interpreter lock."""
    files = [f for s in segments for f in s.files]
    scanning = scan.LocalScan(files, merged_upto) if scan.is_local(files) else None
    staging = batches.staging_dir(state.batches, batches.batch_id(run))
    done: list[_Ahead | None | BaseException] = []

    def ahead() -> None:
        assert scanning is not None
        try:
            infos = scanning.result()
            done.append(None if infos is None else
                        _pass_ahead(state, segments, merged_upto, infos, staging, phases, (target, run)))
        except BaseException as exc:  # handed to the main thread by result()
            done.append(exc)

    thread = threading.Thread(target=ahead, name="cdc-merge-ahead", daemon=True) if scanning else None
    report("starting")
    try:
        if thread is not None:
            thread.start()
        with timed(phases, "session"):
            from cdc.spark.session import build_session, stop_session

            spark = build_session(settings, record_classes=True, one_shot=True, input_bytes=input_bytes(segments))
        if thread is None or scanning is None:  # (both or neither)
            return spark, None
        try:
            report("scanning")
            with timed(phases, "scan_wait"):  # what the session's start did not hide
                thread.join()
                if isinstance(done[0], BaseException):
                    raise done[0]
        except BaseException:
            stop_session(spark)
            raise
        phases["scan"] = scanning.seconds
        return spark, done[0]
    finally:
        if scanning is not None:
            scanning.close()  # a start that failed: the thread's read ends, and its pass (if any) is waited for
        if thread is not None and thread.is_alive():
            thread.join()


def _pass_ahead(state: StateDir, segments: list[Segment], merged_upto: str | None, infos: list[TableStats],
                staging: Path, phases: dict[str, float], lake_of: tuple[Path, int]) -> _Ahead:
    """The stats, and the pass _run would make where the stats alone say so (a cascade is only known later)."""
    history = masked_history(state)
    if any(i.renames for i in infos) or key_change_cut(history, infos) is not None \
            or not _pass_wanted(history, infos, segments):
        return _Ahead(infos, None, made=False)
    with timed(phases, "latest"):
        fewer = latest.for_run([f for s in segments for f in s.files], merged_upto, history, infos, staging,
                               lakes=lake_keys.lake_versions(*lake_of, history, infos))
    return _Ahead(infos, fewer, made=True)


def input_bytes(segments: list[Segment]) -> int:
    """The run's change-log JSON bytes (compressed files counted at ~6x their size)."""
    compressed = any(f.endswith((".gz", ".zst")) for s in segments for f in s.files)
    return sum(s.bytes for s in segments) * (6 if compressed else 1)


def _run(spark: Any, state: StateDir, segments: list[Segment], run: int, target: Path, merged_upto: str | None,
         report: Reporter, phases: dict[str, float], ahead: _Ahead | None,
         at_once: int = PARALLEL_TABLES) -> dict[str, Any]:
    """Steps 1 of a run: every table's lake version and batch files; returns the run journal.

    ahead: the table stats if already known (scan.local_stats), and the superseded-lines pass if made; else one
    Spark aggregate finds the stats.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from cdc.spark.session import tune_for_input
    from cdc.spark.types import LINE_SCHEMA

    files = [f for s in segments for f in s.files]
    tune_for_input(spark, input_bytes(segments))
    raw = spark_lines(spark, LINE_SCHEMA, files, merged_upto)
    history = masked_history(state)  # excluded columns gone, hashed ones text: what the change lines hold
    batch = batches.batch_id(run)
    staging = batches.staging_dir(state.batches, batch)  # cleared by merge(), before any pass ran ahead
    entries = []
    infos = ahead.infos if ahead is not None else None
    fed = None  # the superseded-lines pass, fed by the scan's own read of each line (cdc.spark.latest.alongside_scan)
    if infos is None:
        report("scanning")
        with timed(phases, "scan"):  # the first read: per table row count, positions, truncates
            few = sum(s.bytes for s in segments) <= LOCAL_SCAN_BYTES
            in_python = scan.is_local(files) and (few or scan.native_module() is not None)
            if in_python:
                infos, fed = latest.scan_and_feed(files, merged_upto, history, [s.name for s in segments])
            else:
                infos = scan.spark_stats(raw)
    cut = key_change_cut(history, infos)
    if cut is not None:  # this run ends before a key change; the next one merges the rest (cdc.spark.rekey)
        raw = raw.filter(F.col("position") < F.lit(cut))
        infos = scan.spark_stats(raw)
    max_position = max((i.last_position for i in infos), default=merged_upto)  # of the real lines, never a derived one
    raw, infos, plan = renames.follow(raw, infos)  # each line under its table's name at the run's end
    with timed(phases, "cascades"):  # ~0 without cascading foreign keys or parent updates/deletes
        cascades = _cascades(spark, raw, state, history, infos, target, run, plan)
    # A table created in this run that has no row yet has no schema history either (tail records one at its first
    # table map): nothing to merge, and no schema to merge it with.
    infos = [i for i in cascades.stats(infos) if i.rows or history.at(i.db, i.table, i.last_position) is not None]
    report.set(tables_total=len(infos), changes_total=sum(i.rows for i in infos))
    # The compaction's read leaves out the lines a later change of their key supersedes (cdc.spark.latest): not with a
    # cut, renames or cascades, whose other reads of the lines are not the compaction's; not for a follow cycle's few.
    # (The lines read as LINE_SCHEMA, without a keyed schema, are the ones `raw` holds: all of them.)
    keyed, fewer = keyed_schema(history, infos), None
    wanted = cut is None and plan is None and not cascades.lines and _pass_wanted(history, infos, segments)
    if ahead is not None and ahead.made:
        fewer = ahead.fewer
        if not wanted:
            latest.discard(fewer)
            fewer = None
    elif wanted:
        with timed(phases, "latest"):
            fewer = latest.for_run(files, merged_upto, history, infos, staging, fed,
                                   lake_keys.lake_versions(target, run, history, infos))
    if keyed is not None:  # the lines again, `key`/`before`/`after` read as structs (types.keyed_line_schema)
        marks = fewer is not None and bool(fewer.in_lake)  # with `_lake`: the line's key is in the lake
        raw = spark_lines(spark, keyed, [str(f) for f in fewer.files] if fewer else files, merged_upto, cut, marks)
        if fewer:  # its kept lines in flat form too, after the same filter as the JSON lines
            raw = flat.with_flat(spark, raw, keyed, fewer, lambda lines: in_run(lines, merged_upto, cut), marks)
    raw = plan.relabel(raw) if plan is not None else raw
    if input_bytes(segments) <= ONE_PARTITION_BYTES:
        raw = raw.coalesce(1)
    if cascades.lines:
        from cdc.spark.cascade_reads import read_lines

        raw = raw.unionByName(read_lines(spark, raw.schema, cascades.lines))
    # A follow cycle's small tables: one Spark query for all of them, their files written on the driver.
    small = [] if cut is not None or plan is not None else \
        small_tables.pick(history, [i for i in infos if i.rows], target, run)
    chosen = {(t.info.db, t.info.table) for t in small}
    infos = [i for i in infos if (i.db, i.table) not in chosen]
    # One read of the lines (one table): its read parses only the fields it uses, cheaper than building a cache
    # of every parsed line (measured: the cache cost ~6 s per 300,000 lines, a second read ~3 s). Several
    # (each table merged one by one, each small table a branch of one union): the first read caches the lines.
    if sum(1 for i in infos if i.rows) + len(small) > 1:
        raw = raw.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if small:
            entries.extend(_merge_small(spark, raw, small, run, state.batch_dir(batch), staging, phases, report,
                                        cascades.derived, alone=not any(i.rows for i in infos)))

        def merge_one(info: TableStats, **progress: Any) -> dict[str, Any]:
            return merge_table(spark, raw, history, info, run=run, target=target,
                                base_dir=renames.lake_base(target, plan, info.db, info.table),
                                batch_dir=state.batch_dir(batch), staging=staging,
                                unique=latest.unique_keys(fewer, info.db, info.table),
                                lake_known=latest.lake_known(fewer, info.db, info.table), **progress)

        for entry in merge_tables(merge_one, infos, phases, report, at_once, done=len(small)):
            entry["result"]["cascaded"] = cascades.derived.get(entry["result"]["table"], 0)
            entries.append(entry)
    finally:
        raw.unpersist()
        latest.discard(fewer)
    moved = renames.journal(plan, target, {e["dir"] for e in entries}) if plan is not None else {}
    return {"version": 1, "batch_id": batch, "tables": entries, "max_position": max_position,
            "warnings": cascades.warnings, "key_change": cut, "superseded": fewer.skipped if fewer else 0,
            "cascade_lookups": cascades.lookups, **moved}


def _merge_small(spark: Any, raw: Any, small: list[small_tables.SmallTable], run: int, batch_dir: Path,
                 staging: Path, phases: dict[str, float], report: Reporter, cascaded: dict[str, int], *,
                 alone: bool) -> list[dict[str, Any]]:
    """The small tables' entries (cdc.spark.small_tables), each table's finish reported as merge_tables does."""
    def step(table: str, name: str) -> None:
        report("merging", table=table, step=name, result=None)

    entries = small_tables.merge_small(spark, raw, small, run=run, batch_dir=batch_dir, staging=staging,
                                       phases=phases, step=step, alone=alone)
    for done, entry in enumerate(entries, start=1):
        entry["result"]["cascaded"] = cascaded.get(entry["result"]["table"], 0)
        result = TableResult(**entry["result"])
        report("merging", table=result.table, step=None, tables_done=done,
               changes_done=report.now.changes_done + result.changes, result=result)
    return entries


def _cascades(spark: Any, raw: Any, state: StateDir, history: SchemaHistory, infos: list[TableStats], target: Path,
              run: int, plan: renames.RenamePlan | None) -> Any:
    """The child-row changes InnoDB's foreign-key cascades made in this run (cdc.spark.cascades)."""
    from cdc.spark import evolve
    from cdc.spark.cascade_reads import derive

    def lake_base(final: Any) -> Any:
        directory = renames.lake_base(target, plan, final.db, final.table)
        if directory is None:
            return None
        base_name = lake.base_version(directory, run)
        since = lake.base_schema_position(directory, run)
        versions = history.versions(final.db, final.table)
        return evolve.read_base(spark, str(directory / base_name), final, versions, since) if base_name else None

    return derive(spark, raw, history, infos, lake_base, state.read_server())


def _pass_wanted(history: SchemaHistory, infos: list[TableStats], segments: list[Segment]) -> bool:
    """Whether the superseded-lines pass is worth making, as far as the table stats say (cdc.spark.latest)."""
    return keyed_schema(history, infos) is not None and latest.worth_a_pass(infos, input_bytes(segments))


def main(argv: list[str] | None = None) -> int:
    """`spark-submit cdc/spark/job.py` / `python -m cdc.spark.job`: run one merge, print a JSON summary."""
    import json

    parser = argparse.ArgumentParser(prog="cdc.spark.job", description="Run one cdc spark-merge.")
    parser.add_argument("--state-dir", default=".cdc")
    parser.add_argument("--source", default=None)
    parser.add_argument("--target", default=None)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--conf", action="append", default=[])
    parser.add_argument("--max-segments", type=int, default=None)
    args = parser.parse_args(argv)
    keep_files_private()
    settings = SparkSettings(master=args.master, driver_memory=args.driver_memory, conf=tuple(args.conf))
    try:
        summary = merge(StateDir(args.state_dir), source=args.source, target=args.target, settings=settings,
                        max_segments=args.max_segments)
    except CdcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    print(json.dumps(summary.to_dict(), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
