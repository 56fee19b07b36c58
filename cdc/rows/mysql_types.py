"""The one table of MySQL types the row decoder knows, by binlog column type (a table-map column's `type`).

For each type: how the table map spells it as our Column (information_schema's COLUMN_TYPE), how a row
image holds it (a reader of the Python value our fixed library readers return), how it goes straight from
the image to its change-log value (a reader, and the same work as source for the compiled reader) and for
which of our data types that holds, how the library's own reader is overridden, and how the library's
value is fixed before cdc.values encodes it. The code of each lives in the module of its type family
(integers, floats, decimals, temporal, strings, labels, bits); a type missing here stops tail with a
DataError naming the column (cdc.rows.table_map).

Values from a SELECT are not read here: the snapshot's own row reader (cdc/snapshot/lines.py) reads the text
protocol, and both paths end in cdc.values' encoding, so a row gives the same JSON either way.

Everything is looked up once per table map; the per-row work is the readers themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE as F

from cdc.rows import bits, decimals, floats, integers, json_binary, labels, strings, temporal
from cdc.rows.addresses import SIZES as ADDRESS_SIZES
from cdc.rows.addresses import address_fix
from cdc.rows.readers import ColumnType, Fix, Inline, Reader
from cdc.schema import Column
from cdc.values import INTEGER_TYPES

Describe = Callable[[Any, str | None], ColumnType]  # (table-map column, its charset) -> our Column's type
ReaderOf = Callable[[Any], Reader]  # table-map column -> reader of the Python value
EncodedReaderOf = Callable[[Any, Column], Reader | None]  # (table-map column, our Column) -> change-log value
InlineOf = Callable[[Any, Column], Inline | None]


@dataclass(frozen=True)
class MySQLType:
    """What the row decoder does with one binlog column type."""

    name: str
    describe: Describe
    read: ReaderOf | None = None  # None: only the library reads it (the table's events take its slow path)
    read_encoded: EncodedReaderOf | None = None  # None: read + fix + cdc.values' encoder
    inline: InlineOf | None = None  # None: the compiled reader calls the column's reader
    encodes: frozenset[str] = frozenset()  # our data types read_encoded and inline are right for
    library_reads: Mapping[str, Callable[..., Any]] = field(default_factory=dict)  # RowsEvent.__<name> overrides
    fixes: Mapping[str, Callable[[Column], Fix]] = field(default_factory=dict)  # data type -> fix of the library's value


def _int(name: str) -> MySQLType:
    return MySQLType(name, integers.describe_int, integers.int_reader, integers.int_encoded_reader, integers.int_inline,
                     INTEGER_TYPES)


_STRING_READS = {"read_string": strings.library_read_string}
_TIMESTAMP_FIXES = {"timestamp": temporal.timestamp_fix}

MYSQL_TYPES: dict[int, MySQLType] = {
    F.TINY: _int("TINYINT"),
    F.SHORT: _int("SMALLINT"),
    F.INT24: MySQLType("MEDIUMINT", integers.describe_int, integers.int24_reader, integers.int24_encoded_reader,
                       integers.int24_inline, INTEGER_TYPES),
    F.LONG: _int("INT"),
    F.LONGLONG: _int("BIGINT"),
    F.NEWDECIMAL: MySQLType("DECIMAL", decimals.describe_decimal, decimals.decimal_reader,
                            decimals.decimal_encoded_reader, decimals.decimal_inline, frozenset({"decimal"})),
    F.FLOAT: MySQLType("FLOAT", floats.describe_float, floats.float_reader),
    F.DOUBLE: MySQLType("DOUBLE", floats.describe_float, floats.double_reader, floats.double_encoded_reader,
                        floats.double_inline, frozenset({"double"})),
    F.BIT: MySQLType("BIT", bits.describe_bit, bits.bit_reader),
    F.DATE: MySQLType("DATE", temporal.describe_date, temporal.date_reader, temporal.date_encoded_reader,
                      temporal.date_inline, frozenset({"date"}), library_reads={"read_date": temporal.library_read_date}),
    F.NEWDATE: MySQLType("DATE (NEWDATE)", temporal.describe_date),
    F.DATETIME2: MySQLType("DATETIME", temporal.describe_clock, temporal.datetime2_reader,
                           temporal.datetime2_encoded_reader, temporal.datetime2_inline, frozenset({"datetime"}),
                           library_reads={"read_datetime2": temporal.library_read_datetime2}),
    F.DATETIME: MySQLType("DATETIME (before 5.6)", temporal.describe_clock,
                          library_reads={"read_datetime": temporal.library_read_datetime}),
    F.TIMESTAMP2: MySQLType("TIMESTAMP", temporal.describe_clock, temporal.timestamp2_reader, fixes=_TIMESTAMP_FIXES),
    F.TIMESTAMP: MySQLType("TIMESTAMP (before 5.6)", temporal.describe_clock, fixes=_TIMESTAMP_FIXES),
    F.TIME2: MySQLType("TIME", temporal.describe_clock, temporal.time2_reader,
                       library_reads={"read_time2": temporal.library_read_time2}),
    F.TIME: MySQLType("TIME (before 5.6)", temporal.describe_clock),
    F.YEAR: MySQLType("YEAR", temporal.describe_year, temporal.year_reader, fixes={"year": temporal.year_fix}),
    F.ENUM: MySQLType("ENUM", labels.describe_labels, labels.enum_reader, labels.enum_encoded_reader,
                      labels.enum_inline, frozenset({"enum"})),
    F.SET: MySQLType("SET", labels.describe_labels, labels.set_reader, fixes={"set": labels.set_fix}),
    F.VARCHAR: MySQLType("VARCHAR", strings.describe_string, strings.bytes_reader, strings.string_encoded_reader,
                         strings.string_inline, strings.ENCODED, _STRING_READS),
    F.VAR_STRING: MySQLType("VARCHAR (VAR_STRING)", strings.describe_string),
    F.STRING: MySQLType("CHAR", strings.describe_string, strings.bytes_reader, strings.string_encoded_reader,
                        strings.string_inline, strings.ENCODED_FIXED, _STRING_READS,
                        fixes={"binary": strings.binary_fix, **{kind: address_fix for kind in ADDRESS_SIZES}}),
    F.BLOB: MySQLType("BLOB", strings.describe_blob, strings.bytes_reader, strings.string_encoded_reader,
                      strings.string_inline, strings.ENCODED, _STRING_READS),
    F.JSON: MySQLType("JSON", strings.describe_json, json_binary.json_reader),  # MySQL 8's binary JSON
    F.GEOMETRY: MySQLType("GEOMETRY", strings.describe_geometry, strings.bytes_reader),
}


def _fixes_by_data_type() -> dict[str, Callable[[Column], Fix]]:
    found: dict[str, Callable[[Column], Fix]] = {}
    for mysql_type in MYSQL_TYPES.values():
        for data_type, make in mysql_type.fixes.items():
            if found.setdefault(data_type, make) is not make:
                raise AssertionError(f"two fixes of the library's {data_type} values")
    return found


_FIXES = _fixes_by_data_type()  # a fix belongs to our data type: the schema history has no binlog type


def reader_for(column: Any) -> Reader | None:
    """A reader of the Python value of one table-map column (library Column), or None if only the library reads it."""
    mysql_type = MYSQL_TYPES.get(column.type)
    return mysql_type.read(column) if mysql_type is not None and mysql_type.read is not None else None


def encoded_reader_for(column: Any, ours: Column) -> Reader | None:
    """A reader of the change-log value of one column (library table-map Column + our Column), or None.

    None for the types cdc.values encodes from a Python value (FLOAT, TIME, TIMESTAMP, SET, BIT, YEAR...):
    the caller composes reader_for() with fix_for() and the encoder for those.
    """
    mysql_type = MYSQL_TYPES.get(column.type)
    if mysql_type is None or mysql_type.read_encoded is None or ours.data_type not in mysql_type.encodes:
        return None
    return mysql_type.read_encoded(column, ours)


def inline_for(column: Any, ours: Column) -> Inline | None:
    """The inlined read of encoded_reader_for(column, ours), or None (the compiled reader calls the column's reader)."""
    mysql_type = MYSQL_TYPES.get(column.type)
    if mysql_type is None or mysql_type.inline is None or ours.data_type not in mysql_type.encodes:
        return None
    return mysql_type.inline(column, ours)


def fix_for(column: Column) -> Fix | None:
    """The fix of the library's (or reader_for's) value of our column before cdc.values encodes it, or None."""
    make = _FIXES.get(column.data_type)
    return make(column) if make is not None else None


def library_reads() -> dict[str, Callable[..., Any]]:
    """Our overrides of the library's private readers, by method name (_RowsEvent__read_date...)."""
    found: dict[str, Callable[..., Any]] = {}
    for mysql_type in MYSQL_TYPES.values():
        for name, read in mysql_type.library_reads.items():
            if found.setdefault(f"_RowsEvent__{name}", read) is not read:
                raise AssertionError(f"two overrides of the library's {name}")
    return found
