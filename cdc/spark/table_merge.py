"""One table's merge in Spark: its compaction against the lake version, the new lake version, its batch files.

cdc.spark.job runs it per table (cdc.spark.parallel: several at once in a warm session); a follow cycle's
small tables take cdc.spark.small_tables instead, which reuses the same compaction.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cdc.errors import DataError
from cdc.schema import SchemaHistory, TableSchema
from cdc.spark import batches, lake
from cdc.spark.report import TableResult, timed

log = logging.getLogger(__name__)

# Up to this many touched keys, the anti join that copies the untouched lake rows broadcasts the keys
# (the lake is then only scanned, never shuffled). ~1M keys is tens of MiB on the driver even for
# wide composite keys; past it, Spark's own join choice (a shuffle of the lake) is the safe one.
# The same bound holds for the lake's keys, broadcast to events known one per key (compact.last_changes).
BROADCAST_KEYS = 1_000_000

def merge_table(spark: Any, raw: Any, history: SchemaHistory, info: Any, *, run: int, target: Path,
                 base_dir: Path | None,
                 batch_dir: Path, staging: Path, phases: dict[str, float],
                 step: Callable[[str], None], unique: bool = False, lake_known: bool = False) -> dict[str, Any]:
    """One table's journal entry, its lake version and batch files written. unique: `raw` holds one event per key
    of this table (cdc.spark.latest.Fewer.unique); lake_known: and its `_lake` says which keys the lake version holds
    (cdc.spark.lake_keys)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from cdc.spark import compact, evolve, multiset

    final = history.at(info.db, info.table, info.last_position)
    if final is None:
        raise DataError(f"{info.db}.{info.table}: no schema history at {info.last_position} "
                        f"({history.path(info.db, info.table)})",
                        hint="snapshot/tail record the schema before the changes; rerun them for this table")
    directory = lake.table_dir(target, info.db, info.table)
    # A renamed table merges onto the lake table of its name when the run started (cdc.spark.renames).
    base_name = lake.base_version(base_dir, run) if base_dir else None
    base_path = base_dir / base_name if base_dir and base_name else None
    versions = history.versions(info.db, info.table)
    base_position = lake.base_schema_position(base_dir, run) if base_dir else ""
    base = evolve.read_base(spark, str(base_path), final, versions, base_position) if base_path else None
    table_input = info.as_input()
    lake_rows_before = lake.version_rows(base_path) if base_path else 0
    keyless = not final.primary_key  # a multiset of full rows (cdc.spark.multiset)
    if keyless:
        events = multiset.row_events(raw, versions, final, table_input)
        changed = multiset.count_changes(events, base, final, table_input)
    else:
        known = unique and lake_known and base is not None
        events = compact.table_events(raw, versions, final, table_input, lake_known=known, unique=unique)
        # With one event per key and a lake whose keys are known or can be broadcast, the events are never shuffled.
        one_each = unique and (known or lake_rows_before <= BROADCAST_KEYS)
        changed = compact.last_changes(events, base, versions, final, table_input, one_each=one_each, lake_known=known)
    changed = changed.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        step("compacting")
        with timed(phases, "compact"):  # the first action on `changed`: read, compaction, cached
            counts = counts_of(changed)
        broadcast = counts["in_lake"] <= BROADCAST_KEYS
        rest = None if base is None else (
            multiset.untouched(base, changed, final) if keyless else compact.untouched(base, changed, final, broadcast))
        # The rows no event touched are the lake's rows minus the touched ones (their copies, for a keyless table).
        untouched = lake_rows_before - counts["in_lake"]
        truncated = table_input.truncate_position is not None
        if truncated and rest is not None and keyless:  # one DELETE per distinct row: apply removes every copy
            gone = multiset.truncated_rows(rest, final, table_input)
            changed_rows, untouched = changed.unionByName(gone), gone.count()
            lake_rows, deletes, rest = counts["kept"], counts["deletes"] + untouched, None
        elif truncated and rest is not None and table_input.is_partial_cut:
            # A re-snapshot's end: only the untouched rows older than its cut are gone (a DELETE in the batch).
            gone = rest.filter(F.col("_cdc_position") < F.lit(table_input.truncate_position))
            rest = rest.filter(F.col("_cdc_position") >= F.lit(table_input.truncate_position))
            removed = gone.count()
            changed_rows = changed.drop("_in_lake").unionByName(compact.truncated_rows(gone, final, table_input))
            lake_rows, deletes = counts["kept"] + untouched - removed, counts["deletes"] + removed
        elif truncated and rest is not None:  # every untouched row is gone: a DELETE in the batch
            changed_rows = changed.drop("_in_lake").unionByName(compact.truncated_rows(rest, final, table_input))
            lake_rows, deletes, rest = counts["kept"], counts["deletes"] + untouched, None
        else:
            changed_rows, lake_rows, deletes = changed, counts["kept"] + untouched, counts["deletes"]
        version = lake.version_name(run)
        name, folder = f"{info.db}.{info.table}", batches.table_folder(info.db, info.table)
        manifest_entry, inserts = None, counts["inserts"]
        # A schema change alone (an ALTER and no row change of the table) still makes a batch entry, empty:
        # snowflake-apply evolves the table at it (new columns with their fills, dropped ones gone).
        with_batch = bool(inserts + deletes) or (base_name is not None and base_position != final.position)

        def write_batch() -> None:
            with timed(phases, "batch"):
                rows = multiset.batch_rows(changed_rows) if keyless else changed_rows
                batches.batch_frame(rows, final).write.mode("overwrite").parquet(str(staging / folder))

        step("lake")
        # The batch's files are written beside the lake version, two Spark jobs at once over the same cache: while
        # one plans or commits on the driver, the other's tasks run. Measured (1M changes, warm): 7.0-8.5 s ->
        # 6.9-7.7 s, lower in 3 of 3 pairs (docs/performance.md, "spark-merge").
        with ThreadPoolExecutor(1, thread_name_prefix="cdc-batch") as pool:
            batch_written = pool.submit(write_batch) if with_batch else None
            with timed(phases, "lake"):
                kept = multiset.copies(changed) if keyless else changed
                # The touched keys are collected to the driver as for Spark's broadcast: within the same bound.
                copied = not keyless and not truncated and broadcast and rest is not None and base_path is not None \
                    and base_position == final.position and _lake_copy(changed, base_path, directory / version, final,
                                                                       untouched)
                if not copied:
                    batches.lake_frame(kept, rest, final).write.mode("overwrite").parquet(str(directory / version))
            if batch_written is not None:
                batch_written.result()
        if with_batch:
            manifest_entry = {
                "files": batches.publish_files(staging / folder, batch_dir / folder),
                "rows": inserts + deletes, "inserts": inserts, "deletes": deletes,
                "schema_position": final.position, "columns": final.column_names,
            }
            if truncated and not table_input.is_partial_cut:  # apply need not convert rows it deletes (#30)
                manifest_entry["emptied_at"] = table_input.truncate_position
    finally:
        changed.unpersist()
    pointer = {"current": version, "previous": base_name, "batch_id": batches.batch_id(run),
               "schema_position": final.position, "previous_schema_position": base_position,
               "primary_key": list(final.primary_key), "columns": [asdict(c) for c in final.columns], "rows": lake_rows}
    result_doc = asdict(TableResult(name, info.rows, lake_rows, inserts + deletes, inserts, deletes, final.position))
    return {"dir": directory.name, "pointer": pointer, "manifest": manifest_entry, "result": result_doc}


def _lake_copy(changed: Any, base: Path, version: Path, final: TableSchema, untouched: int) -> bool:
    """The new lake version as Spark's write of the kept rows and pyarrow's copy of the untouched ones
    (cdc.spark.lake_copy); False, with nothing written, where the copy could differ from Spark's join."""
    from pyspark.sql import functions as F

    from cdc.spark import lake_copy

    first = lake_copy.first_file(base)
    keys = list(final.primary_key)
    if first is None or not lake_copy.key_types_fit(pq.read_schema(first), keys):
        return False
    batches.lake_frame(changed, None, final).write.mode("overwrite").parquet(str(version))
    written = lake_copy.spark_schema_of(version)
    if written is None or not lake_copy.same_columns(written, pq.read_schema(first)):
        shutil.rmtree(version, ignore_errors=True)
        return False
    key_columns = [F.col(f"c{final.column_names.index(k)}").alias(k) for k in keys]
    touched = changed.filter(F.col("_in_lake")).select(*key_columns).toArrow()
    try:
        lake_copy.check_count(lake_copy.copy_untouched(base, version, touched, keys, written), untouched, version)
    except (DataError, pa.ArrowException) as exc:
        # Spark's own join is the reference the copy stands in for: the version is written by it instead.
        log.warning("spark-merge: %s: the untouched lake rows copied by Spark instead of pyarrow (%s)", version, exc)
        shutil.rmtree(version, ignore_errors=True)
        return False
    return True


def counts_of(changed: Any) -> dict[str, int]:
    """Touched keys, kept rows, keys the lake had, the batch's inserts and deletes (one pass over the cache).

    A keyless table's changed rows carry their copies (`_n` after the run, `_lake_n` before): rows are
    counted as copies, and an INSERT is `_n` rows of the batch.
    """
    from pyspark.sql import functions as F

    counted = "_n" in changed.columns
    n = F.col("_n") if counted else F.lit(1)
    lake_n = F.col("_lake_n") if counted else F.when(F.col("_in_lake"), 1)
    row = changed.agg(
        F.count(F.lit(1)).alias("touched"),
        F.sum(F.when(F.col("_keep"), n)).alias("kept"),
        F.sum(lake_n).alias("in_lake"),
        F.sum(F.when(F.col("_action") == "INSERT", n)).alias("inserts"),
        F.count(F.when(F.col("_action") == "DELETE", 1)).alias("deletes")).first()
    return {k: int(v or 0) for k, v in row.asDict().items()}


