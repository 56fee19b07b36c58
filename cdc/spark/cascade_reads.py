"""What the cascade replay (cdc.spark.cascades) reads with Spark, and the change lines it hands back to the merge.

Rows reach the replay as canonical text: each value typed exactly as the lake types it (cdc.spark.types), then
written back as text that parses to the same lake value (a decimal's plain digits, a float's shortest form, a
binary value's base64, a SET's JSON list). Equal values have equal text whichever side they come from (a lake
row or a change line), and a derived change line carries the text as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc.schema import Column, SchemaHistory, TableSchema, cascades_in_binlog
from cdc.spark import compact, evolve
from cdc.spark.cascades import Change, Graph, Key, Need, Replay, Row, TableId
from cdc.spark.scan import TableStats
from cdc.spark.types import raw_struct, spark_type
from cdc.state import ServerIdentity

log = logging.getLogger(__name__)

LakeBase = Callable[[TableSchema], DataFrame | None]  # a table's previous lake version (evolve.read_base), if any


@dataclass
class Cascades:
    """The derived change lines and what the merge reports about them."""

    lines: list[str] = field(default_factory=list)  # JSON change lines (types.LINE_SCHEMA), derived changes
    derived: dict[str, int] = field(default_factory=dict)  # "db.table" -> derived changes
    warnings: list[str] = field(default_factory=list)
    rounds: int = 0  # replays until nothing more was needed
    lookups: int = 0  # Spark queries the replay made (each one job or more): what its time grows with

    def stats(self, infos: list[TableStats]) -> list[TableStats]:
        """The run's table stats with the derived lines counted (a child without changes of its own joins)."""
        by_table = {(i.db, i.table): i for i in infos}
        for line in self.lines:
            doc = json.loads(line)
            at, table = doc["position"], (doc["db"], doc["table"])
            known = by_table.get(table)
            if known is None:
                by_table[table] = TableStats(doc["db"], doc["table"], 1, at, at, at, None, None)
            else:
                by_table[table] = replace(known, rows=known.rows + 1, min_position=min(known.min_position or at, at),
                                          max_position=max(known.max_position or at, at),
                                          last_position=max(known.last_position, at))
        return [by_table[t] for t in sorted(by_table)]


def canonical(column: Column, value: SparkColumn) -> SparkColumn:
    """A lake-typed value as text that types.parse_value turns back into the same value."""
    kind = spark_type(column)
    if isinstance(kind, T.BinaryType):
        return F.base64(value)
    if isinstance(kind, T.ArrayType):
        return F.to_json(value)
    return value if isinstance(kind, T.StringType) else value.cast(T.StringType())


def derive(spark: SparkSession, raw: DataFrame, history: SchemaHistory, infos: list[TableStats],
           lake_base: LakeBase, server: ServerIdentity | None) -> Cascades:
    """The child-row changes InnoDB's cascades made in this run (raw: the lines as types.LINE_SCHEMA)."""
    result = Cascades()
    graph = Graph({t: history.versions(*t) for t in history.tables() if history.versions(*t)})
    if not graph.parents:
        return result  # no cascading foreign key among the captured tables: nothing to read
    if server is not None and cascades_in_binlog(server.flavour, server.server_version):
        return result  # MySQL 8.4+: the binlog has the cascaded rows already; deriving them would apply them twice
    changed = [i for i in infos if (i.db, i.table) in graph.parents and i.removals]
    if not changed:
        return result  # no parent had an update or a delete
    upto = max(i.last_position for i in infos)
    reader = _Reader(spark, raw, history, {(i.db, i.table): i for i in infos}, lake_base, upto)
    finals = {t: s for t in graph.versions for s in [reader.final(t)] if s is not None}
    keys = {t: key_columns(s) for t, s in finals.items()}
    replay = Replay(graph, keys, frozenset(t for t, s in finals.items() if not s.primary_key))
    for info in changed:
        replay.add_changes(reader.triggers((info.db, info.table), graph.referenced_columns((info.db, info.table))))
    while True:
        result.rounds += 1
        derived, missing = replay.run()
        if not missing:
            break
        # All of a round's values of one foreign key in one lookup: Spark jobs per value made a run's jobs grow with
        # its parent deletes (433 for 40 deletes two levels deep, against 43 now, as for 4).
        for (table, columns), values in _by_foreign_key(missing):
            reader.load(replay, table, columns, values)
        replay.needs_loaded |= missing
    result.lookups = reader.lookups
    result.lines = [_line(change, keys[change.table]) for change in derived]
    for change in derived:
        name = f"{change.table[0]}.{change.table[1]}"
        result.derived[name] = result.derived.get(name, 0) + 1
    for name, count in sorted(replay.unreached.items()):
        result.warnings.append(f"{count} parent change(s) cascade through foreign key {name}, whose table is not "
                               "captured: its rows there are not changed (capture that table to reproduce them)")
    for warning in result.warnings:
        log.warning(warning)
    return result


def _by_foreign_key(needs: set[Need]) -> list[tuple[tuple[TableId, tuple[str, ...]], set[Key]]]:
    """The needs grouped by child table and foreign-key columns, in a stable order."""
    grouped: dict[tuple[TableId, tuple[str, ...]], set[Key]] = {}
    for table, columns, value in needs:
        grouped.setdefault((table, columns), set()).add(value)
    return sorted(grouped.items(), key=lambda item: str(item[0]))


def key_columns(final: TableSchema) -> tuple[str, ...]:
    """What identifies a row: the primary key, or the whole row of a table without one (a multiset)."""
    return final.primary_key or tuple(final.column_names)


class _Reader:
    """One table's rows and changes as canonical text, filtered by value with Spark, collected to the driver."""

    def __init__(self, spark: SparkSession, raw: DataFrame, history: SchemaHistory, infos: dict[TableId, TableStats],
                 lake_base: LakeBase, upto: str) -> None:
        self.spark, self.raw, self.history, self.infos, self.lake_base, self.upto = (
            spark, raw, history, infos, lake_base, upto)
        self._events: dict[TableId, DataFrame | None] = {}
        self._lake: dict[TableId, DataFrame | None] = {}
        self.lookups = 0

    def _collect(self, frame: DataFrame) -> list[Any]:
        self.lookups += 1
        return frame.collect()

    def final(self, table: TableId) -> TableSchema | None:
        return self.history.at(table[0], table[1], self.upto)

    def events(self, table: TableId) -> DataFrame | None:
        """The run's changes of a table: position, op, ts, before/after as structs of canonical text (c0..cn)."""
        if table not in self._events:
            self._events[table] = self._read_events(table)
        return self._events[table]

    def _read_events(self, table: TableId) -> DataFrame | None:
        info, final = self.infos.get(table), self.final(table)
        if info is None or not info.rows or final is None:
            return None
        versions = self.history.versions(*table)
        scoped = compact.scoped_versions(versions, final, info.as_input(), F.col("position"))
        names = sorted({c for v, _ in scoped for c in v.column_names})
        lines = self.raw.filter((F.col("db") == table[0]) & (F.col("table") == table[1])
                                & F.col("op").isin(*compact.ROW_OPS))
        # A line without the field (every line but those of foreign_key_checks=0) was written with checks on.
        checks = F.coalesce(F.col("fk_checks"), F.lit(True)).alias("fk_checks")
        parsed = lines.select("position", "op", "ts", checks, F.from_json("before", raw_struct(names)).alias("b"),
                              F.from_json("after", raw_struct(names)).alias("a"))

        def image(name: str) -> SparkColumn:
            fields = []
            for i, column in enumerate(final.columns):
                def value(version: TableSchema, column: Column = column) -> SparkColumn:
                    if column.name not in version.column_names:
                        return F.lit(None).cast(T.StringType())
                    typed = evolve.typed(F.col(name).getField(column.name), version.column(column.name), column)
                    return canonical(column, typed)
                fields.append(compact.by_version(scoped, value).alias(f"c{i}"))
            return F.when(F.col(name).isNotNull(), F.struct(*fields))

        return parsed.select("position", "op", "ts", "fk_checks", image("b").alias("before"),
                             image("a").alias("after"))

    def lake(self, table: TableId) -> DataFrame | None:
        """The table's previous lake version as c0..cn canonical text."""
        if table not in self._lake:
            final = self.final(table)
            base = self.lake_base(final) if final is not None else None
            self._lake[table] = None if base is None or final is None else base.select(
                *[canonical(c, F.col(f"c{i}")).alias(f"c{i}") for i, c in enumerate(final.columns)])
        return self._lake[table]

    def triggers(self, table: TableId, columns: list[str]) -> list[Change]:
        """The changes of a parent that may cascade: deletes, and updates of a referenced column, with checks on."""
        events, final = self.events(table), self.final(table)
        if events is None or final is None:
            return []
        moved = [~self._field("before", final, c).eqNullSafe(self._field("after", final, c)) for c in columns
                 if c in final.column_names]
        moves = (F.col("op") == "d") | ((F.col("op") == "u") & reduce(lambda x, y: x | y, moved, F.lit(False)))
        wanted = moves & F.col("fk_checks")
        return self._changes(table, final, events.filter(wanted))

    def load(self, replay: Replay, table: TableId, columns: tuple[str, ...], values: set[Key]) -> None:
        """Every row of the child that holds (or held, in the run) one of the values in `columns`: its lake row and
        changes.

        Usually one or two Spark jobs (a cascade's children are mostly rows the run did not change): the lake rows
        holding the values, whole; then, in one job, the run's changes holding the values and those of the keys
        found. Only keys learnt from those changes are looked up again.
        """
        final = self.final(table)
        if final is None:
            return
        lake, events = self.lake(table), self.events(table)
        rows = [] if lake is None else self._lake_holding(lake, final, columns, values)
        fetched = {replay.key_of(table, row) for row in rows}
        keys, asked = set(fetched), set(fetched)
        changes: dict[str, Change] = {}
        found = [] if events is None else self._changes(table, final, self._holding_any(events, final, [
            (columns, values), (key_columns(final), fetched)]))
        while found:  # a change of a loaded key may move it to another key: load that one's changes too
            for change in found:
                changes.setdefault(change.position, change)
                keys |= set(self._keys(replay, table, change))
            pending, asked = keys - asked, asked | keys
            found = self._changes_of(table, final, pending)
        replay.add_rows(table, keys, rows + self._lake_rows(table, final, keys - fetched))
        replay.add_changes(changes.values())

    @staticmethod
    def _keys(replay: Replay, table: TableId, change: Change) -> list[Key]:
        return [replay.key_of(table, image) for image in (change.before, change.after) if image is not None]

    def _changes_of(self, table: TableId, final: TableSchema, keys: set[Key]) -> list[Change]:
        events = self.events(table)
        if events is None or not keys:
            return []
        return self._changes(table, final, self._holding_any(events, final, [(key_columns(final), keys)]))

    def _holding_any(self, events: DataFrame, final: TableSchema,
                     lookups: list[tuple[tuple[str, ...], set[Key]]]) -> DataFrame:
        """The events whose `before` or `after` image holds one of a lookup's values in its columns, for every
        lookup, in one Spark job (an event found twice comes twice; changes are kept by position). A lookup without
        values is left out; at least one has some (the callers' values to load, or keys)."""
        probe = events.withColumn("_image", F.explode(F.array("before", "after")))
        found = []
        for columns, values in lookups:
            if values:
                wanted = self._keys_frame(len(columns), values)
                found.append(probe.join(wanted, self._on(probe, final, columns, wanted, "_image"), "left_semi"))
        return reduce(DataFrame.unionAll, found).drop("_image")

    def _lake_rows(self, table: TableId, final: TableSchema, keys: set[Key]) -> list[Row]:
        lake = self.lake(table)
        if lake is None or not keys:
            return []
        return self._lake_holding(lake, final, key_columns(final), keys)

    def _lake_holding(self, lake: DataFrame, final: TableSchema, columns: tuple[str, ...],
                      values: set[Key]) -> list[Row]:
        """The lake rows (every copy, for a table without a key) holding one of `values` in `columns`, whole."""
        wanted = self._keys_frame(len(columns), values)
        names = final.column_names
        return [dict(zip(names, r, strict=True))
                for r in self._collect(lake.join(wanted, self._on(lake, final, columns, wanted), "left_semi"))]

    def _keys_frame(self, width: int, keys: set[Key]) -> DataFrame:
        """The values looked up (w0..wn, canonical text), small: broadcast to every join with them."""
        schema = T.StructType([T.StructField(f"w{i}", T.StringType()) for i in range(width)])
        return F.broadcast(self.spark.createDataFrame([list(k) for k in keys], schema))

    @staticmethod
    def _positional(final: TableSchema, names: list[str] | tuple[str, ...]) -> list[str]:
        return [f"c{final.column_names.index(n)}" for n in names]

    def _on(self, frame: DataFrame, final: TableSchema, columns: list[str] | tuple[str, ...], wanted: DataFrame,
            image: str | None = None) -> SparkColumn:
        def side(name: str) -> SparkColumn:
            return frame[name] if image is None else frame[image].getField(name)

        # NULL-safe: a keyless table's key is its whole row, NULLs included (a key column is never NULL).
        pairs = [side(c).eqNullSafe(wanted[f"w{i}"]) for i, c in enumerate(self._positional(final, columns))]
        return reduce(lambda x, y: x & y, pairs)

    @staticmethod
    def _field(image: str, final: TableSchema, name: str) -> SparkColumn:
        return F.col(image).getField(f"c{final.column_names.index(name)}")

    def _changes(self, table: TableId, final: TableSchema, frame: DataFrame) -> list[Change]:
        names = final.column_names

        def row(image: Any) -> Row | None:
            return None if image is None else dict(zip(names, image, strict=True))

        return [Change(table, r["position"], r["op"], r["ts"], row(r["before"]), row(r["after"]), r["fk_checks"])
                for r in self._collect(frame)]


def _line(change: Change, pk: tuple[str, ...]) -> str:
    """A derived change as a change line (docs/formats.md) the merge reads like the others, values as text."""
    image = change.after if change.after is not None else change.before
    assert image is not None
    return json.dumps({"after": change.after, "before": change.before, "db": change.table[0],
                       "key": {k: image.get(k) for k in pk}, "op": change.op, "position": change.position,
                       "table": change.table[1], "ts": change.ts, "kind": None, "new_table": None}, sort_keys=True)


def read_lines(spark: SparkSession, schema: T.StructType, lines: list[str]) -> DataFrame:
    """Derived change lines as a DataFrame of `schema` (the schema the run's own lines were read with)."""
    return spark.read.schema(schema).json(spark.sparkContext.parallelize(lines, 1))

