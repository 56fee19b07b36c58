"""From a binlog table map to our schema: the truth about a table at its position.

The table map (binlog_row_metadata=FULL) gives column names, types, charsets, enum/set labels and the
primary key. information_schema (today's schema) is only consulted for what the binlog does not say:
MariaDB's JSON flag (LONGTEXT + json_valid) and the exact COLUMN_TYPE spelling, and only for a column
whose binlog shape matches it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cdc.errors import DataError
from cdc.rows.addresses import SIZES as ADDRESS_SIZES
from cdc.rows.integers import DISPLAY_WIDTHS
from cdc.rows.mysql_types import MYSQL_TYPES
from cdc.schema import Column, TableSchema
from cdc.values import SPATIAL_TYPES


def _charset(lib_column: Any) -> str | None:
    collation = getattr(lib_column, "collation_name", None)
    if not collation:
        return None
    return "binary" if collation == "binary" else collation.split("_", 1)[0]


def column_from_map(lib_column: Any, nullable: bool) -> Column:
    """Our Column for one table-map column, spelled like information_schema.COLUMNS.COLUMN_TYPE."""
    mysql_type = MYSQL_TYPES.get(lib_column.type)
    if mysql_type is None:
        raise DataError(f"column {lib_column.name!r}: binlog column type {lib_column.type} is not supported")
    described = mysql_type.describe(lib_column, _charset(lib_column))
    return Column(name=lib_column.name, type=described.type, data_type=described.data_type,
                  unsigned=bool(lib_column.unsigned), nullable=nullable, charset=described.charset, **described.extra)


def schema_from_map(table_map: Any, db: str, table: str, position: str, hints: list[TableSchema]) -> TableSchema:
    """The table's schema at `position` from its table-map event (library TableMapEvent)."""
    names = [c.name for c in table_map.columns]
    if any(not n for n in names):
        raise DataError(
            f"table map of {db}.{table} at {position} has no column names",
            hint="SET GLOBAL binlog_row_metadata = FULL (MySQL 8.0.1+/MariaDB 10.5+), then restart tail",
        )
    bitmask = bytes(table_map.null_bitmask)
    columns = []
    for i, lib_column in enumerate(table_map.columns):
        nullable = bool(bitmask[i // 8] & (1 << (i % 8)))
        derived = column_from_map(lib_column, nullable)
        columns.append(_borrow(derived, hints))
    primary_key = tuple(c.name for c in table_map.columns if c.is_primary)
    return TableSchema(db, table, tuple(columns), primary_key, position)


def _borrow(derived: Column, hints: list[TableSchema]) -> Column:
    """Use a hint's column (exact COLUMN_TYPE, JSON flag) when its shape agrees with the binlog's."""
    for hint in hints:
        try:
            known = hint.column(derived.name)
        except KeyError:
            continue
        if known.data_type == "json" and derived.data_type == "longtext":
            return replace(known, nullable=derived.nullable)
        if known.data_type in ADDRESS_SIZES and derived.type == f"binary({ADDRESS_SIZES[known.data_type]})":
            return replace(known, nullable=derived.nullable)  # MariaDB's INET4/INET6/UUID: bytes in the binlog
        # Integer display widths are not in the binlog (int(5) vs int(11)); every other type string is.
        same_type = known.type == derived.type or (derived.data_type == "geometry" and known.data_type in SPATIAL_TYPES) or (
            derived.data_type in DISPLAY_WIDTHS and (known.data_type, known.unsigned) == (derived.data_type, derived.unsigned))
        if same_type and (known.charset, known.nullable) == (derived.charset, derived.nullable):
            return known
    return derived
