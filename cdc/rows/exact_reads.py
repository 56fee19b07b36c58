"""Overrides of python-mysql-replication's value readers that decode some values lossily.

Mixed into our rows events (cdc.source.binlog_rows), which the library's readers serve when a table's
events take the slow path (partial images, a type only the library reads): zero and partial-zero dates
come back as ZeroDate instead of None, negative TIME fractions keep their sign, and strings stay raw bytes
so cdc.values decodes them with the column's MySQL charset (latin1 is cp1252, not ISO-8859-1). Each
override lives with its type (cdc.rows.temporal, cdc.rows.strings) and is listed in cdc.rows.mysql_types.
"""

from __future__ import annotations

from typing import Any

from cdc.rows.mysql_types import library_reads


class ExactReads:
    """Overrides of the library's private readers (name-mangled as _RowsEvent__*), mixed into its rows events."""

    packet: Any
    table_map: Any
    table_id: int


# The library calls these as methods of its rows event (self.__read_date()): functions set on the class are.
for _name, _read in library_reads().items():
    setattr(ExactReads, _name, _read)
