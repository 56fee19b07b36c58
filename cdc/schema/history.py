"""The schema history files of one state directory (docs/formats.md): each table's versions, appended as they change.

Renames are followed back (a table renamed here brings its earlier versions), ALTER notes wait for the next
version, and a re-snapshot's cut answers the flags older versions raised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cdc.errors import PositionError
from cdc.schema.table import Column, ForeignKey, TableSchema
from cdc.state import read_json, write_json_atomic

# 2: each version also records the table's foreign keys (`foreign_keys`) and the ones pointing at it from other
# tables (`referenced_by`). A version 1 file reads with both empty (unknown: cdc then derives no cascades for it).
# 3: each version also records `fills` (the value rows older than the version hold in each column it adds),
# `renamed` (new name -> old) and `resnapshot` (why those values cannot be known; issue #30). Versions 1 and 2
# read with none of them (columns added before were NULL in older rows, as cdc then merged them).
# Also in 3, optional: a version's `origin` (the table arrived under this name by RENAME TABLE from that name, or
# {} for a new table under a name an earlier table was renamed away from) and the document's `moved` (the
# position of the last RENAME TABLE that took the table away from this name). Absent in older files: no renames.
# Also in 3, optional: the document's `flags`, [{"position", "reason"}]: DDL that changed the table's rows with no
# row event and no change of shape (partition maintenance, cdc.capture.partitions). Absent: none.
HISTORY_VERSION = 3


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
    _flags: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)  # flag: (position, reason)

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
            if flags := document.get("flags"):
                self._flags[(db, table)] = [(str(f["position"]), str(f["reason"])) for f in flags]
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
        if flags := self._flags.get((db, table)):
            document["flags"] = [{"position": position, "reason": reason} for position, reason in flags]
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
        raised = [(v.position, f"{v.resnapshot} (ALTER at {v.position})") for v in versions if v.resnapshot]
        raised += [(position, f"{reason} (at {position})") for position, reason in self._flags.get((db, table), [])]
        reasons = [reason for position, reason in sorted(raised) if position > repaired]
        return "; ".join(reasons) or None

    def flag(self, db: str, table: str, position: str, reason: str) -> None:
        """A statement at `position` changed the table's rows with no row event and no new shape: it needs a
        re-snapshot (answered as a version's flag is, by mark_repaired). One flag per reason, at its latest
        position (a re-snapshot must read after the last such change; the file stays small when they repeat).
        Idempotent for a replayed position."""
        if self.mask is not None:
            raise RuntimeError("a masked schema history is read-only")
        self.own_versions(db, table)
        flags = self._flags.setdefault((db, table), [])
        if any(r == reason and p >= position for p, r in flags):
            return
        flags[:] = [(p, r) for p, r in flags if r != reason] + [(position, reason)]
        self._write(db, table, list(self.own_versions(db, table)))

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
