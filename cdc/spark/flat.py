"""The compaction's kept lines in flat form (cdc/spark/_flat.c), read as the JSON lines they stand for.

The C pass writes a kept line of a listed table as tab-separated fields where the values Spark's JSON reader would
give are exactly the line's bytes (plain strings, integers, true/false, null); every other line stays JSON. Splitting
a line at its tabs costs Spark about a third of parsing it as JSON (docs/performance.md, "the kept lines in flat
form"). Here each table's flat files become rows of the keyed line schema (types.keyed_line_schema), so that the
compaction reads the union of both forms as it read the JSON lines alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc.spark.latest import FlatFiles

NULL = "\\N"


def flat_rows(spark: Any, schema: Any, db: str, table: str, flat: FlatFiles, lake_marks: bool = False) -> Any:
    """A table's flat lines as rows of `schema` (the keyed line schema the JSON lines are read with), and `_lake`
    where lake_marks: whether the lake holds the line's key (the pass wrote it with one field more:
    cdc.spark.lake_keys)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    k = len(flat.keys)
    # op, position, ts, the key, before's flag and key, after's flag and values (_flat.c's layout)
    at = {"op": 0, "position": 1, "ts": 2, "before": 3 + k, "after": 4 + 2 * k}
    lines = spark.read.text([str(p) for p in flat.files]).select(F.split("value", "\t", -1).alias("f"))

    def value(i: int) -> Any:
        field = F.col("f")[i]
        return F.when(field != NULL, field)

    def image(name: str, columns: dict[str, int]) -> Any:
        kind = schema[name].dataType
        return F.struct(*[(value(columns[f.name]) if f.name in columns else F.lit(None).cast(T.StringType()))
                          .alias(f.name) for f in kind.fields])

    key_at = {name: 3 + i for i, name in enumerate(flat.keys)}
    before_at = {name: 4 + k + i for i, name in enumerate(flat.keys)}
    after_at = {name: 5 + 2 * k + i for i, name in enumerate(flat.values)}
    made = {
        "db": F.lit(db), "table": F.lit(table),
        "op": value(at["op"]), "position": value(at["position"]), "ts": value(at["ts"]),
        "key": image("key", key_at),
        "before": F.when(value(at["before"]).isNotNull(), image("before", before_at)),
        "after": F.when(value(at["after"]).isNotNull(), image("after", after_at)),
    }
    fields = 5 + 2 * k + len(flat.values)
    return lines.select(*[(made[f.name] if f.name in made else F.lit(None)).cast(f.dataType).alias(f.name)
                          for f in schema.fields], *[(F.size("f") > fields).alias("_lake")] if lake_marks else [])


def with_flat(spark: Any, raw: Any, schema: Any, fewer: Any, where: Callable[[Any], Any] = lambda lines: lines,
              lake_marks: bool = False) -> Any:
    """`raw` (the pass's JSON lines) with every table's flat lines added, filtered by `where` as `raw` was.

    The pass leaves out the lines it reads at or before the run's start, but keeps one it cannot track (a key
    longer than it records), which may then be plain: the merge's own filter must hold for flat lines too."""
    for (db, table), flat in sorted(fewer.flat.items()):
        raw = raw.unionByName(where(flat_rows(spark, schema, db, table, flat, lake_marks)))
    return raw
