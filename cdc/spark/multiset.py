"""Compaction of a table without a key (`snapshot --allow-no-pk`): the table is a multiset of full rows.

Two identical rows are two rows, and a delete or update of one of them leaves the other (issue #24).
No column tells two copies apart, so the unit of change is a distinct full row (all columns, NULLs
equal) and what changes is its number of copies:

    insert / snapshot read of R   +1 copy of R
    delete of R                   -1 copy of R
    update R -> R'                -1 copy of R, +1 copy of R' (even when R' == R: it nets out)

The counts add up in any order, so a run sums its events per distinct row (each line once: a
replayed line has the same position) and adds the sum to the copies the lake holds; a truncate
in the run empties the lake and drops the events before it. A count never goes below zero: a
delete of a row the lake does not hold nets out to nothing, as for a keyed table.

The lake holds every copy as its own row (so `SELECT *` of it is the source's multiset). The
Snowflake batch says, per distinct row the run changed, how many copies the target must hold:
that many INSERT rows, or one DELETE row when none is left; snowflake-apply deletes every copy of
the row and inserts the batch's copies (docs/formats.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc.schema import Column, TableSchema, carried
from cdc.spark.compact import ROW_OPS, TableInput, by_version, scoped_versions
from cdc.spark.evolve import META, fill_literal, typed
from cdc.spark.types import raw_struct


def row_columns(final: TableSchema) -> list[str]:
    """The positional names of every column: together they are the row's identity."""
    return [f"c{i}" for i in range(len(final.columns))]


def same_row(left: str, right: str, final: TableSchema) -> SparkColumn:
    """Null-safe equality of two aliased frames' full rows (two NULLs are the same value)."""
    pairs = [F.col(f"{left}.{c}").eqNullSafe(F.col(f"{right}.{c}")) for c in row_columns(final)]
    return reduce(lambda x, y: x & y, pairs)


def row_events(raw: DataFrame, versions: list[TableSchema], final: TableSchema, info: TableInput) -> DataFrame:
    """The run's events of one keyless table: c0..cn (the full row, typed), _cdc_*, `_sign` (+1 or -1).

    Each line once (a replayed line has the same position); with a truncate in the run, only the
    events after it (the lake's rows and everything before are gone).
    """
    scoped = scoped_versions(versions, final, info, F.col("position"))
    lines = raw.filter((F.col("db") == info.db) & (F.col("table") == info.table) & F.col("op").isin(*ROW_OPS))
    if info.truncate_position is not None:
        lines = lines.filter(F.col("position") > F.lit(info.truncate_position))
    names = sorted({c for v, _ in scoped for c in v.column_names})

    def image(name: str) -> SparkColumn:
        if isinstance(raw.schema[name].dataType, T.StringType):  # LINE_SCHEMA: the image is JSON text
            return F.from_json(name, raw_struct(names))
        return F.struct(*[F.col(name).getField(n).alias(n) for n in names])

    parsed = lines.select("op", "position", F.col("ts").cast(T.TimestampType()).alias("ts"),
                          F.when(F.col("op") != "d", image("after")).alias("a"),
                          F.when(F.col("op").isin("u", "d"), image("before")).alias("b"))

    def event(image_name: str, sign: int) -> SparkColumn:
        values = [by_version(scoped, _field(image_name, c, final, versions)).alias(f"c{i}")
                  for i, c in enumerate(final.columns)]
        return F.struct(*values, F.col("op").alias("_cdc_op"), F.col("position").alias("_cdc_position"),
                        F.col("ts").alias("_cdc_commit_ts"), F.lit(sign).alias("_sign"))

    # The minus half first: an update's two halves share a position, the sign tells them apart.
    both = F.when(F.col("op") == "u", F.array(event("b", -1), event("a", 1))) \
        .when(F.col("op") == "d", F.array(event("b", -1))).otherwise(F.array(event("a", 1)))
    events = parsed.select(F.explode(both).alias("e")).select("e.*")
    return events.dropDuplicates(["_cdc_position", "_sign"])


def _field(image: str, column: Column, final: TableSchema,
           versions: list[TableSchema]) -> Callable[[TableSchema], SparkColumn]:
    """value(version) of one final column from an image, typed to the final schema.

    A column added after the image's version holds what MySQL gave the existing rows (cdc.schema.carried:
    its DEFAULT, the type's implicit value or NULL), as the lake's older copies do (evolve.read_base); a
    renamed one is read under its old name. Else a later delete of such a copy would not find it.
    """
    def value(version: TableSchema) -> SparkColumn:
        source = carried(versions, column.name, version.position, final.position)
        if source.source is None:
            return fill_literal(column, source.fill)
        return typed(F.col(image).getField(source.source), version.column(source.source), column)
    return value


def count_changes(events: DataFrame, base: DataFrame | None, final: TableSchema, info: TableInput) -> DataFrame:
    """Each distinct row the run touched, with its copies before (`_lake_n`) and after (`_n`).

    Result columns: c0..cn, _cdc_* (the last event that added a copy, else the lake's newest copy,
    else the last event), `_n`, `_lake_n`, `_keep` (_n > 0), `_action` (INSERT: the target holds
    _n copies; DELETE: none; null: no net change), `_isupdate` (always false) and `_in_lake`.
    """
    cols = row_columns(final)
    meta = F.struct(*[F.col(m) for m in META])
    added = F.when(F.col("_sign") > 0, F.col("_cdc_position"))
    touched = events.groupBy(*cols).agg(F.sum("_sign").alias("_delta"),
                                        F.max_by(meta, "_cdc_position").alias("_last"),
                                        F.max_by(meta, added).alias("_last_in"))
    truncated = info.truncate_position is not None
    if base is None:
        joined = touched.select(*cols, "_delta", "_last", "_last_in", F.lit(0).cast(T.LongType()).alias("_lake_n"),
                                F.lit(None).cast(touched.schema["_last"].dataType).alias("_lake_meta"))
    else:
        held = base.join(touched.select(*cols).alias("t"), [base[c].eqNullSafe(F.col(f"t.{c}")) for c in cols],
                         "left_semi").groupBy(*cols).agg(F.count(F.lit(1)).alias("_lake_n"),
                                                         F.max_by(meta, "_cdc_position").alias("_lake_meta"))
        joined = touched.alias("e").join(held.alias("l"), same_row("e", "l", final), "left").select(
            *[F.col(f"e.{c}").alias(c) for c in cols], "_delta", "_last", "_last_in",
            F.coalesce("_lake_n", F.lit(0)).alias("_lake_n"), "_lake_meta")
    # After a truncate the lake's copies are gone: the run's events (those after it) are all there is.
    kept_before = F.lit(0) if truncated else F.col("_lake_n")
    n = F.greatest(kept_before + F.col("_delta"), F.lit(0)).cast(T.LongType())
    chosen = F.coalesce("_last_in", "_lake_meta", "_last")
    in_lake = F.col("_lake_n") > 0
    action = F.when(F.col("_n") == F.col("_lake_n"), F.lit(None).cast(T.StringType())) \
        .when(F.col("_n") > 0, F.lit("INSERT")).otherwise(F.lit("DELETE"))
    counted = joined.select(*cols, *[chosen.getField(m).alias(m) for m in META], n.alias("_n"), "_lake_n")
    return counted.select(*cols, *META, "_n", "_lake_n", (F.col("_n") > 0).alias("_keep"), action.alias("_action"),
                          F.lit(False).alias("_isupdate"), in_lake.alias("_in_lake"))


def untouched(base: DataFrame, changed: DataFrame, final: TableSchema) -> DataFrame:
    """The lake rows whose full row the run did not touch (c0..cn, _cdc_*): a null-safe anti join."""
    cols = row_columns(final)
    keys = changed.select(*cols).alias("t")
    return base.join(keys, [base[c].eqNullSafe(F.col(f"t.{c}")) for c in cols], "left_anti")


def copies(changed: DataFrame) -> DataFrame:
    """Each counted row repeated `_n` times (zero times for a row with none left)."""
    repeat = F.explode(F.array_repeat(F.lit(True), F.col("_n").cast(T.IntegerType())))
    return changed.filter(F.col("_n") > 0).select("*", repeat.alias("_copy")).drop("_copy")


def batch_rows(changed: DataFrame) -> DataFrame:
    """The batch's rows: `_n` INSERT rows per row still held, one DELETE row per row with no copy left."""
    inserts = copies(changed.filter(F.col("_action") == "INSERT"))
    deletes = changed.filter(F.col("_action") == "DELETE")
    return inserts.unionByName(deletes)


def truncated_rows(rows: DataFrame, final: TableSchema, info: TableInput) -> DataFrame:
    """Distinct untouched lake rows of a truncated table, as the batch's DELETEs (with the truncate's coordinates)."""
    cols = row_columns(final)
    cut = {"_cdc_op": F.lit("d"), "_cdc_position": F.lit(info.truncate_position),
           "_cdc_commit_ts": F.lit(info.truncate_ts).cast(T.TimestampType())}
    return rows.select(*cols).distinct().select(*cols, *[cut[m].alias(m) for m in META],
                                                F.lit(0).cast(T.LongType()).alias("_n"),
                                                F.lit(1).cast(T.LongType()).alias("_lake_n"),
                                                F.lit(False).alias("_keep"), F.lit("DELETE").alias("_action"),
                                                F.lit(False).alias("_isupdate"), F.lit(True).alias("_in_lake"))
