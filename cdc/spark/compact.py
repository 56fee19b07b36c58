"""Compaction: one table's change lines -> exactly one row per primary key, merged onto the lake.

Inside Spark, table columns are renamed to positional names (c0, c1, ...): MySQL names may hold
dots, spaces or backticks, which Spark would read as struct paths. They get their names back
when written.

Order is the position string (docs/formats.md): unique per row change, lexical = source order,
snapshot `r` rows sort before the binlog changes after the hand-over. One shuffle: events are
grouped by key and max_by(position) picks the last; duplicated lines (same position) collapse.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc.errors import DataError
from cdc.schema import Column, TableSchema
from cdc.spark.types import col, parse_value, raw_struct, spark_type

ROW_OPS = ("c", "u", "d", "r")
META = ("_cdc_op", "_cdc_position", "_cdc_commit_ts")


@dataclass(frozen=True)
class TableInput:
    """What the run's lines say about one table (from one aggregate over the input)."""

    db: str
    table: str
    rows: int
    min_position: str
    max_position: str
    truncate_position: str | None  # last truncate/drop in the run: everything before it is gone
    truncate_ts: str | None


def _typed(image: str, column: Column, final: Column) -> SparkColumn:
    value = parse_value(column, F.col(image).getField(column.name))
    return value if spark_type(column) == spark_type(final) else value.cast(spark_type(final))


def _version_events(lines: DataFrame, version: TableSchema, final: TableSchema) -> DataFrame:
    """Events of lines decoded with `version`: upserts (c/u/r) and deletes (d, old key of a key-changing u)."""
    if tuple(version.primary_key) != tuple(final.primary_key):
        raise DataError(
            f"{final.db}.{final.table}: primary key changed from {list(version.primary_key)} at {version.position} "
            f"to {list(final.primary_key)} at {final.position}; merging across a key change is not supported",
            hint="merge up to the ALTER, then re-snapshot the table",
        )
    names = version.column_names
    pk = set(final.primary_key)
    parsed = lines.select(
        "op", "position", "ts",
        F.from_json("after", raw_struct(names)).alias("a"),
        F.from_json("before", raw_struct(list(final.primary_key))).alias("b"),
        F.from_json("key", raw_struct(list(final.primary_key))).alias("k"),
    )
    old = {c.name: c for c in version.columns}

    def image(name: str, only_key: bool) -> list[SparkColumn]:
        out = []
        for i, c in enumerate(final.columns):
            usable = c.name in old and (c.name in pk or not only_key)
            value = _typed(name, old[c.name], c) if usable else F.lit(None).cast(spark_type(c))
            out.append(value.alias(f"c{i}"))
        return out

    ts = F.col("ts").cast(T.TimestampType()).alias("_cdc_commit_ts")
    upserts = parsed.filter(F.col("op").isin("c", "u", "r")).select(
        *image("a", False), F.lit(False).alias("_del"), F.col("op").alias("_cdc_op"), F.col("position").alias("_cdc_position"), ts)
    deletes = parsed.filter(F.col("op") == "d").select(
        *image("k", True), F.lit(True).alias("_del"), F.col("op").alias("_cdc_op"), F.col("position").alias("_cdc_position"), ts)
    same_key = reduce(lambda x, y: x & y, [
        _typed("b", old[k], final.column(k)).eqNullSafe(_typed("a", old[k], final.column(k))) for k in final.primary_key])
    moved = parsed.filter((F.col("op") == "u") & ~same_key).select(
        *image("b", True), F.lit(True).alias("_del"), F.col("op").alias("_cdc_op"), F.col("position").alias("_cdc_position"), ts)
    return upserts.unionByName(deletes).unionByName(moved)


def table_events(raw: DataFrame, versions: list[TableSchema], final: TableSchema, info: TableInput) -> DataFrame:
    """All events of one table in this run, each line decoded with the schema in force at its position."""
    if not versions or info.min_position < versions[0].position:
        raise DataError(
            f"{info.db}.{info.table}: change at {info.min_position} has no schema history entry "
            f"(first version: {versions[0].position if versions else 'none'})",
            hint="the schema history (<state>/schema/) must be written by snapshot/tail before their changes",
        )
    lines = raw.filter((F.col("db") == info.db) & (F.col("table") == info.table) & F.col("op").isin(*ROW_OPS))
    parts = []
    for index, version in enumerate(versions):
        end = versions[index + 1].position if index + 1 < len(versions) else None
        if version.position > info.max_position or (end is not None and end <= info.min_position):
            continue
        scope = F.col("position") >= version.position
        if end is not None:
            scope = scope & (F.col("position") < end)
        parts.append(_version_events(lines.filter(scope), version, final))
    return reduce(DataFrame.unionByName, parts)


def compact(events: DataFrame, final: TableSchema, info: TableInput) -> DataFrame:
    """The last event per key (max_by position), with a truncate turning older ones into deletes."""
    keys = [f"c{final.column_names.index(k)}" for k in final.primary_key]
    values = [f"c{i}" for i in range(len(final.columns)) if f"c{i}" not in keys] + ["_del", *META]
    last = F.max_by(F.struct(*[F.col(v) for v in values]), F.col("_cdc_position")).alias("_last")
    out = events.groupBy(*keys).agg(last).select(*keys, *[F.col("_last").getField(v).alias(v) for v in values])
    if info.truncate_position is None:
        return out
    cut = F.col("_cdc_position") < F.lit(info.truncate_position)
    return (out.withColumn("_del", F.col("_del") | cut)
            .withColumn("_cdc_op", F.when(cut, F.lit("d")).otherwise(F.col("_cdc_op")))
            .withColumn("_cdc_commit_ts", F.when(cut, F.lit(info.truncate_ts).cast(T.TimestampType()))
                        .otherwise(F.col("_cdc_commit_ts")))
            .withColumn("_cdc_position", F.when(cut, F.lit(info.truncate_position)).otherwise(F.col("_cdc_position"))))


def read_base(spark: SparkSession, path: str, final: TableSchema) -> DataFrame:
    """The previous lake version, evolved to the final schema (added columns null, dropped ones gone)."""
    old = spark.read.parquet(path)
    present = set(old.columns)
    pk = set(final.primary_key)
    cols = []
    for i, c in enumerate(final.columns):
        value = col(c.name).cast(spark_type(c)) if c.name in present else F.lit(None).cast(spark_type(c))
        cols.append(value.alias(f"c{i}" if c.name in pk else f"o{i}"))
    return old.select(*cols, *[F.col(m).alias(f"o{m}") for m in META], F.lit(True).alias("_in_lake"))


def merge_onto(compacted: DataFrame, base: DataFrame | None, final: TableSchema, info: TableInput) -> DataFrame:
    """One full outer join of the compacted events with the lake: what to keep and what to emit.

    Result columns: c0..cn, _cdc_*, `_keep` (row of the new lake version), `_action` (INSERT/DELETE
    for the Snowflake batch, null if the key has no net change) and `_isupdate` (INSERT of a key
    the lake already had). A delete of a key the lake never had nets out to nothing.
    """
    n_cols = len(final.columns)
    keys = [f"c{final.column_names.index(k)}" for k in final.primary_key]
    truncated = F.lit(info.truncate_position is not None)
    has = F.coalesce(F.col("_has"), F.lit(False))
    events = compacted.withColumn("_has", F.lit(True))
    if base is None:
        joined, in_lake = events, F.lit(False)
        old = {f"c{i}": F.lit(None) for i in range(n_cols)} | {f"o{m}": F.lit(None) for m in META}
    else:
        joined = events.join(base, on=keys, how="full_outer")
        in_lake = F.coalesce(F.col("_in_lake"), F.lit(False))
        old = {f"c{i}": F.col(f"o{i}") for i in range(n_cols) if f"c{i}" not in keys} | {f"o{m}": F.col(f"o{m}") for m in META}
    upsert = has & ~F.col("_del")
    values = [F.col(k) if k in keys else F.when(has, F.col(k)).otherwise(old[k]).alias(k)
              for k in (f"c{i}" for i in range(n_cols))]
    cut_meta = {"_cdc_op": F.lit("d"), "_cdc_position": F.lit(info.truncate_position),
                "_cdc_commit_ts": F.lit(info.truncate_ts).cast(T.TimestampType())}
    meta = [F.when(has, F.col(m)).when(truncated, cut_meta[m]).otherwise(old[f"o{m}"]).alias(m) for m in META]
    action = (F.when(upsert, F.lit("INSERT"))
              .when(has & in_lake, F.lit("DELETE"))
              .when(~has & truncated & in_lake, F.lit("DELETE")))
    keep = upsert | (~has & ~truncated & in_lake)
    return joined.select(*values, *meta, keep.alias("_keep"), action.alias("_action"),
                         (upsert & in_lake).alias("_isupdate"))


def events_schema(final: TableSchema) -> T.StructType:
    """Schema of table_events' output, for a run in which a table has only DDL lines."""
    fields = [T.StructField(f"c{i}", spark_type(c)) for i, c in enumerate(final.columns)]
    return T.StructType([*fields, T.StructField("_del", T.BooleanType()), T.StructField("_cdc_op", T.StringType()),
                         T.StructField("_cdc_position", T.StringType()), T.StructField("_cdc_commit_ts", T.TimestampType())])
