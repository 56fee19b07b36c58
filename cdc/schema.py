"""Per-table schema history (docs/formats.md): the columns and foreign keys of each table as of each position.

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

# 2: each version also records the table's foreign keys (`foreign_keys`) and the ones pointing at it from other
# tables (`referenced_by`). A version 1 file reads with both empty (unknown: cdc then derives no cascades for it).
# 3: each version also records `fills` (the value rows older than the version hold in each column it adds),
# `renamed` (new name -> old) and `resnapshot` (why those values cannot be known; issue #30). Versions 1 and 2
# read with none of them (columns added before were NULL in older rows, as cdc then merged them).
# Also in 3, optional: a version's `origin` (the table arrived under this name by RENAME TABLE from that name, or
# {} for a new table under a name an earlier table was renamed away from) and the document's `moved` (the
# position of the last RENAME TABLE that took the table away from this name). Absent in older files: no renames.
HISTORY_VERSION = 3
# ON DELETE / ON UPDATE rules under which InnoDB changes child rows itself (issue #24). RESTRICT and NO ACTION
# refuse the parent's change instead; SET DEFAULT is accepted by the parser but refused by InnoDB.
CASCADING_RULES = frozenset({"CASCADE", "SET NULL", "SET DEFAULT"})


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

# From MySQL 8.4 on (and in 9.x), foreign keys are enforced in the SQL layer and the rows a cascade changes are
# written to the binlog like any other row change (the brief of issue #24); InnoDB's own cascades (MariaDB, MySQL
# before 8.4) write none. Aurora MySQL 3 is 8.0-based. Anything that is not MySQL-family 8.4+ counts as silent.
CASCADES_LOGGED_FROM = (8, 4)


def cascades_in_binlog(flavour: str, version: str) -> bool:
    """Whether this server writes the child rows its foreign-key cascades change as row events."""
    if "mariadb" in flavour.lower() or "mariadb" in version.lower():
        return False
    match = re.match(r"(\d+)\.(\d+)", version)
    return match is not None and (int(match[1]), int(match[2])) >= CASCADES_LOGGED_FROM


@dataclass(frozen=True)
class ForeignKey:
    """One foreign key: child `db.table(columns)` references `ref_db.ref_table(ref_columns)`.

    Rules as information_schema.REFERENTIAL_CONSTRAINTS spells them: CASCADE, SET NULL, SET DEFAULT,
    RESTRICT, NO ACTION.
    """

    name: str
    db: str
    table: str
    columns: tuple[str, ...]
    ref_db: str
    ref_table: str
    ref_columns: tuple[str, ...]
    on_delete: str = "RESTRICT"
    on_update: str = "RESTRICT"

    @property
    def cascades(self) -> bool:
        """InnoDB changes child rows itself for this key (rows the binlog may not show)."""
        return self.on_delete in CASCADING_RULES or self.on_update in CASCADING_RULES

    @property
    def child(self) -> str:
        return f"{self.db}.{self.table}"

    @property
    def parent(self) -> str:
        return f"{self.ref_db}.{self.ref_table}"

    def describe(self) -> str:
        return (f"{self.child}({', '.join(self.columns)}) -> {self.parent}({', '.join(self.ref_columns)}) "
                f"ON DELETE {self.on_delete} ON UPDATE {self.on_update}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"columns": list(self.columns), "ref_columns": list(self.ref_columns)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ForeignKey:
        return cls(name=d["name"], db=d["db"], table=d["table"], columns=tuple(d["columns"]), ref_db=d["ref_db"],
                   ref_table=d["ref_table"], ref_columns=tuple(d["ref_columns"]),
                   on_delete=d.get("on_delete", "RESTRICT"), on_update=d.get("on_update", "RESTRICT"))


@dataclass(frozen=True)
class TableSchema:
    db: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    position: str = ""
    foreign_keys: tuple[ForeignKey, ...] = ()  # this table's own (it is the child), in constraint-name order
    referenced_by: tuple[ForeignKey, ...] = ()  # other tables' keys that reference this one (captured or not)
    # Column added by this version -> the value every row last written before it holds (change-log encoding,
    # docs/formats.md); an added column missing here holds NULL in those rows. Not part of the shape.
    fills: dict[str, Any] = field(default_factory=dict, compare=False)
    # Why the older rows' values of an added column cannot be known here (an ALTER-time default such as
    # CURRENT_TIMESTAMP or (uuid())): the table needs `cdc resnapshot`. None when they are known.
    resnapshot: str | None = field(default=None, compare=False)
    # New name -> old name of the columns this version renamed (RENAME COLUMN, CHANGE old new).
    renamed: dict[str, str] = field(default_factory=dict, compare=False)
    # Where the table this version starts came from: {"db", "table"} it was renamed from (RENAME TABLE), {} for a
    # new table under a name another table was renamed away from; None: the same table as the version before.
    origin: dict[str, str] | None = field(default=None, compare=False)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    def same_shape(self, other: TableSchema) -> bool:
        """Same columns and key (what decoding a row depends on)."""
        return self.columns == other.columns and self.same_key(other)

    def same_key(self, other: TableSchema) -> bool:
        """The same key columns, in any order: information_schema lists `PRIMARY KEY (b, a)` in the key's
        order, the binlog's table map in column order, and both are one key."""
        return sorted(self.primary_key) == sorted(other.primary_key)

    def same_version(self, other: TableSchema) -> bool:
        """Same shape and the same foreign keys both ways (what the history records a version for)."""
        return (self.same_shape(other) and self.foreign_keys == other.foreign_keys
                and self.referenced_by == other.referenced_by)

    def version_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "columns": [asdict(c) for c in self.columns],
            "primary_key": list(self.primary_key),
            "fills": dict(self.fills),
            "renamed": dict(self.renamed),
            "resnapshot": self.resnapshot,
            **({"origin": dict(self.origin)} if self.origin is not None else {}),
            "foreign_keys": [k.to_dict() for k in self.foreign_keys],
            "referenced_by": [k.to_dict() for k in self.referenced_by],
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
    _repaired: dict[tuple[str, str], str] = field(default_factory=dict)  # mark_repaired: the last re-read cut
    _legacy: set[tuple[str, str]] = field(default_factory=set)  # read from a version 1 file: foreign keys unknown
    _moved: dict[tuple[str, str], str] = field(default_factory=dict)  # record_move: last rename away from the name

    def path(self, db: str, table: str) -> Path:
        return self.directory / f"{_safe(db)}.{_safe(table)}.json"

    def own_versions(self, db: str, table: str) -> list[TableSchema]:
        """The versions recorded under this name, whichever table held it (the file's own list)."""
        key = (db, table)
        if key not in self._cache:
            self._cache[key] = self._load(db, table)
        return self._cache[key]

    def versions(self, db: str, table: str) -> list[TableSchema]:
        """The versions of the table that holds this name now, renames followed back (issue #30).

        From the last version that started a table under this name (`origin`): one renamed here brings the
        versions it had under its earlier names before the RENAME, relabelled with this name, so a row written
        under the old name is read, and its columns carried, exactly as one written under this name.
        """
        return [replace(v, db=db, table=table) if (v.db, v.table) != (db, table) else v
                for v in self._lineage(db, table)]

    def lineage(self, db: str, table: str) -> list[tuple[str, str, str, str | None]]:
        """(db, table, from, to) of each name the table had, oldest first: it held the name at positions >= from
        and < to (to None: still holds it). A table renamed twice has three entries."""
        found: list[tuple[str, str, str, str | None]] = []
        end: str | None = None
        name: tuple[str, str] | None = (db, table)
        while name is not None:
            own = [v for v in self.own_versions(*name) if end is None or v.position < end]
            start = next((i for i in range(len(own) - 1, -1, -1) if own[i].origin is not None), None)
            begin = own[start].position if start is not None else ""
            found.append((name[0], name[1], begin, end))
            origin = own[start].origin if start is not None else None
            name, end = ((origin["db"], origin["table"]), begin) if origin else (None, None)
        return found[::-1]

    def _lineage(self, db: str, table: str) -> list[TableSchema]:
        found: list[TableSchema] = []
        for name_db, name_table, begin, upto in self.lineage(db, table):
            found += [v for v in self.own_versions(name_db, name_table)
                      if v.position >= begin and (upto is None or v.position < upto)]
        return found

    def _load(self, db: str, table: str) -> list[TableSchema]:
        path = self.path(db, table)
        document = read_json(path)
        if document is None:
            return []
        if document.get("version", 0) > HISTORY_VERSION:
            raise PositionError(f"schema history {path} has a newer version than this cdc understands")
        if document.get("version", 0) < 2:
            self._legacy.add((db, table))
        try:
            versions = [
                TableSchema(
                    db=db,
                    table=table,
                    columns=tuple(Column.from_dict(c) for c in v["columns"]),
                    primary_key=tuple(v["primary_key"]),
                    position=v["position"],
                    foreign_keys=tuple(ForeignKey.from_dict(k) for k in v.get("foreign_keys", ())),
                    referenced_by=tuple(ForeignKey.from_dict(k) for k in v.get("referenced_by", ())),
                    fills=dict(v.get("fills") or {}),  # versions 1 and 2: none recorded
                    resnapshot=v.get("resnapshot"),
                    renamed=dict(v.get("renamed") or {}),
                    origin=dict(v["origin"]) if v.get("origin") is not None else None,
                )
                for v in document["history"]
            ]
            if moved := document.get("moved"):
                self._moved[(db, table)] = str(moved)
            if repaired := document.get("repaired"):
                self._repaired[(db, table)] = str(repaired)
            if note := document.get("pending"):
                self._pending[(db, table)] = TableSchema(db, table, (), (), note["position"], fills=dict(note["fills"]),
                                                         resnapshot=note.get("resnapshot"),
                                                         renamed=dict(note.get("renamed") or {}))
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

    def knows_foreign_keys(self, db: str, table: str) -> bool:
        """False while the table's history is a version 1 file (written before foreign keys were recorded)."""
        self.own_versions(db, table)
        return (db, table) not in self._legacy

    def latest(self, db: str, table: str) -> TableSchema | None:
        versions = self.own_versions(db, table)
        return versions[-1] if versions else None

    def record(self, schema: TableSchema) -> bool:
        """Append a version if the shape changed; idempotent for a replayed position. True if written."""
        if self.mask is not None:
            raise RuntimeError("a masked schema history is read-only")
        versions = list(self.own_versions(schema.db, schema.table))
        # A replay after a crash may record the same version again: drop anything at or after it.
        versions = [v for v in versions if v.position < schema.position]
        moved = self._moved.get((schema.db, schema.table), "")
        if versions and moved > versions[-1].position and schema.origin is None:
            schema = replace(schema, origin={})  # a new table under a name an earlier one was renamed away from
        if versions and versions[-1].same_version(schema) and schema.origin is None:
            if len(versions) == len(self.own_versions(schema.db, schema.table)):
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
            if noted is not None and added:  # a version adding nothing (foreign keys only) leaves the note
                self._pending.pop((schema.db, schema.table))
        self._write(schema.db, schema.table, versions)
        return True

    def note_pending(self, db: str, table: str, position: str, fills: dict[str, Any], renamed: dict[str, str],
                     resnapshot: str | None) -> None:
        """Keep what an ALTER at `position` says about added columns until the table's next version is recorded.

        For an ALTER whose resulting shape could not be read at its position (information_schema already shows
        a later change): the next table map gives the shape, this note the fills.
        """
        self.own_versions(db, table)
        self._pending[(db, table)] = TableSchema(db, table, (), (), position, fills=fills, resnapshot=resnapshot,
                                                 renamed=renamed)
        self._write(db, table, list(self.own_versions(db, table)))

    def record_move(self, db: str, table: str, new_db: str, new_table: str, position: str) -> bool:
        """RENAME TABLE db.table TO new_db.new_table at `position`: the table goes on under the new name.

        The new name gets the table's latest version at the RENAME's position (its `origin` says where it came
        from), so its history follows on from the old one; the old name is marked moved away (`tables` leaves
        it out until a table is created under it again). Idempotent for a replayed position. True if written.
        """
        if self.mask is not None:
            raise RuntimeError("a masked schema history is read-only")
        latest = self.latest(db, table)
        if latest is not None and self._moved.get((db, table), "") < position:
            self._moved[(db, table)] = position
            self._write(db, table, list(self.own_versions(db, table)))
        if latest is None or (latest.db, latest.table) == (new_db, new_table):
            return False
        return self.record(replace(latest, db=new_db, table=new_table, position=position, fills={}, renamed={},
                                   resnapshot=None, origin={"db": db, "table": table}))

    def is_moved_away(self, db: str, table: str) -> bool:
        """The last table under this name was renamed away, and no table was created under it since."""
        latest = self.latest(db, table)
        return latest is not None and self._moved.get((db, table), "") > latest.position

    def _write(self, db: str, table: str, versions: list[TableSchema]) -> None:
        document = {
            "version": HISTORY_VERSION,
            "db": db,
            "table": table,
            "history": [v.version_dict() for v in versions],
        }
        if (repaired := self._repaired.get((db, table))) is not None:
            document["repaired"] = repaired
        if (moved := self._moved.get((db, table))) is not None:
            document["moved"] = moved
        if (note := self._pending.get((db, table))) is not None:
            document["pending"] = {"position": note.position, "fills": note.fills, "renamed": note.renamed,
                                   "resnapshot": note.resnapshot}
        write_json_atomic(self.path(db, table), document)
        self._cache[(db, table)] = versions
        self._legacy.discard((db, table))

    def resnapshot_reason(self, db: str, table: str) -> str | None:
        """Why the table's older rows cannot be reproduced from the binlog (an ALTER-time default), if they cannot.

        A flag is answered by a `cdc resnapshot` of the table that started reading after its ALTER (mark_repaired).
        """
        versions = self.own_versions(db, table)
        repaired = self._repaired.get((db, table), "")
        reasons = [f"{v.resnapshot} (ALTER at {v.position})" for v in versions if v.resnapshot and v.position > repaired]
        return "; ".join(reasons) or None

    def mark_repaired(self, db: str, table: str, cut: str) -> None:
        """A re-snapshot of the table read every row again after `cut` (tail at its end line): older flags are answered."""
        self.own_versions(db, table)
        if cut > self._repaired.get((db, table), ""):
            self._repaired[(db, table)] = cut
            self._write(db, table, list(self.own_versions(db, table)))

    def tables(self) -> list[tuple[str, str]]:
        """Every table with a history, except names a table was renamed away from (and none created under since)."""
        found = []
        for path in sorted(self.directory.glob("*.json")):
            document = read_json(path) or {}
            if "db" in document and "table" in document and not self.is_moved_away(document["db"], document["table"]):
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


_VARCHAR = re.compile(r"varchar\((\d+)\)", re.IGNORECASE)


def varchar_length(column: Column) -> int | None:
    """A VARCHAR's length in characters (None for any other type)."""
    match = _VARCHAR.match(column.type) if column.data_type == "varchar" else None
    return int(match[1]) if match else None
