"""Compaction: one table's change lines + the previous lake version -> the new version, in one shuffle.

Inside Spark, table columns are renamed to positional names (c0, c1, ...): MySQL names may hold
dots, spaces or backticks, which Spark would read as struct paths. They get their names back
when written.

Order is the position string (docs/formats.md): unique per row change, lexical = source order,
snapshot `r` rows sort before the binlog changes after the hand-over. Where the time goes decides
the shape (README, "### spark-merge"): only the key fields of a line are decoded before the
shuffle; the lake's rows join the run's events as candidates that lose to any change (`_src` 0),
so one groupBy by key with max_by((_src, position)) picks each key's last state and duplicated
lines (same position) collapse; only the survivors' `after` images are then parsed and typed.
"""

from __future__ import annotations

from collections.abc import Callable
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


def _typed(raw: SparkColumn, column: Column, final: Column) -> SparkColumn:
    value = parse_value(column, raw)
    return value if spark_type(column) == spark_type(final) else value.cast(spark_type(final))


def _keys(final: TableSchema) -> list[str]:
    return [f"c{final.column_names.index(k)}" for k in final.primary_key]


def _values(final: TableSchema) -> list[str]:
    keys = set(_keys(final))
    return [f"c{i}" for i in range(len(final.columns)) if f"c{i}" not in keys]


def _lake_struct(final: TableSchema) -> T.StructType:
    """The non-key columns of a lake row, carried through the shuffle as one struct."""
    pk = set(final.primary_key)
    return T.StructType([T.StructField(f"c{i}", spark_type(c)) for i, c in enumerate(final.columns) if c.name not in pk])


def _scoped(versions: list[TableSchema], final: TableSchema, info: TableInput,
            position: SparkColumn) -> list[tuple[TableSchema, SparkColumn | None]]:
    """The schema versions in force during the run, each with its range of `position`s."""
    if not info.rows:
        return [(final, None)]
    if not versions or info.min_position < versions[0].position:
        raise DataError(
            f"{info.db}.{info.table}: change at {info.min_position} has no schema history entry "
            f"(first version: {versions[0].position if versions else 'none'})",
            hint="the schema history (<state>/schema/) must be written by snapshot/tail before their changes",
        )
    scoped = []
    for index, version in enumerate(versions):
        end = versions[index + 1].position if index + 1 < len(versions) else None
        if version.position > info.max_position or (end is not None and end <= info.min_position):
            continue
        scope = position >= version.position
        scoped.append((version, scope if end is None else scope & (position < end)))
    return scoped


def _by_version(scoped: list[tuple[TableSchema, SparkColumn | None]],
                value: Callable[[TableSchema], SparkColumn]) -> SparkColumn:
    """value(version) of the version whose range holds the line's position (no CASE for a single version)."""
    if len(scoped) == 1:
        return value(scoped[0][0])
    chain = F.when(scoped[0][1], value(scoped[0][0]))  # type: ignore[arg-type]
    for version, scope in scoped[1:]:
        chain = chain.when(scope, value(version))  # type: ignore[arg-type]
    return chain


def _check_key(scoped: list[tuple[TableSchema, SparkColumn | None]], final: TableSchema) -> None:
    for version, _ in scoped:
        if tuple(version.primary_key) != tuple(final.primary_key):
            raise DataError(
                f"{final.db}.{final.table}: primary key changed from {list(version.primary_key)} at "
                f"{version.position} to {list(final.primary_key)} at {final.position}; merging across a key "
                "change is not supported",
                hint="merge up to the ALTER, then re-snapshot the table",
            )


def table_events(raw: DataFrame, versions: list[TableSchema], final: TableSchema, info: TableInput) -> DataFrame:
    """The run's events of one table, keyed by typed key columns, images still raw JSON text.

    A line is one event (its `key`); a key-changing update is two: a delete of the `before` key too.
    """
    scoped = _scoped(versions, final, info, F.col("position"))
    _check_key(scoped, final)
    pk = list(final.primary_key)
    lines = raw.filter((F.col("db") == info.db) & (F.col("table") == info.table) & F.col("op").isin(*ROW_OPS))
    parsed = lines.select(
        "op", "position", "ts", "after", F.from_json("key", raw_struct(pk)).alias("k"),
        F.when(F.col("op") == "u", F.from_json("before", raw_struct(pk))).alias("b"))

    def key(image: str) -> list[SparkColumn]:
        return [_by_version(scoped, lambda v, k=k: _typed(F.col(image).getField(k), v.column(k), final.column(k)))
                for k in pk]

    new, old = key("k"), key("b")
    moved = (F.col("op") == "u") & ~reduce(lambda x, y: x & y, [n.eqNullSafe(o) for n, o in zip(new, old)])
    ts = F.col("ts").cast(T.TimestampType())
    lake = F.lit(None).cast(_lake_struct(final))

    def event(keys: list[SparkColumn], delete: SparkColumn, after: SparkColumn) -> SparkColumn:
        return F.struct(*[k.alias(name) for k, name in zip(keys, _keys(final))], F.lit(1).alias("_src"),
                        F.col("position").alias("_cdc_position"), F.col("op").alias("_cdc_op"),
                        ts.alias("_cdc_commit_ts"), delete.alias("_del"), after.alias("_after"), lake.alias("_lake"))

    last = event(new, F.col("op") == "d", F.when(F.col("op") != "d", F.col("after")))
    gone = event(old, F.lit(True), F.lit(None).cast(T.StringType()))
    both = F.when(moved, F.array(gone, last)).otherwise(F.array(last))
    return parsed.select(F.explode(both).alias("e")).select("e.*")


def read_base(spark: SparkSession, path: str, final: TableSchema) -> DataFrame:
    """The previous lake version, evolved to the final schema (added columns null, dropped ones gone)."""
    old = spark.read.parquet(path)
    present = set(old.columns)
    pk = set(final.primary_key)
    keys, values = [], []
    for i, c in enumerate(final.columns):
        value = col(c.name).cast(spark_type(c)) if c.name in present else F.lit(None).cast(spark_type(c))
        (keys if c.name in pk else values).append(value.alias(f"c{i}"))
    struct = F.struct(*values) if values else F.lit(None).cast(_lake_struct(final))
    return old.select(*keys, F.lit(0).alias("_src"), *[F.col(m) for m in (META[1], META[0], META[2])],
                      F.lit(False).alias("_del"), F.lit(None).cast(T.StringType()).alias("_after"),
                      struct.alias("_lake"))


def merge_onto(events: DataFrame, base: DataFrame | None, versions: list[TableSchema], final: TableSchema,
               info: TableInput) -> DataFrame:
    """Events and lake rows grouped by key (one shuffle): what to keep and what to emit.

    Result columns: c0..cn, _cdc_*, `_keep` (row of the new lake version), `_action` (INSERT/DELETE
    for the Snowflake batch, null if the key has no net change) and `_isupdate` (INSERT of a key
    the lake already had). A delete of a key the lake never had nets out to nothing; a truncate
    turns every older state (lake row or event) into a delete.
    """
    keys = _keys(final)
    rows = events if base is None else events.unionByName(base)
    payload = F.struct(*[F.col(c) for c in ("_src", "_cdc_position", "_cdc_op", "_cdc_commit_ts", "_del", "_after",
                                            "_lake")])
    won = rows.groupBy(*keys).agg(F.max_by(payload, F.struct("_src", "_cdc_position")).alias("w"),
                                  F.min("_src").alias("_oldest"))
    w = F.col("w")
    scoped = _scoped(versions, final, info, w["_cdc_position"])
    # Each image parsed once, in its own projection: in the one below, Spark would prune a from_json
    # per column read from it and parse the same text once per column.
    won = won.select(*keys, "w", "_oldest", *[F.from_json(w["_after"], raw_struct(v.column_names)).alias(f"_a{n}")
                                              for n, (v, _) in enumerate(scoped)])
    from_lake, in_lake = w["_src"] == 0, F.col("_oldest") == 0
    truncated = info.truncate_position is not None
    cut = (from_lake | (w["_cdc_position"] < F.lit(info.truncate_position))) if truncated else F.lit(False)
    deleted = w["_del"] | cut
    upsert = ~deleted & ~from_lake
    values = _decoded(scoped, final)
    cut_meta = {"_cdc_op": F.lit("d"), "_cdc_position": F.lit(info.truncate_position),
                "_cdc_commit_ts": F.lit(info.truncate_ts).cast(T.TimestampType())}
    meta = [F.when(cut, cut_meta[m]).otherwise(w[m]).alias(m) for m in META]
    action = F.when(upsert, F.lit("INSERT")).when(deleted & in_lake, F.lit("DELETE"))
    ordered = [F.col(c) if c in keys else values[c] for c in (f"c{i}" for i in range(len(final.columns)))]
    return won.select(*ordered, *meta, (~deleted).alias("_keep"), action.alias("_action"),
                      (upsert & in_lake).alias("_isupdate"))


def _decoded(scoped: list[tuple[TableSchema, SparkColumn | None]], final: TableSchema) -> dict[str, SparkColumn]:
    """Non-key columns of the winner: the lake's typed values, or its parsed `after` image (_a<n>) typed."""
    w = F.col("w")
    images = {v.position: F.col(f"_a{n}") for n, (v, _) in enumerate(scoped)}
    out = {}
    for i, c in enumerate(final.columns):
        if c.name in final.primary_key:
            continue

        def value(version: TableSchema, c: Column = c) -> SparkColumn:
            if c.name not in version.column_names:
                return F.lit(None).cast(spark_type(c))
            return _typed(images[version.position].getField(c.name), version.column(c.name), c)

        out[f"c{i}"] = F.when(w["_src"] == 0, w["_lake"][f"c{i}"]).otherwise(_by_version(scoped, value)).alias(f"c{i}")
    return out
