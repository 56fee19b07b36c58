"""From a binlog table map to our schema, and from the library's decoded rows to change-log values.

The table map (binlog_row_metadata=FULL) is the truth about a table at its position: column names,
types, charsets, enum/set labels, primary key. information_schema (today's schema) is only consulted
for what the binlog does not say: MariaDB's JSON flag (LONGTEXT + json_valid) and the exact COLUMN_TYPE
spelling, and only for a column whose binlog shape matches it.

Fix-ups of values the library decodes wrongly, applied per column (built once per table map):
  - YEAR 0000 arrives as 1900 (the library adds 1900 to the stored byte; 1900 itself is not a valid YEAR);
  - TIMESTAMP 0000-00-00 arrives as 1970-01-01 00:00:00 (epoch 0, also not a valid TIMESTAMP);
  - an empty SET arrives as None (none_sources says "empty set");
  - BINARY(n) arrives without the trailing 0x00 padding a SELECT shows.
Zero dates, negative TIME fractions and string charsets are read right in cdc.source.binlog.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from collections.abc import Callable
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE

from cdc.errors import DataError
from cdc.masking import hash_value
from cdc.schema import Column, TableSchema
from cdc.rows.compiled import CompiledImageReader, Inline, inline_for
from cdc.rows.encoded_reads import EncodedImageReader, encoded_reader_for
from cdc.rows.images import Reader, reader_for
from cdc.values import SPATIAL_TYPES, encoder_for

_EPOCH = dt.datetime(1970, 1, 1)
# What the fast path raises on a value it cannot encode: the library path then names the column and the row.
FAST_PATH_ERRORS = (DataError, ValueError, TypeError, UnicodeDecodeError, OverflowError, IndexError)
_INT_NAMES = {FIELD_TYPE.TINY: "tinyint", FIELD_TYPE.SHORT: "smallint", FIELD_TYPE.INT24: "mediumint",
              FIELD_TYPE.LONG: "int", FIELD_TYPE.LONGLONG: "bigint"}
_INT_WIDTH = {"tinyint": (4, 3), "smallint": (6, 5), "mediumint": (9, 8), "int": (11, 10), "bigint": (20, 20)}
_BLOB_NAMES = {1: ("tinyblob", "tinytext"), 2: ("blob", "text"), 3: ("mediumblob", "mediumtext"),
               4: ("longblob", "longtext")}
_MBMAXLEN = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "big5": 2,
             "gbk": 2, "gb2312": 2, "gb18030": 4, "sjis": 2, "cp932": 2, "ujis": 3, "eucjpms": 3, "euckr": 2}


def _charset(lib_column: Any) -> str | None:
    collation = getattr(lib_column, "collation_name", None)
    if not collation:
        return None
    return "binary" if collation == "binary" else collation.split("_", 1)[0]


def column_from_map(lib_column: Any, nullable: bool) -> Column:
    """Our Column for one table-map column, spelled like information_schema.COLUMNS.COLUMN_TYPE."""
    t, name, unsigned = lib_column.type, lib_column.name, bool(lib_column.unsigned)
    charset = _charset(lib_column)
    is_binary = charset in (None, "binary")
    extra: dict[str, Any] = {}
    if t in _INT_NAMES:
        data_type = _INT_NAMES[t]
        type_ = f"{data_type}({_INT_WIDTH[data_type][unsigned]})" + (" unsigned" if unsigned else "")
        charset = None
    elif t == FIELD_TYPE.NEWDECIMAL:
        data_type, extra = "decimal", {"precision": lib_column.precision, "scale": lib_column.decimals}
        type_ = f"decimal({lib_column.precision},{lib_column.decimals})" + (" unsigned" if unsigned else "")
        charset = None
    elif t in (FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE):
        data_type = type_ = "float" if t == FIELD_TYPE.FLOAT else "double"
        type_ += " unsigned" if unsigned else ""
        charset = None
    elif t in (FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP2, FIELD_TYPE.TIME2, FIELD_TYPE.DATETIME,
               FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIME):
        data_type = {FIELD_TYPE.DATETIME2: "datetime", FIELD_TYPE.DATETIME: "datetime", FIELD_TYPE.TIME2: "time",
                     FIELD_TYPE.TIME: "time"}.get(t, "timestamp")
        fsp = getattr(lib_column, "fsp", 0) or 0
        type_, extra, charset = data_type + (f"({fsp})" if fsp else ""), {"fsp": fsp}, None
    elif t in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE, FIELD_TYPE.YEAR):
        data_type = "date" if t != FIELD_TYPE.YEAR else "year"
        type_, charset = data_type + ("(4)" if data_type == "year" else ""), None
    elif t == FIELD_TYPE.BIT:
        data_type, type_, charset = "bit", f"bit({lib_column.bits})", None
    elif t in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
        data_type = "enum" if t == FIELD_TYPE.ENUM else "set"
        labels = tuple(lib_column.enum_values[1:] if t == FIELD_TYPE.ENUM else lib_column.set_values or ())
        quoted = ",".join("'" + label.replace("'", "''") + "'" for label in labels)
        type_ = f"{data_type}({quoted})"
        extra = {"enum_values": labels} if t == FIELD_TYPE.ENUM else {"set_values": labels}
    elif t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING):
        base = ("var" if t != FIELD_TYPE.STRING else "") + ("binary" if is_binary else "char")
        length = lib_column.max_length // (1 if is_binary else _MBMAXLEN.get(charset or "", 1))
        data_type, type_ = base, f"{base}({length})"
        charset = None if is_binary else charset
    elif t == FIELD_TYPE.BLOB:
        data_type = _BLOB_NAMES[lib_column.length_size][0 if is_binary else 1]
        type_, charset = data_type, None if is_binary else charset
    elif t == FIELD_TYPE.JSON:
        data_type = type_ = "json"
        charset = None
    elif t == FIELD_TYPE.GEOMETRY:
        data_type = type_ = "geometry"
        charset = None
    else:
        raise DataError(f"column {name!r}: binlog column type {t} is not supported")
    return Column(name=name, type=type_, data_type=data_type, unsigned=unsigned, nullable=nullable,
                  charset=charset, **extra)


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
        # Integer display widths are not in the binlog (int(5) vs int(11)); every other type string is.
        same_type = known.type == derived.type or (derived.data_type == "geometry" and known.data_type in SPATIAL_TYPES) or (
            derived.data_type in _INT_WIDTH and (known.data_type, known.unsigned) == (derived.data_type, derived.unsigned))
        if same_type and (known.charset, known.nullable) == (derived.charset, derived.nullable):
            return known
    return derived


# --- rows -------------------------------------------------------------------------------------------------

Fix = Callable[[Any, str | None], Any]


def _fix_year(value: Any, source: str | None) -> Any:
    return 0 if value == 1900 else value


def _fix_timestamp(value: Any, source: str | None) -> Any:
    if value == _EPOCH:  # TIMESTAMP's range starts at 1970-01-01 00:00:01 UTC: epoch 0 is the zero value
        return "0000-00-00 00:00:00"
    return value


def _fix_set(value: Any, source: str | None) -> Any:
    if value is None and source == NONE_SOURCE.EMPTY_SET:
        return ()
    return value


def _fix_binary(length: int) -> Fix:
    def fix(value: Any, source: str | None) -> Any:
        return value.ljust(length, b"\x00") if isinstance(value, bytes) else value

    return fix


def _fix_for(column: Column) -> Fix | None:
    if column.data_type == "year":
        return _fix_year
    if column.data_type == "timestamp":
        return _fix_timestamp
    if column.data_type == "set":
        return _fix_set
    if column.data_type == "binary":
        return _fix_binary(int(column.type.split("(")[1].rstrip(")")) if "(" in column.type else 1)
    return None


class RowDecoder:
    """Per-table decode state, built once per table map: column fixes, encoders, exclusions, hashes."""

    def __init__(self, schema: TableSchema, exclude: frozenset[str] = frozenset(), hashed: frozenset[str] = frozenset(),
                 columns: list[Any] | None = None):
        self.schema = schema
        self.exclude, self.hashed = exclude, hashed
        self.plan = [(c.name, encoder_for(c), _fix_for(c), c.name in hashed) for c in schema.columns
                     if c.name not in exclude]
        self.key_names = sorted(schema.primary_key) or [c.name for c in schema.columns if c.name not in exclude]
        self._fast: EncodedImageReader | None | bool = False  # False: not built yet (needs the table map)
        self.columns = columns  # the table map's (library) columns, when given: the fast reader is built at once
        if columns is not None:
            self._fast = _encoded_image_reader(columns, schema, exclude, hashed)

    @property
    def has_fast_path(self) -> bool:
        """Full images of this table can be decoded from bytes alone (columns given, every type has a fast reader)."""
        return isinstance(self._fast, EncodedImageReader)

    def fast_images(self, body: bytes, op: str | None) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """images() from a full-image rows-event body alone (in a decode worker); raises where images() falls back."""
        assert isinstance(self._fast, EncodedImageReader), "fast_images needs a table with a fast reader"
        return _read_images(self._fast, body, op)

    def encode(self, values: dict[str, Any], none_sources: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, encode, fix, hashed in self.plan:
            value = values.get(name)
            if fix is not None:
                value = fix(value, none_sources.get(name))
            out[name] = hash_value(encode(value)) if hashed else encode(value)
        return out

    def key(self, row: dict[str, Any]) -> dict[str, Any]:
        return {name: row[name] for name in self.key_names}

    def images(self, event: Any, op: str | None) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """(before, after) change-log images of every row of a rows event (cdc.source.binlog's), in order.

        Full images of a table whose every column type has a fast reader are decoded straight from the
        event's bytes; anything else, and any value the fast path cannot encode, goes through the library's
        values and encode(), which raises the precise DataError.
        """
        fast = self._fast_reader(event)
        body = event.row_bytes() if fast is not None else None
        if fast is not None and body is not None:
            try:
                return _read_images(fast, body, op)
            except FAST_PATH_ERRORS:
                pass  # e.g. invalid UTF-8 in a text column: the slow path names the column and the row
        rows = []
        for index, row in enumerate(event.rows):
            try:
                rows.append(self._images(op, row))
            except DataError as exc:
                raise DataError(f"row {index}: {exc.message}", hint=exc.hint) from None
        return rows

    def _images(self, op: str | None, row: dict[str, Any]) -> tuple[Any, Any]:
        if op == "u":
            return (self.encode(row["before_values"], row["before_none_sources"]),
                    self.encode(row["after_values"], row["after_none_sources"]))
        image = self.encode(row["values"], row["none_sources"])
        return (None, image) if op == "c" else (image, None)

    def _fast_reader(self, event: Any) -> EncodedImageReader | None:
        if self._fast is False:
            columns = event.table_map[event.table_id].columns
            self._fast = _encoded_image_reader(columns, self.schema, self.exclude, self.hashed)
        return self._fast  # type: ignore[return-value]


def _read_images(fast: EncodedImageReader, body: bytes, op: str | None) -> list[tuple[Any, Any]]:
    rows: list[tuple[Any, Any]] = []
    append, image, pos, end = rows.append, fast.image, 0, len(body)
    if op == "u":
        while pos < end:
            before, pos = image(body, pos)
            after, pos = image(body, pos)
            append((before, after))
    elif op == "c":
        while pos < end:
            after, pos = image(body, pos)
            append((None, after))
    else:
        while pos < end:
            before, pos = image(body, pos)
            append((before, None))
    if pos != end:
        raise ValueError(f"row images end at byte {pos} of {end}")
    return rows


def _encoded_image_reader(lib_columns: list[Any], schema: TableSchema, exclude: frozenset[str],
                          hashed: frozenset[str]) -> EncodedImageReader | None:
    """The fast reader of this table's full images, or None if a column type has no fast reader."""
    if len(lib_columns) != len(schema.columns):
        return None
    plan: list[tuple[str | None, Reader]] = []
    inlines: list[Inline | None] = []
    for lib_column, column in zip(lib_columns, schema.columns):
        read = _column_reader(lib_column, column)
        if read is None:
            return None
        if column.name in hashed:
            read = _hashing(read)
        plan.append((None if column.name in exclude else column.name, read))
        inlines.append(None if column.name in hashed else inline_for(lib_column, column))
    return CompiledImageReader(plan, inlines)


def _column_reader(lib_column: Any, column: Column) -> Reader | None:
    direct = encoded_reader_for(lib_column, column)
    if direct is not None:
        return direct
    plain = reader_for(lib_column)
    if plain is None:
        return None
    encode, fix = encoder_for(column), _fix_for(column)

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        value, pos = plain(buf, pos)
        return encode(value if fix is None else fix(value, None)), pos

    return read


def _hashing(read: Reader) -> Reader:
    def hashed(buf: Any, pos: int) -> tuple[Any, int]:
        value, pos = read(buf, pos)
        return hash_value(value), pos

    return hashed
