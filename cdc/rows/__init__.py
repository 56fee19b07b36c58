"""The row decoder: binlog table maps -> our schema, row images -> change-log values.

Around one table of MySQL types (mysql_types.MYSQL_TYPES, by binlog column type): for each, how the table
map spells it, how a row image holds it, how it goes straight to its change-log value, and what we fix in
the library's reading of it. A type's code lives in the module of its family:
  integers, floats, decimals, temporal, strings, labels (ENUM, SET), bits   one type family each
  json_binary   MySQL 8's binary JSON -> the JSON text MySQL shows for it (fast path and library path alike)
  readers       the parts a type's handling is made of (Reader, Inline, Fix, ColumnType) and byte helpers
  table_map     a table-map event -> TableSchema (with information_schema hints for what the binlog lacks)
  images        a rows-event body -> Python values (ImageReader) or change-log values (EncodedImageReader)
  compiled      an EncodedImageReader compiled into one function per table map (tail's hot path)
  decode        RowDecoder: per table map, the fast path or the library's values + fixes + cdc.values
  exact_reads   our overrides of the library's value readers, mixed into its rows events
The binlog stream itself (connection, events, the library's rows events) is cdc.source's.
"""
