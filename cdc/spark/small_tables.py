"""A run's small tables merged together: one Spark query for all of them, their files written with pyarrow.

A `cdc run --follow` cycle touches a few keys in many tables. Merged table by table (cdc.spark.table_merge),
each touched table costs several Spark jobs (its compaction with its counts, the lake version, the batch),
and each job a fixed latency of planning, task launch and a Parquet commit: the cycle's time grew with the
tables it touched, not with its changes (docs/performance.md, "Freshness"). Here the small tables' events
are typed in Spark with the same expressions (compact.table_events, compact.outcomes: the exact rules live
in one place), every table's columns side by side in one union collected once as Arrow: one Spark job, no
shuffle. The rest is done on the driver over a few rows: each key's last change, whether the lake had it,
the counts, the new lake version (the base version's rows no change touched, read with pyarrow, plus the
kept rows) and the batch rows, written without a Spark job.

A table goes this way only where that is the same merge: a primary key (a keyless table's copies are
cdc.spark.multiset's), no truncate in the run, a lake version written under the run's final schema (no
schema version to walk: cdc.spark.evolve.read_base's evolution stays in Spark) and small enough to be read
on the driver; the run has no key-change cut and no rename. A cascade's derived lines are lines of the run like the
others (cdc.spark.cascade_reads), so its tables go this way too. Everything else takes table_merge.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdc.schema import SchemaHistory, TableSchema
from cdc.spark import batches, lake, recipes
from cdc.spark.report import TableResult, timed
from cdc.spark.scan import TableStats
from cdc.state import fsync_dir

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# A table's lake version is read into the driver's memory whole: up to this many rows (a few MiB to tens of MiB).
SMALL_LAKE_ROWS = 200_000
# The run's change lines of the tables merged here, together: they are collected to the driver.
SMALL_CHANGES = 50_000
META = ["_cdc_op", "_cdc_position", "_cdc_commit_ts"]


@dataclass(frozen=True)
class SmallTable:
    """One table merged here, with what its merge reads."""

    info: TableStats
    final: TableSchema
    versions: list[TableSchema]
    directory: Path  # its lake table
    base_name: str | None  # the lake version the run merges onto (None: the table's first)
    base_rows: int


def pick(history: SchemaHistory, infos: list[TableStats], target: Path, run: int) -> list[SmallTable]:
    """The tables of `infos` this module merges (see the module's docstring), up to SMALL_CHANGES lines in all."""
    picked: list[SmallTable] = []
    lines = 0
    for info in infos:
        final = history.at(info.db, info.table, info.last_position)
        if final is None or not final.primary_key or info.truncate_position is not None \
                or any(final.column(k).data_type in ("float", "double") for k in final.primary_key):
            continue  # (float keys: Spark's equality of -0.0 and NaN is not Python's)
        directory = lake.table_dir(target, info.db, info.table)
        base_name = lake.base_version(directory, run)
        base_rows = lake.version_rows(directory / base_name) if base_name else 0
        if base_name is not None and lake.base_schema_position(directory, run) != final.position:
            continue  # columns to walk through schema versions: read_base's evolution, in Spark
        if base_rows > SMALL_LAKE_ROWS or lines + info.rows > SMALL_CHANGES:
            continue
        lines += info.rows
        picked.append(SmallTable(info, final, history.versions(info.db, info.table), directory, base_name, base_rows))
    return picked


def merge_small(spark: SparkSession, raw: DataFrame, tables: list[SmallTable], *, run: int, batch_dir: Path,
                staging: Path, phases: dict[str, float], step: Callable[[str, str], None],
                alone: bool = True) -> list[dict[str, Any]]:
    """Every table's journal entry (as table_merge.merge_table's), in `tables` order; step(table, name) as it goes.

    alone: no other table of the run has lines. Then the query runs interpreted (`interpreted`); else it is the
    first read of lines the other tables' merges read again, cached by it, and keeps Spark's generated code."""
    for table in tables:
        step(_name(table), "compacting")
    with timed(phases, "compact"):
        changed = collect_changes(spark, raw, tables, interpret=alone)
    with timed(phases, "write"):
        return [_write(table, rows, run=run, batch_dir=batch_dir, staging=staging, step=step)
                for table, rows in zip(tables, changed, strict=True)]


def collect_changes(spark: SparkSession, raw: DataFrame, tables: list[SmallTable], *,
                    interpret: bool = True) -> list[pa.Table]:
    """Each table's events, typed, with their outcome as if the lake lacked their key (compact.outcomes' columns):
    one Spark job over all the tables, no shuffle (the last change per key is picked on the driver, _winners)."""

    from cdc.spark import compact

    frames, names = [], []
    after_text = compact.after_is_text(raw)
    for index, table in enumerate(tables):
        info = table.info.as_input()
        events = compact.table_events(raw, table.versions, table.final, info)
        typed = compact.outcomes(events, table.versions, table.final, info, in_lake=False, after_text=after_text)
        columns = _outcome_names(table)
        # Each table's row as one struct column of its own (t<index>), so that tables of any shapes share one union
        # (NULL in the other tables' rows): the union is 1 + tables columns wide, not the sum of the tables' columns,
        # which Spark's optimizer and code generation paid for per branch (issue #25).
        frames.append(recipes.select(typed, ("union names", index, tuple(columns)), partial(_tagged, index, columns)))
        names.append(columns)
    union = _union(frames)
    with interpreted(spark) if interpret else nullcontext():
        collected = union.toArrow()
    tags = collected.column("_t")
    out = []
    for index, columns in enumerate(names):
        struct = collected.column(f"t{index}").combine_chunks()
        fields = [struct.field(i) for i in range(struct.type.num_fields)]  # (a field ignores the struct's NULLs)
        out.append(pa.Table.from_arrays(fields, names=columns).filter(pc.equal(tags, index)))
    return out


# A few thousand rows through 16 or so table branches: generating and compiling Java for each branch's operators
# and expressions costs more than evaluating them. Interpreted, the one query of a follow cycle took 1.48-1.60 s
# warm against 1.89-1.90 s, 8.0-8.9 s in a fresh process against 10.0-10.4 s (bench_small_merge.py, 200 changes
# over 16 tables). `factoryMode` is one of Spark's internal settings (its tests run every expression both ways);
# tests/spark/test_small_tables.py holds this path's lake and batches equal to the table-by-table merge's, which
# keeps Spark's code generation. Only where the query is the run's one read of the lines (merge_small's `alone`):
# beside bigger tables it fills the cache of every line they read too, and each branch filters all of them.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def _union(frames: list[DataFrame]) -> DataFrame:
    """The frames' union by name (a column missing from one is NULL in its rows), as a balanced tree of unions: each
    unionByName projects both sides onto the union's columns and is analysed whole, so a chain of 16 analysed its
    growing left side 15 times."""
    while len(frames) > 1:
        pairs = [a.unionByName(b, allowMissingColumns=True) for a, b in zip(frames[::2], frames[1::2], strict=False)]
        frames = pairs + frames[len(pairs) * 2:]
    return frames[0]


@contextmanager
def interpreted(spark: SparkSession) -> Iterator[None]:
    """The session's queries run without generated code until the block ends (its settings restored then)."""
    before = {key: spark.conf.get(key, None) for key in INTERPRETED}
    for key, value in INTERPRETED.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, was in before.items():
            if was is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, was)


def _tagged(index: int, columns: list[str]) -> list[Any]:
    from pyspark.sql import functions as F

    # Every field nullable (CASE WHEN x IS NOT NULL THEN x is x): a non-null field (`_in_lake`, a literal) in a
    # struct that is NULL in other tables' rows reaches Arrow as a non-nullable child holding NULLs, which
    # pyarrow refuses in toArrow ("nulls in input cannot be viewed as non-nullable").
    fields = [F.when(F.col(c).isNotNull(), F.col(c)).alias(c) for c in columns]
    return [F.lit(index).alias("_t"), F.struct(*fields).alias(f"t{index}")]


def _outcome_names(table: SmallTable) -> list[str]:
    """compact.outcomes' columns for the table (known without asking Spark for the frame's schema)."""
    return [*(f"c{i}" for i in range(len(table.final.columns))), *META, "_keep", "_action", "_isupdate", "_in_lake"]


def _winners(table: SmallTable, events: pa.Table, base: pa.Table | None) -> pa.Table:
    """compact.last_changes on the driver: each key's last event (the highest position), whether the lake had its key.

    Keys compare as Python values, as Spark's window and joins compare the typed key columns (no key is NULL, and
    no float key takes this way). The outcome's rules are last_changes' (compact.outcomes), with `_in_lake` known.
    """
    key_columns = [f"c{table.final.column_names.index(k)}" for k in table.final.primary_key]
    last: dict[tuple[Any, ...], tuple[str, int]] = {}
    positions = events.column("_cdc_position").to_pylist()
    for row, key in enumerate(zip(*[events.column(c).to_pylist() for c in key_columns], strict=True)):
        if key not in last or positions[row] > last[key][0]:  # the same position twice: the same line, replayed
            last[key] = (positions[row], row)
    won = events.take(pa.array(sorted(row for _, row in last.values()), type=pa.int64()))
    lake_keys = set() if base is None else set(_keys(base, table.final.primary_key))
    in_lake = pa.array([key in lake_keys for key in _keys(won, key_columns)], type=pa.bool_())
    keep = won.column("_keep")
    action = pc.if_else(keep, "INSERT", pc.if_else(in_lake, "DELETE", pa.scalar(None, pa.string())))
    won = won.set_column(won.schema.get_field_index("_action"), "_action", action)
    won = won.set_column(won.schema.get_field_index("_isupdate"), "_isupdate", pc.and_(keep, in_lake))
    return won.set_column(won.schema.get_field_index("_in_lake"), "_in_lake", in_lake)


def _keys(rows: pa.Table, columns: Sequence[str]) -> Any:
    return zip(*[rows.column(c).to_pylist() for c in columns], strict=True)


def _name(table: SmallTable) -> str:
    return f"{table.info.db}.{table.info.table}"


def _write(table: SmallTable, changed: pa.Table, *, run: int, batch_dir: Path, staging: Path,
           step: Callable[[str, str], None]) -> dict[str, Any]:
    """table_merge.merge_table's work after the compaction, on the driver: counts, lake version, batch files."""
    final, name = table.final, _name(table)
    columns = [f"c{i}" for i in range(len(final.columns))]
    base = _read_base(table)
    changed = _winners(table, changed, base)
    action = changed.column("_action")
    inserts = _count(pc.equal(action, "INSERT"))
    deletes = _count(pc.equal(action, "DELETE"))
    kept_rows = changed.filter(changed.column("_keep")).select([*columns, *META])
    kept_rows = kept_rows.rename_columns([*final.column_names, *META])
    step(name, "lake")
    version = lake.version_name(run)
    rows = _lake_version(table, changed, kept_rows, base)
    _write_parquet(rows, table.directory / version)
    lake_rows = rows.num_rows
    manifest_entry = None
    if inserts + deletes:  # no schema change to carry: table.final is the base version's schema
        step(name, "batch")
        folder = batches.table_folder(final.db, final.table)
        _write_parquet(_batch_rows(final, changed, columns), staging / folder)
        manifest_entry = {
            "files": batches.publish_files(staging / folder, batch_dir / folder),
            "rows": inserts + deletes, "inserts": inserts, "deletes": deletes,
            "schema_position": final.position, "columns": final.column_names,
        }
    pointer = {"current": version, "previous": table.base_name, "batch_id": batches.batch_id(run),
               "schema_position": final.position,
               "previous_schema_position": final.position if table.base_name else "",
               "primary_key": list(final.primary_key), "columns": [asdict(c) for c in final.columns],
               "rows": lake_rows}
    result = asdict(TableResult(name, table.info.rows, lake_rows, inserts + deletes, inserts, deletes, final.position))
    return {"dir": table.directory.name, "pointer": pointer, "manifest": manifest_entry, "result": result}


def _read_base(table: SmallTable) -> pa.Table | None:
    """The lake version the run merges onto, as lake.py's versions hold it (None: the table's first)."""
    if table.base_name is None:
        return None
    names = [*table.final.column_names, *META]
    files = sorted((table.directory / table.base_name).glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f, columns=names) for f in files])


def _lake_version(table: SmallTable, changed: pa.Table, kept: pa.Table, base: pa.Table | None) -> pa.Table:
    """The base version's rows whose key no change touched, plus the kept rows."""
    if base is None:
        return kept
    key_columns = [f"c{table.final.column_names.index(k)}" for k in table.final.primary_key]
    touched = set(_keys(changed, key_columns))
    rest = base.filter(pa.array([key not in touched for key in _keys(base, table.final.primary_key)],
                                type=pa.bool_()))
    schema = pa.schema([field.with_nullable(True) for field in base.schema])
    return pa.concat_tables([rest.cast(schema), kept.cast(schema)])


def _batch_rows(final: TableSchema, changed: pa.Table, columns: list[str]) -> pa.Table:
    """batches.batch_frame's rows: the net changes, a DELETE carrying only the key, and the stream metadata."""
    rows = changed.filter(pc.is_valid(changed.column("_action")))
    is_delete = pc.equal(rows.column("_action"), "DELETE")
    keys = set(final.primary_key)
    values = [rows.column(c) if n in keys else pc.if_else(is_delete, pa.nulls(rows.num_rows, rows.column(c).type),
                                                          rows.column(c))
              for c, n in zip(columns, final.column_names, strict=True)]
    meta = [rows.column(c) for c in ("_action", "_isupdate", "_cdc_position", "_cdc_commit_ts", "_cdc_op")]
    return pa.Table.from_arrays([*values, *meta], names=[*final.column_names, "METADATA$ACTION", "METADATA$ISUPDATE",
                                                         "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP"])


def _write_parquet(rows: pa.Table, directory: Path) -> None:
    """One part file in a fresh `directory`, made durable (Spark's writes would be read back the same)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    path = directory / "part-00000.parquet"
    pq.write_table(rows, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(directory)


def _count(mask: Any) -> int:
    return int(pc.sum(pc.cast(pc.fill_null(mask, False), pa.int64())).as_py() or 0)
