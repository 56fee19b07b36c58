"""Table id -> the decoder of its rows events, built at each table map (None: a table tail does not capture).

A table map comes before every rows event, mostly for a table id already known with the same columns: the
decoder is kept while (db, table, columns) stay the same, and rebuilt when a DDL may have changed them. The
watermark table's rows are re-snapshot marks (cdc.capture.windows), not change lines: its ids are kept apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc.capture.filters import Filters
from cdc.capture.schemas import SchemaRecorder
from cdc.capture.windows import Windows
from cdc.rows.decode import RowDecoder
from cdc.rows.table_map import schema_from_map
from cdc.source.binlog import Event


class Decoders:
    def __init__(self, filters: Filters, schemas: SchemaRecorder, windows: Windows,
                 forget: Callable[[RowDecoder], None]) -> None:
        self.filters, self.schemas, self.windows = filters, schemas, windows
        self._forget = forget  # a decoder dropped here is dropped by the decode workers too
        self._by_id: dict[int, tuple[Any, RowDecoder | None]] = {}
        self.marks: set[int] = set()  # table ids of the watermark table: its rows are marks, never change lines

    def get(self, table_id: int) -> tuple[Any, RowDecoder | None] | None:
        """(signature, decoder) of a table id seen in a table map, None if none was."""
        return self._by_id.get(table_id)

    def on_table_map(self, event: Event, position: str) -> None:
        raw = event.raw
        signature = tuple((c.name, c.type, c.unsigned, getattr(c, "collation_name", None)) for c in raw.columns)
        cached = self._by_id.get(raw.table_id)
        if cached is not None and cached[0] == (event.db, event.table, signature):
            return
        decoder = None
        self.marks.discard(raw.table_id)
        if self.windows.is_mark_table(event.db, event.table):
            decoder = self._mark_decoder(event, position)
            self.marks.add(raw.table_id)
        elif self.filters.wants(event.db or "", event.table or "") and not self.schemas.is_sequence(event):
            schema = self.schemas.at_table_map(event, position)
            self.filters.rules.check_key(schema)
            excluded, hashed = self.filters.columns(schema.db, schema.table)
            decoder = RowDecoder(schema, excluded, hashed, list(raw.columns), self.filters.hash_key)
        if cached is not None and cached[1] is not None:
            self._forget(cached[1])
        self._by_id[raw.table_id] = ((event.db, event.table, signature), decoder)

    def _mark_decoder(self, event: Event, position: str) -> RowDecoder:
        """The watermark table's decoder: never masked, never in the schema history (it is not captured)."""
        db, table = event.db or "", event.table or ""
        current = self.schemas.read_current(db, table)
        schema = schema_from_map(event.raw, db, table, position, [current] if current is not None else [])
        return RowDecoder(schema, frozenset(), frozenset(), list(event.raw.columns))

    def clear(self) -> None:
        """Forget every table id: after DDL, ids may be reused for the changed tables."""
        for _, decoder in self._by_id.values():
            if decoder is not None:
                self._forget(decoder)
        self._by_id.clear()
        self.marks.clear()

    def drop_table(self, db: str, table: str) -> None:
        """db.table was cached as not captured and is captured now: its next table map builds its decoder."""
        for table_id, (signature, decoder) in list(self._by_id.items()):
            if signature[:2] == (db, table):
                if decoder is not None:
                    self._forget(decoder)
                del self._by_id[table_id]
