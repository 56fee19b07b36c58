"""From a rows event to change-log images: the per-table decode state, built once per table map.

Full images of a table whose every column has a reader (cdc.rows.mysql_types) are read straight from the
event's bytes by a reader compiled for the table (cdc.rows.compiled); anything else goes through the
library's values, fixed per type where the library decodes them wrongly (the same table's `fixes`: YEAR
0000 arrives as 1900, TIMESTAMP 0000-00-00 as 1970-01-01 00:00:00, an empty SET as None, BINARY(n)
without its trailing 0x00 padding), then cdc.values' encoder. Zero dates, negative TIME fractions and
string charsets are read right by our overrides of the library's readers (cdc.rows.exact_reads).
"""

from __future__ import annotations

from typing import Any

from cdc.errors import ConfigError, DataError
from cdc.masking import HashKey, hash_value
from cdc.rows.compiled import CompiledImageReader
from cdc.rows.images import EncodedImageReader
from cdc.rows.mysql_types import encoded_reader_for, fix_for, inline_for, reader_for
from cdc.rows.native import NativeRows, native_rows
from cdc.rows.readers import Inline, Reader
from cdc.schema import Column, TableSchema
from cdc.values import encoder_for

# What the fast path raises on a value it cannot encode: the library path then names the column and the row.
FAST_PATH_ERRORS = (DataError, ValueError, TypeError, UnicodeDecodeError, OverflowError, IndexError)


class RowDecoder:
    """Per-table decode state, built once per table map: column fixes, encoders, exclusions, hashes."""

    def __init__(self, schema: TableSchema, exclude: frozenset[str] = frozenset(), hashed: frozenset[str] = frozenset(),
                 columns: list[Any] | None = None, hash_key: HashKey | None = None):
        if hashed and hash_key is None:
            raise ConfigError(f"{schema.db}.{schema.table}: columns {sorted(hashed)} are to be hashed, but no key was given")
        self.schema = schema
        self.exclude, self.hashed, self.hash_key = exclude, hashed, hash_key
        self.plan = [(c.name, encoder_for(c), fix_for(c), c.name in hashed) for c in schema.columns
                     if c.name not in exclude]
        self.key_names = sorted(schema.primary_key) or [c.name for c in schema.columns if c.name not in exclude]
        self._fast: EncodedImageReader | None | bool = False  # False: not built yet (needs the table map)
        self._native: NativeRows | None | bool = False  # the C decoder (cdc.rows.native), built with the fast reader
        self.columns = columns  # the table map's (library) columns, when given: the fast reader is built at once
        self._lib_columns = columns or []  # the same, also when they came with the first event
        if columns is not None:
            self._fast = fast_reader(columns, schema, exclude, hashed, hash_key)

    @property
    def has_fast_path(self) -> bool:
        """Full images of this table can be decoded from bytes alone (columns given, every type has a fast reader)."""
        return isinstance(self._fast, EncodedImageReader)

    @property
    def native(self) -> NativeRows | None:
        """The C decoder of this table's full images, or None (no fast path, or the extension is not there)."""
        if self._native is False:
            if not isinstance(self._fast, EncodedImageReader):
                return None
            self._native = native_rows(self._lib_columns, self.schema, self._fast.plan, self.hashed, self.key_names)
        return self._native  # type: ignore[return-value]

    def native_body(self, event: Any) -> tuple[NativeRows, bytes] | None:
        """(the C decoder, the event's full-image body) when the C decoder can read this event (cdc.source.binlog's)."""
        self._fast_reader(event)
        native = self.native
        body = event.row_bytes() if native is not None else None
        return None if native is None or body is None else (native, body)

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
            out[name] = hash_value(encode(value), self.hash_key) if hashed and self.hash_key else encode(value)
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
            columns = self._lib_columns = event.table_map[event.table_id].columns
            self._fast = fast_reader(columns, self.schema, self.exclude, self.hashed, self.hash_key)
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


def fast_reader(lib_columns: list[Any], schema: TableSchema, exclude: frozenset[str],
                hashed: frozenset[str], hash_key: HashKey | None = None) -> EncodedImageReader | None:
    """The fast reader of this table's full images, or None if a column type has no fast reader."""
    if len(lib_columns) != len(schema.columns):
        return None
    plan: list[tuple[str | None, Reader]] = []
    inlines: list[Inline | None] = []
    for lib_column, column in zip(lib_columns, schema.columns, strict=True):
        read = _column_reader(lib_column, column)
        if read is None:
            return None
        if column.name in hashed and hash_key is not None:
            read = _hashing(read, hash_key)
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
    encode, fix = encoder_for(column), fix_for(column)

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        value, pos = plain(buf, pos)
        return encode(value if fix is None else fix(value, None)), pos

    return read


def _hashing(read: Reader, key: HashKey) -> Reader:
    def hashed(buf: Any, pos: int) -> tuple[Any, int]:
        value, pos = read(buf, pos)
        return hash_value(value, key), pos

    return hashed
