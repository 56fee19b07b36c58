"""Spark Columns built once per session and reused by later merges of the same tables (issue #25).

Building one table's typed expressions (cdc.spark.compact) costs hundreds of Py4J round trips: every
`F.*` call and Column operator is one or more, and every JVM object made is released by another one
later. A `cdc run --follow` cycle merging a few changes into 16 tables spent most of its build time so
(docs/performance.md, "Freshness"). A Column is an unresolved expression bound to no DataFrame, so the
Columns of a table whose schema versions, scope in the run and input format are those of an earlier
merge in the same session are that merge's Columns: the key names everything they are built from.

Per session (a Column belongs to its JVM), least recently used first out beyond MAX_RECIPES.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Recipes kept per session: one per table and schema scope (a few per table), bounded for a follow run that
# sees many tables or much DDL; an evicted one is built again when needed.
MAX_RECIPES = 2048

R = TypeVar("R")

_SESSIONS: weakref.WeakKeyDictionary[Any, OrderedDict[Hashable, Any]] = weakref.WeakKeyDictionary()


def cached(spark: Any, key: Hashable, build: Callable[[], R]) -> R:
    """build() made once per (session, key): later calls with an equal key return the same value."""
    recipes = _SESSIONS.get(spark)
    if recipes is None:
        recipes = _SESSIONS[spark] = OrderedDict()
    if key in recipes:
        recipes.move_to_end(key)
        return recipes[key]  # type: ignore[no-any-return]
    value = build()
    recipes[key] = value
    if len(recipes) > MAX_RECIPES:
        recipes.popitem(last=False)
    return value


def size(spark: Any) -> int:
    """How many recipes the session holds (tests)."""
    return len(_SESSIONS.get(spark, ()))


def select(frame: DataFrame, key: Hashable, columns: Callable[[], Sequence[Any]]) -> DataFrame:
    """frame.select(*columns()), the columns and their JVM list made once per (session, key).

    DataFrame.select converts its Columns to a JVM list on every call: one Py4J round trip per Column and two more
    (a follow cycle's 16 tables made 80 selects of 1-30 Columns each). The list, like its Columns, names no
    DataFrame, so an earlier select's serves any frame of the same shape."""
    from pyspark.sql.classic.column import _to_seq
    from pyspark.sql.classic.dataframe import DataFrame as Classic

    spark = frame.sparkSession
    seq = cached(spark, ("select", key), lambda: _to_seq(spark.sparkContext, [c._jc for c in columns()]))
    return Classic(frame._jdf.select(seq), spark)
