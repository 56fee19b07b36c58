"""MySQL column -> Spark type, and the Spark expression that turns a change-log JSON value into it.

Every value is first read as the raw JSON text (Spark's JSON reader hands a number or a list to a
StringType field as its exact text), then cast with built-in expressions: exact for BIGINT UNSIGNED
and DECIMAL, no Python UDF anywhere (a UDF would ship every row through a Python worker).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc.schema import Column, SchemaHistory
from cdc.values import BINARY_TYPES, SPATIAL_TYPES

# Spark's DecimalType stops at 38 digits; MySQL allows DECIMAL(65,30). Wider decimals stay the
# exact string of the change log rather than losing digits.
SPARK_MAX_PRECISION = 38
SMALL_INTS = frozenset({"tinyint", "smallint", "mediumint"})
# Zero and partial-zero dates ("0000-00-00", "2026-00-00", "2026-11-00") have no calendar value.
_ZERO_DATE = r"^(0000-|\d{4}-00-|\d{4}-\d{2}-00)"
# What a zero date becomes in a NOT NULL column (NULL would break the column's contract downstream).
ZERO_DATE_SENTINEL = "0001-01-01"  # as text: py4j renders date(1, 1, 1) as "1-01-01"

LINE_SCHEMA = T.StructType([
    T.StructField("after", T.StringType()), T.StructField("before", T.StringType()),
    T.StructField("db", T.StringType()), T.StructField("key", T.StringType()),
    T.StructField("op", T.StringType()), T.StructField("position", T.StringType()),
    T.StructField("table", T.StringType()), T.StructField("ts", T.StringType()),
    T.StructField("kind", T.StringType()), T.StructField("new_db", T.StringType()),
    T.StructField("new_table", T.StringType()),
    T.StructField("cut", T.StringType()),
    T.StructField("fk_checks", T.BooleanType()),  # false: run with foreign_key_checks=0; absent (null): on
])


def keyed_line_schema(key_names: list[str], after_names: list[str] | None = None) -> T.StructType | None:
    """LINE_SCHEMA with `key` and `before` read as structs of the primary-key fields (values as raw text).

    The reader then skips the other fields of a `before` image instead of copying it out as text, and
    no from_json parses the key again per line. after_names: `after` read as a struct of these fields
    too (raw text), so an image is never copied out as text to be parsed again. None when two names
    differ only in case (two tables' keys `ID` and `id`): Spark would reject such a struct; the lines
    are then read as LINE_SCHEMA.
    """
    structs = {"key": sorted(set(key_names)), "before": sorted(set(key_names))}
    if after_names is not None:
        structs["after"] = sorted(set(after_names))
    if any(len({n.lower() for n in names}) != len(names) for names in structs.values()):
        return None
    return T.StructType([T.StructField(f.name, raw_struct(structs[f.name]) if f.name in structs else f.dataType)
                         for f in LINE_SCHEMA])


class RunTable(Protocol):
    """A table of a run, where its lines end (cdc.spark.scan.TableStats)."""

    @property
    def db(self) -> str: ...
    @property
    def table(self) -> str: ...
    @property
    def last_position(self) -> str: ...


def keyed_schema(history: SchemaHistory, infos: Sequence[RunTable]) -> T.StructType | None:
    """The line schema with `key`/`before` read as structs of the run's primary-key columns and `after` of its other
    columns (keyed_line_schema); None where two names differ only in case."""
    # Every table of the run, row changes or not: one with only DDL (an ALTER alone) is merged too, and its
    # (empty) events are still read through these structs.
    finals = [(i, s) for i in infos for s in [history.at(i.db, i.table, i.last_position)] if s]
    # A keyless table's identity is its whole row: every column any version had is read from `before` too; a key
    # column renamed is read under each name it had.
    names = [k for i, s in finals for v in history.versions(i.db, i.table)
             for k in (v.primary_key if s.primary_key else v.column_names)]
    # Every non-key column any version of a merged table had: what the compaction reads from `after`.
    values = [c.name for i, s in finals for v in history.versions(i.db, i.table) for c in v.columns
              if c.name not in s.primary_key]
    return keyed_line_schema(names, values)


def col(name: str) -> SparkColumn:
    """A column by its exact name (MySQL names may hold dots, spaces and backticks)."""
    return F.col("`" + name.replace("`", "``") + "`")


def spark_type(column: Column) -> T.DataType:
    """The lake type of a MySQL column (docs/guide.md, "spark-merge": type map)."""
    kind = column.data_type
    if kind in SMALL_INTS or kind == "year":
        return T.IntegerType()
    if kind in ("int", "integer"):
        return T.LongType() if column.unsigned else T.IntegerType()
    if kind == "bigint":
        return T.DecimalType(20, 0) if column.unsigned else T.LongType()
    if kind == "decimal":
        precision, scale = _precision_scale(column)
        return T.DecimalType(precision, scale) if precision <= SPARK_MAX_PRECISION else T.StringType()
    if kind == "float":
        return T.FloatType()
    if kind in ("double", "real"):
        return T.DoubleType()
    if kind == "bit":
        return T.DecimalType(20, 0) if _bit_width(column) > 63 else T.LongType()
    if kind == "date":
        return T.DateType()
    if kind == "datetime":
        return T.TimestampNTZType()
    if kind == "timestamp":
        return T.TimestampType()
    if kind in BINARY_TYPES or kind in SPATIAL_TYPES:
        return T.BinaryType()
    if kind == "set":
        return T.ArrayType(T.StringType())
    # char/varchar/text, enum, json, time (hours beyond 24: no Spark or Snowflake type holds it)
    return T.StringType()


def parse_value(column: Column, raw: SparkColumn) -> SparkColumn:
    """Expression turning the raw JSON text of one value into the column's lake type."""
    target = spark_type(column)
    kind = column.data_type
    if kind in ("date", "datetime", "timestamp"):
        zero = F.lit(None) if column.nullable else F.lit(ZERO_DATE_SENTINEL)
        return F.when(raw.rlike(_ZERO_DATE), zero.cast(target)).otherwise(raw.cast(target))
    if isinstance(target, T.BinaryType):
        return F.unbase64(raw)
    if isinstance(target, T.ArrayType):
        return F.from_json(raw, target)
    if isinstance(target, T.StringType):
        return raw
    return raw.cast(target)


def raw_struct(names: list[str]) -> T.StructType:
    """Schema reading an image's values as raw JSON text."""
    return T.StructType([T.StructField(name, T.StringType()) for name in names])


def _precision_scale(column: Column) -> tuple[int, int]:
    if column.precision is not None:
        return column.precision, column.scale or 0
    match = re.search(r"\((\d+)(?:,(\d+))?\)", column.type)
    return (int(match[1]), int(match[2] or 0)) if match else (10, 0)


def _bit_width(column: Column) -> int:
    match = re.search(r"\((\d+)\)", column.type)
    return int(match[1]) if match else 1
