"""Per-table schema history (docs/formats.md): the columns of each table as of each position.

Events are decoded with the schema in force at their position, never with today's
information_schema: after an ALTER, older events still have the old column list.
A pure model (plus its files in the state directory): reading a schema from the server is
cdc.source.schema_reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cdc.errors import PositionError
from cdc.state import read_json, write_json_atomic

# Version 2 adds, per version, `fills` (the value rows older than the version get in each column it adds) and
# `resnapshot` (why those values cannot be known). A version 1 file reads as versions without either.
HISTORY_VERSION = 2


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # COLUMN_TYPE as information_schema spells it, e.g. "decimal(18,4)", "int(10) unsigned"
    data_type: str  # base name in lower case, e.g. "decimal"
    unsigned: bool = False
    nullable: bool = True
    precision: int | None = None
    scale: int | None = None
    charset: str | None = None
    fsp: int | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Column:
        values = dict(d)
        for key in ("enum_values", "set_values"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass(frozen=True)
class TableSchema:
    db: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    position: str = ""
    # Column added by this version -> the value every row last written before it holds (change-log encoding,
    # docs/formats.md); an added column missing here holds NULL in those rows. Not part of the shape.
    fills: dict[str, Any] = field(default_factory=dict, compare=False)
    # Why the older rows' values of an added column cannot be known here (an ALTER-time default such as
    # CURRENT_TIMESTAMP or (uuid())): the table needs `cdc resnapshot`. None when they are known.
    resnapshot: str | None = field(default=None, compare=False)
    # New name -> old name of the columns this version renamed (RENAME COLUMN, CHANGE old new).
    renamed: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    def same_shape(self, other: TableSchema) -> bool:
        return self.columns == other.columns and self.primary_key == other.primary_key

    def version_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "columns": [asdict(c) for c in self.columns],
            "primary_key": list(self.primary_key),
            "fills": dict(self.fills),
            "renamed": dict(self.renamed),
            "resnapshot": self.resnapshot,
        }


@dataclass
class SchemaHistory:
    """Read and append the schema history files of one state directory."""

    directory: Path
    # Applied to every version read (cdc.masking.masked_history: what stages after capture see).
    # A masked history is read-only: recording through it would write the masked shape.
    mask: Callable[[TableSchema], TableSchema] | None = None
    _cache: dict[tuple[str, str], list[TableSchema]] = field(default_factory=dict)
    _pending: dict[tuple[str, str], TableSchema] = field(default_factory=dict)  # note_pending, per table

    def path(self, db: str, table: str) -> Path:
        return self.directory / f"{_safe(db)}.{_safe(table)}.json"

    def versions(self, db: str, table: str) -> list[TableSchema]:
        key = (db, table)
        if key not in self._cache:
            self._cache[key] = self._load(db, table)
        return self._cache[key]

    def _load(self, db: str, table: str) -> list[TableSchema]:
        path = self.path(db, table)
        document = read_json(path)
        if document is None:
            return []
        if document.get("version", 0) > HISTORY_VERSION:
            raise PositionError(f"schema history {path} has a newer version than this cdc understands")
        try:
            versions = [
                TableSchema(
                    db=db,
                    table=table,
                    columns=tuple(Column.from_dict(c) for c in v["columns"]),
                    primary_key=tuple(v["primary_key"]),
                    position=v["position"],
                    fills=dict(v.get("fills") or {}),  # version 1: none recorded
                    resnapshot=v.get("resnapshot"),
                    renamed=dict(v.get("renamed") or {}),
                )
                for v in document["history"]
            ]
            if note := document.get("pending"):
                self._pending[(db, table)] = TableSchema(db, table, (), (), note["position"], dict(note["fills"]),
                                                         note.get("resnapshot"), dict(note.get("renamed") or {}))
        except (KeyError, TypeError) as exc:
            raise PositionError(f"schema history {path} is corrupt ({exc})") from exc
        return versions if self.mask is None else [self.mask(v) for v in versions]

    def at(self, db: str, table: str, position: str) -> TableSchema | None:
        """The schema in force at `position` (the last version whose position <= it)."""
        found = None
        for version in self.versions(db, table):
            if version.position <= position:
                found = version
            else:
                break
        return found

    def latest(self, db: str, table: str) -> TableSchema | None:
        versions = self.versions(db, table)
        return versions[-1] if versions else None

    def record(self, schema: TableSchema) -> bool:
        """Append a version if the shape changed; idempotent for a replayed position. True if written."""
        if self.mask is not None:
            raise RuntimeError("a masked schema history is read-only")
        versions = list(self.versions(schema.db, schema.table))
        # A replay after a crash may record the same version again: drop anything at or after it.
        versions = [v for v in versions if v.position < schema.position]
        if versions and versions[-1].same_shape(schema):
            if len(versions) == len(self.versions(schema.db, schema.table)):
                return False
        else:
            added = set(schema.column_names) - set(versions[-1].column_names if versions else ())
            pending = self._pending.get((schema.db, schema.table))
            noted = pending if pending is not None and pending.position < schema.position else None
            fills = {**(noted.fills if noted else {}), **schema.fills}
            renamed = {**(noted.renamed if noted else {}), **schema.renamed}
            versions.append(replace(schema, fills={k: v for k, v in fills.items() if k in added},
                                    renamed={k: v for k, v in renamed.items() if k in added},
                                    resnapshot=schema.resnapshot or (noted.resnapshot if noted and added else None)))
            if noted is not None:
                self._pending.pop((schema.db, schema.table))
        self._write(schema.db, schema.table, versions)
        return True

    def note_pending(self, db: str, table: str, position: str, fills: dict[str, Any], renamed: dict[str, str],
                     resnapshot: str | None) -> None:
        """Keep what an ALTER at `position` says about added columns until the table's next version is recorded.

        For an ALTER whose resulting shape could not be read at its position (information_schema already shows
        a later change): the next table map gives the shape, this note the fills.
        """
        self.versions(db, table)
        self._pending[(db, table)] = TableSchema(db, table, (), (), position, fills, resnapshot, renamed)
        self._write(db, table, list(self.versions(db, table)))

    def _write(self, db: str, table: str, versions: list[TableSchema]) -> None:
        document = {
            "version": HISTORY_VERSION,
            "db": db,
            "table": table,
            "history": [v.version_dict() for v in versions],
        }
        if (note := self._pending.get((db, table))) is not None:
            document["pending"] = {"position": note.position, "fills": note.fills, "renamed": note.renamed,
                                   "resnapshot": note.resnapshot}
        write_json_atomic(self.path(db, table), document)
        self._cache[(db, table)] = versions

    def resnapshot_reason(self, db: str, table: str) -> str | None:
        """Why the table's older rows cannot be reproduced from the binlog (an ALTER-time default), if they cannot."""
        reasons = [f"{v.resnapshot} (ALTER at {v.position})" for v in self.versions(db, table) if v.resnapshot]
        return "; ".join(reasons) or None

    def tables(self) -> list[tuple[str, str]]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            document = read_json(path) or {}
            if "db" in document and "table" in document:
                found.append((document["db"], document["table"]))
        return found


def _safe(name: str) -> str:
    """File-name-safe, reversible-enough form of an identifier (hostile names stay distinct)."""
    return re.sub(r"[^A-Za-z0-9_$-]", lambda m: f"%{ord(m[0]):04x}", name)


_PAREN_LIST = re.compile(r"^(?:enum|set)\((.*)\)$", re.IGNORECASE | re.DOTALL)


def parse_labels(column_type: str) -> tuple[str, ...]:
    """Labels of enum('a','b''c') / set(...) as information_schema spells them."""
    match = _PAREN_LIST.match(column_type)
    if not match:
        return ()
    body = match[1]
    labels: list[str] = []
    current: list[str] = []
    i, inside = 0, False
    while i < len(body):
        ch = body[i]
        if not inside:
            if ch == "'":
                inside = True
                current = []
        elif ch == "'" and i + 1 < len(body) and body[i + 1] == "'":
            current.append("'")
            i += 1
        elif ch == "\\" and i + 1 < len(body):
            current.append(body[i + 1])
            i += 1
        elif ch == "'":
            inside = False
            labels.append("".join(current))
        else:
            current.append(ch)
        i += 1
    return tuple(labels)



@dataclass(frozen=True)
class Carried:
    """Where a column's value at one version comes from, for a row written under an earlier version."""

    source: str | None  # the column's name in the row's own version (renames followed); None: not carried over
    fill: Any = None  # else: the value the column's last (re-)add gave older rows (change-log encoding)
    added_at: str = ""  # the position of that add: rows written before it hold the fill


def carried(versions: list[TableSchema], name: str, since: str, upto: str) -> Carried:
    """What column `name` of the version at `upto` holds in a row written under the version in force at `since`.

    Walks back over every version in between, so a column dropped and added again takes the later add's fill,
    never the row's stale value, and a renamed column keeps the row's value under its old name.
    """
    chain = [v for v in versions if v.position <= upto]
    current = name
    for index in range(len(chain) - 1, -1, -1):
        version = chain[index]
        if version.position <= since:
            return Carried(current if current in version.column_names else None)
        previous = chain[index - 1] if index else None
        older = version.renamed.get(current, current)
        if previous is None or older not in previous.column_names:
            return Carried(None, version.fills.get(current), version.position)
        current = older
    return Carried(None)
