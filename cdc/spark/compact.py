"""Compaction: one table's change lines + the previous lake version -> the new version.

Inside Spark, table columns are renamed to positional names (c0, c1, ...): MySQL names may hold
dots, spaces or backticks, which Spark would read as struct paths. They get their names back
when written.

Order is the position string (docs/formats.md): unique per row change, lexical = source order,
snapshot `r` rows sort before the binlog changes after the hand-over. Where the time goes decides
the shape (docs/performance.md, "spark-merge"): only the key fields of a line are decoded before the
shuffle; the run's events alone are shuffled by key, a window picking each key's last change by
position (duplicated lines, same position, collapse); only those winners' `after` images are then
parsed and typed. Where the lines hold one event per key already (cdc.spark.latest.Fewer.unique),
there is no window and no shuffle. The lake's rows are never shuffled: the winners learn whether
their key was in the lake from a join with the lake's key columns only, and the lake rows no winner
touches are copied into the new version by an anti join against the winners' keys (broadcast when
they are few, so the lake is only scanned).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from cdc.errors import DataError
from cdc.schema import Column, TableSchema, carried
from cdc.spark import recipes
from cdc.spark.evolve import META, fill_literal, typed
from cdc.spark.types import raw_struct

ROW_OPS = ("c", "u", "d", "r")
WINNER = (*META, "_del", "_after")  # what an event carries besides its key


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
    # The cutting line's own position: a truncate's is truncate_position; a re-snapshot end line's is later
    # than its cut (rows between the two were read again or changed since, and stay).
    truncate_at: str | None = None

    @property
    def is_partial_cut(self) -> bool:
        """The cut lies before its line: lake rows written after the cut by earlier runs stay."""
        return self.truncate_at is not None and self.truncate_at != self.truncate_position


def _keys(final: TableSchema) -> list[str]:
    return [f"c{final.column_names.index(k)}" for k in final.primary_key]


def _values(final: TableSchema) -> list[str]:
    keys = set(_keys(final))
    return [f"c{i}" for i in range(len(final.columns)) if f"c{i}" not in keys]


def scoped_versions(versions: list[TableSchema], final: TableSchema, info: TableInput,
            position: SparkColumn) -> list[tuple[TableSchema, SparkColumn | None]]:
    """The schema versions in force during the run, each with its range of `position`s."""
    return [(version, None if scope is None else _in_scope(position, *scope))
            for version, scope in version_ranges(versions, final, info)]


def version_ranges(versions: list[TableSchema], final: TableSchema,
                   info: TableInput) -> list[tuple[TableSchema, tuple[str, str | None] | None]]:
    """scoped_versions' versions, each with its range as positions: (from, to or None); None: the one version."""
    if not info.rows:
        return [(final, None)]
    if not versions or info.min_position < versions[0].position:
        raise DataError(
            f"{info.db}.{info.table}: change at {info.min_position} has no schema history entry "
            f"(first version: {versions[0].position if versions else 'none'})",
            hint="the schema history (<state>/schema/) must be written by snapshot/tail before their changes",
        )
    ranges: list[tuple[TableSchema, tuple[str, str | None] | None]] = []
    for index, version in enumerate(versions):
        end = versions[index + 1].position if index + 1 < len(versions) else None
        if version.position > info.max_position or (end is not None and end <= info.min_position):
            continue
        ranges.append((version, (version.position, end)))
    return ranges


def _in_scope(position: SparkColumn, start: str, end: str | None) -> SparkColumn:
    scope = position >= start
    return scope if end is None else scope & (position < end)


def by_version(scoped: list[tuple[TableSchema, SparkColumn | None]],
                value: Callable[[TableSchema], SparkColumn]) -> SparkColumn:
    """value(version) of the version whose range holds the line's position (no CASE for a single version)."""
    if len(scoped) == 1:
        return value(scoped[0][0])
    chain = F.when(scoped[0][1], value(scoped[0][0]))  # type: ignore[arg-type]
    for version, scope in scoped[1:]:
        chain = chain.when(scope, value(version))  # type: ignore[arg-type]
    return chain


def _key_source(versions: list[TableSchema], name: str, version: TableSchema, final: TableSchema) -> str:
    """Key column `name` of the final version as `version` names it (a key column renamed since: its old name)."""
    return carried(versions, name, version.position, final.position).source or name


def _check_key(scoped: list[TableSchema], final: TableSchema, versions: list[TableSchema]) -> None:
    for version in scoped:
        # A key column renamed (RENAME COLUMN id TO item_id, CHANGE id item_id INT) is the same key.
        if sorted(_key_source(versions, k, version, final) for k in final.primary_key) != sorted(version.primary_key):
            raise DataError(
                f"{final.db}.{final.table}: primary key changed from {list(version.primary_key)} at "
                f"{version.position} to {list(final.primary_key)} at {final.position} inside one merge run",
                hint="a run ends before a key change (cdc.spark.rekey); this is a bug: report it",
            )


def table_events(raw: DataFrame, versions: list[TableSchema], final: TableSchema, info: TableInput,
                 lake_known: bool = False, unique: bool = False) -> DataFrame:
    """The run's events of one table, keyed by typed key columns, images still raw JSON text.

    A line is one event (its `key`); a key-changing update is two: a delete of the `before` key too.
    lake_known: the lines' `_lake` says whether the lake holds their key (cdc.spark.lake_keys): the events carry it as
    `_in_lake` (last_changes, lake_known). unique: no line moves its row (cdc.spark.latest.Fewer.unique vouches for
    it): each line is its one event, read without asking whether its update moved the row.
    """
    ranges = version_ranges(versions, final, info)
    _check_key([v for v, _ in ranges], final, versions)
    read_as_text = isinstance(raw.schema["key"].dataType, T.StringType)  # else types.keyed_line_schema
    after_struct = not after_is_text(raw)
    key = ("events", _schema_key(versions, final), tuple(r for _, r in ranges), info.db, info.table, read_as_text,
           after_struct, lake_known, unique)
    where, parsed, events = recipes.cached(
        raw.sparkSession, key,
        lambda: _event_columns(versions, final, info, read_as_text, after_struct, lake_known, unique))
    return recipes.select(recipes.select(raw.filter(where), (key, 1), lambda: parsed), (key, 2), lambda: events)


def after_is_text(raw: DataFrame) -> bool:
    """Whether the lines' `after` is JSON text (LINE_SCHEMA), not a struct (types.keyed_line_schema): table_events'
    `_after` is the same."""
    return not isinstance(raw.schema["after"].dataType, T.StructType)


def _schema_key(versions: list[TableSchema], final: TableSchema) -> str:
    """Everything of a table's schema versions the expressions are built from (fills and renames included)."""
    return repr((versions, final))


def _event_columns(versions: list[TableSchema], final: TableSchema, info: TableInput, read_as_text: bool,
                   after_struct: bool, lake_known: bool = False,
                   unique: bool = False) -> tuple[SparkColumn, list[SparkColumn], list[SparkColumn]]:
    """table_events' filter, its parse of the key images, and the events they make (inlined into columns; one per
    line where unique)."""
    scoped = scoped_versions(versions, final, info, F.col("position"))
    pk = list(final.primary_key)
    where = (F.col("db") == info.db) & (F.col("table") == info.table) & F.col("op").isin(*ROW_OPS)
    key_fields = sorted({_key_source(versions, k, v, final) for v, _ in scoped for k in pk})

    def image(name: str) -> SparkColumn:
        return F.from_json(name, raw_struct(key_fields)) if read_as_text else F.col(name)

    parsed = [F.col("op"), F.col("position"), F.col("ts"), F.col("after"), image("key").alias("k"),
              *([] if unique else [F.when(F.col("op") == "u", image("before")).alias("b")]),
              *([F.col("_lake")] if lake_known else [])]

    def field(image: str, name: str) -> Callable[[TableSchema], SparkColumn]:
        def value(version: TableSchema) -> SparkColumn:
            source = _key_source(versions, name, version, final)
            return typed(F.col(image).getField(source), version.column(source), final.column(name))
        return value

    def key(image: str) -> list[SparkColumn]:
        return [by_version(scoped, field(image, k)) for k in pk]

    ts = F.col("ts").cast(T.TimestampType())

    def fields(keys: list[SparkColumn], delete: SparkColumn, after: SparkColumn, lake: SparkColumn) -> list[SparkColumn]:
        return [*[k.alias(name) for k, name in zip(keys, _keys(final), strict=False)],
                F.col("position").alias("_cdc_position"), F.col("op").alias("_cdc_op"),
                ts.alias("_cdc_commit_ts"), delete.alias("_del"), after.alias("_after"),
                *([lake.alias("_in_lake")] if lake_known else [])]

    if after_struct:
        # Only this table's fields travel through the shuffle (the line schema holds every merged table's).
        names = sorted({c for v, _ in scoped for c in v.column_names if c not in pk})
        image_type: T.DataType = raw_struct(names)
        after = F.struct(*[F.col("after").getField(n).alias(n) for n in names])
    else:
        after, image_type = F.col("after"), T.StringType()
    new = key("k")
    last = fields(new, F.col("op") == "d", F.when(F.col("op") != "d", after), F.col("_lake"))
    if unique:  # no moved row: a line is its one event, no generator
        return where, parsed, last
    old = key("b")
    moved = (F.col("op") == "u") & ~reduce(lambda x, y: x & y, [n.eqNullSafe(o) for n, o in zip(new, old, strict=False)])
    # (A table whose lines hold a moved row is never lake_known: its old key's event is never marked.)
    gone = fields(old, F.lit(True), F.lit(None).cast(image_type), F.lit(False))
    # inline: one row per event, the struct's fields as columns (one projection, not an explode and a select)
    return where, parsed, [F.inline(F.when(moved, F.array(F.struct(*gone), F.struct(*last)))
                                    .otherwise(F.array(F.struct(*last))))]


def last_changes(events: DataFrame, base: DataFrame | None, versions: list[TableSchema], final: TableSchema,
                 info: TableInput, one_each: bool = False, lake_known: bool = False) -> DataFrame:
    """Each key the run's events touch, with its outcome (one shuffle of the events at most, none of the lake).

    Result columns: c0..cn, _cdc_*, `_keep` (row of the new lake version), `_action` (INSERT/DELETE
    for the Snowflake batch, null if the key has no net change), `_isupdate` (INSERT of a key the
    lake already had) and `_in_lake`. A delete of a key the lake never had nets out to nothing; a
    truncate turns every older state into a delete.

    one_each: the events hold one per key already (cdc.spark.latest.Fewer.unique), and the lake's keys are few
    enough to broadcast: no window, and the events go through a broadcast join with the lake's keys unshuffled.
    Measured on 1M changes into 1M rows, warm, one session: median 8.50 -> 7.07 s (docs/performance.md, 2026-12-03).
    lake_known: with one_each, the events' `_in_lake` says whether the lake holds their key (table_events,
    cdc.spark.lake_keys): no join with the lake's keys at all.
    """
    keys = _keys(final)
    if one_each:
        won = events
    else:
        # Last change per key: a window over the events shuffled by key (one shuffle, one sort). A
        # groupBy with max_by over the row sorts twice (map-side partial aggregate, then final), because
        # an aggregate over strings cannot hash; the partial step saves nothing when a key's changes are
        # spread over the whole input.
        last = Window.partitionBy(*keys).orderBy(F.col("_cdc_position").desc())
        won = events.withColumn("_n", F.row_number().over(last)).filter(F.col("_n") == 1).drop("_n")
    if base is None:
        return outcomes(won, versions, final, info, in_lake=False)
    if one_each and lake_known:
        return outcomes(won, versions, final, info)
    # Only the lake's key columns are read for this. After the window, a merge join: the winners come out
    # of it sorted by key, and Spark would otherwise broadcast the lake's keys (a small file to its
    # estimate, a hash table of every key in the lake in fact). Without it, that broadcast is the point.
    lake_keys = base.select(*keys, F.lit(True).alias("_in_lake"))
    lake_keys = F.broadcast(lake_keys) if one_each else lake_keys.hint("merge")
    won = won.join(lake_keys, keys, "left").withColumn("_in_lake", F.coalesce("_in_lake", F.lit(False)))
    return outcomes(won, versions, final, info)


def outcomes(won: DataFrame, versions: list[TableSchema], final: TableSchema, info: TableInput,
             in_lake: bool | None = None, after_text: bool | None = None) -> DataFrame:
    """Events (table_events' columns and `_in_lake`) with their images typed and their outcome: last_changes' columns.

    in_lake: the value of `_in_lake` for every event, where the caller knows it (else the column's).
    after_text: whether `_after` is JSON text (after_is_text of the lines), where the caller knows it; else `won`'s
    schema is asked: two Py4J round trips, per table and cycle in a follow run's small tables.
    cdc.spark.small_tables runs it on every event of a small table, then picks the winners on the driver.
    """
    ranges = version_ranges(versions, final, info)
    read_as_text = isinstance(won.schema["_after"].dataType, T.StringType) if after_text is None else after_text
    key = ("outcomes", _schema_key(versions, final), tuple(r for _, r in ranges), info.truncate_position,
           info.truncate_at, info.truncate_ts, read_as_text, in_lake)
    images, result = recipes.cached(
        won.sparkSession, key, lambda: _outcome_columns(versions, final, info, read_as_text, in_lake))
    # Each image parsed once, in its own projection: in the one below, Spark would prune a from_json
    # per column read from it and parse the same text once per column.
    return recipes.select(recipes.select(won, (key, 1), lambda: images), (key, 2), lambda: result)


def _outcome_columns(versions: list[TableSchema], final: TableSchema, info: TableInput, read_as_text: bool,
                     in_lake_value: bool | None) -> tuple[list[SparkColumn], list[SparkColumn]]:
    """outcomes' two projections: the events with their images parsed, then typed with their outcome."""
    keys = _keys(final)
    scoped = scoped_versions(versions, final, info, F.col("_cdc_position"))
    lake = F.col("_in_lake") if in_lake_value is None else F.lit(in_lake_value).alias("_in_lake")
    images = [F.col(c) for c in (*keys, *WINNER)] + [lake] + [
        (F.from_json("_after", raw_struct(v.column_names)) if read_as_text else F.col("_after")).alias(f"_a{n}")
        for n, (v, _) in enumerate(scoped)]
    in_lake = F.col("_in_lake")
    if info.truncate_position is None:
        deleted, meta = F.col("_del"), [F.col(m) for m in META]
    else:
        cut = F.col("_cdc_position") < F.lit(info.truncate_position)
        deleted = F.col("_del") | cut
        meta = [F.when(cut, _cut_meta(info)[m]).otherwise(F.col(m)).alias(m) for m in META]
    values = _decoded(scoped, final, versions)
    action = F.when(~deleted, F.lit("INSERT")).when(in_lake, F.lit("DELETE"))
    ordered = [F.col(c) if c in keys else values[c] for c in (f"c{i}" for i in range(len(final.columns)))]
    return images, [*ordered, *meta, (~deleted).alias("_keep"), action.alias("_action"),
                    (~deleted & in_lake).alias("_isupdate"), in_lake.alias("_in_lake")]


def untouched(base: DataFrame, changed: DataFrame, final: TableSchema, broadcast: bool) -> DataFrame:
    """The lake rows whose key the run did not touch (c0..cn, _cdc_*): an anti join on the key columns, of those the
    lake holds (`_in_lake`: a key it never had matches none of its rows)."""
    keys = changed.filter(F.col("_in_lake")).select(*_keys(final))
    return base.join(F.broadcast(keys) if broadcast else keys, _keys(final), "left_anti")


def truncated_rows(rows: DataFrame, final: TableSchema, info: TableInput) -> DataFrame:
    """Untouched lake rows of a truncated table, as the batch's DELETEs (key only, the truncate's coordinates)."""
    keys = set(_keys(final))
    cut = _cut_meta(info)
    return rows.select(*[F.col(c) if c in keys else F.lit(None).cast(rows.schema[c].dataType).alias(c)
                         for c in (f"c{i}" for i in range(len(final.columns)))],
                       *[cut[m].alias(m) for m in META], F.lit(False).alias("_keep"), F.lit("DELETE").alias("_action"),
                       F.lit(False).alias("_isupdate"))


def _cut_meta(info: TableInput) -> dict[str, SparkColumn]:
    return {"_cdc_op": F.lit("d"), "_cdc_position": F.lit(info.truncate_at or info.truncate_position),
            "_cdc_commit_ts": F.lit(info.truncate_ts).cast(T.TimestampType())}


def _decoded(scoped: list[tuple[TableSchema, SparkColumn | None]], final: TableSchema,
             versions: list[TableSchema]) -> dict[str, SparkColumn]:
    """Non-key columns of the winner: its parsed `after` image (_a<n>) typed to the final schema.

    A winner written under an older version than the final one holds, in a column added since, what MySQL
    gave the existing rows (cdc.schema.carried), not NULL: the ALTER came after its change (issue #30).
    """
    images = {v.position: F.col(f"_a{n}") for n, (v, _) in enumerate(scoped)}
    out = {}
    for i, c in enumerate(final.columns):
        if c.name in final.primary_key:
            continue

        def value(version: TableSchema, c: Column = c) -> SparkColumn:
            source = carried(versions, c.name, version.position, final.position)
            if source.source is None:
                return fill_literal(c, source.fill)
            return typed(images[version.position].getField(source.source), version.column(source.source), c)

        out[f"c{i}"] = by_version(scoped, value).alias(f"c{i}")
    return out
