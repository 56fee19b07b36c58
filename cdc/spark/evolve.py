"""Values under a later schema: a change line's value typed to the table's final schema as MySQL stored it, and
the previous lake version evolved to that schema (columns added, renamed, dropped, modified since it was written).

cdc.spark.compact reads the run's events through `typed`; the lake version it merges onto through `read_base`.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc.schema import Carried, Column, TableSchema, carried, varchar_length
from cdc.spark.types import col, parse_value, spark_type

META = ("_cdc_op", "_cdc_position", "_cdc_commit_ts")  # a lake row's stream metadata, beside its columns c0..cn


def typed(raw: SparkColumn, column: Column, final: Column) -> SparkColumn:
    value = parse_value(column, raw)
    value = value if spark_type(column) == spark_type(final) else converted(value, spark_type(final))
    return stored_as(value, column, final)


def converted(value: SparkColumn, kind: T.DataType) -> SparkColumn:
    """A value of a column MySQL retyped, cast to the new type. A try_cast: where MySQL converted in a way no cast
    reproduces ('12abc' made an INT in a non-strict session: 12), the table is flagged for a re-snapshot
    (cdc.schema.retype), and the value is NULL until it is re-read, instead of failing every merge (ANSI casts
    throw on malformed or out-of-range input)."""
    return value.try_cast(kind)


def stored_as(value: SparkColumn, column: Column, final: Column) -> SparkColumn:
    """A value of `column` as MySQL stored it after a MODIFY to `final` that Spark's cast does not reproduce."""
    return cut_text(cut_fraction(value, column, final), column, final)


def cut_text(value: SparkColumn, column: Column, final: Column) -> SparkColumn:
    """A VARCHAR shortened to `final`'s length: MySQL cut longer values to it in a non-strict session (a strict
    one refuses the ALTER while any is longer, so the cut changes nothing then). Lengths count characters."""
    kept, had = varchar_length(final), varchar_length(column)
    return value if kept is None or had is None or kept >= had else F.substring(value, 1, kept)


def cut_fraction(value: SparkColumn, column: Column, final: Column) -> SparkColumn:
    """A DATETIME/TIMESTAMP value of `column` as a MODIFY to `final`'s fewer fractional digits stored it (#30).

    MariaDB truncates the fraction (MySQL rounds it, unless sql_mode has TIME_TRUNCATE_FRACTIONAL: not
    reproduced, docs/limits.md), and no Spark type carries the precision, so the cut is made here.
    """
    kept = final.fsp or 0
    if final.data_type not in ("datetime", "timestamp") or column.data_type not in ("datetime", "timestamp") \
            or kept >= (column.fsp or 0):
        return value
    if isinstance(spark_type(final), T.TimestampType):  # an instant: whole microseconds since the epoch, floored
        micros = F.unix_micros(value)
        return F.timestamp_micros(micros - F.pmod(micros, F.lit(10 ** (6 - kept))))
    # A wall-clock time (TIMESTAMP_NTZ): its text's fraction cut, no time zone involved.
    text = F.regexp_replace(value.cast(T.StringType()), r"\.\d*$" if not kept else rf"(\.\d{{{kept}}})\d*$",
                            "" if not kept else "$1")
    return text.cast(spark_type(final))


def read_base(spark: SparkSession, path: str, final: TableSchema, versions: list[TableSchema], since: str) -> DataFrame:
    """The previous lake version (at schema position `since`) as c0..cn + _cdc_*, evolved to the final schema.

    Every schema version in between is walked (cdc.schema.carried): a column added since holds the value
    MySQL gave existing rows (its DEFAULT, the type's implicit value, or NULL), a renamed one keeps its values,
    a dropped one is gone, and one dropped and added again holds the later add's fill, not its old values.
    """
    old = spark.read.parquet(path)
    present = set(old.columns)
    then = next((v for v in reversed(versions) if v.position <= since), None) if since else None
    values = []
    for i, c in enumerate(final.columns):
        source = carried(versions, c.name, since, final.position) if since else Carried(c.name)
        if source.source is not None and source.source in present:
            value = col(source.source)
            if old.schema[source.source].dataType != spark_type(c):
                value = converted(value, spark_type(c))
            if then is not None and source.source in then.column_names:
                value = stored_as(value, then.column(source.source), c)
            values.append(value.alias(f"c{i}"))
        else:
            values.append(fill_literal(c, source.fill).alias(f"c{i}"))
    return old.select(*values, *[F.col(m) for m in META])


def fill_literal(column: Column, fill: Any) -> SparkColumn:
    """The value an added column gives older rows (change-log encoding) as a typed Spark literal."""
    if fill is None:
        return F.lit(None).cast(spark_type(column))
    raw = fill if isinstance(fill, str) else json.dumps(fill)  # the raw JSON text a line's value is read as
    return parse_value(column, F.lit(raw))
