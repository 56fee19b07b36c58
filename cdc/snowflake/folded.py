"""What snowflake-apply still needs of the batches whose folders `cdc prune` removed: their tables' schema positions.

A `--follow` run seals a batch per busy cycle (tens of thousands a day). Once one is applied and its data files
are pruned, only its manifest is left, and only apply's schema evolution reads it: for a table in a new batch, it
asks for the table's schema position in the last batch before that had it (under a name the table had then, for
the positions it had it: cdc.schema.history lineage). Kept as folders, the manifests made every apply pass list
and hold (in a kept Applier's memory) every batch ever sealed. Schema positions change only with DDL, so keeping,
for each table name and schema position, the last batch that had it gives the same answer from a file whose size
follows the DDL, not the batches: `<state>/batches/folded.json`.

`through` is the newest batch folded. Written (fsynced) before the folders go, it also tells apply that a target
lacking that batch lacks history that is no longer on disk (cdc.snowflake.sealed.refuse_folded), as
batches/pruned.json does for data files, and that a folder still there up to it (a prune stopped before it went)
holds a batch applied before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc.errors import PositionError
from cdc.state import StateDir, read_json, write_json_atomic

FOLDED = "folded.json"
VERSION = 1

Held = tuple[str, str, str | None]  # a table name, and the schema positions [start, end) the table had it for


@dataclass
class Folded:
    through: str | None = None  # the newest batch folded (None: none)
    tables: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> {schema position: last batch}

    def add(self, batch_id: str, manifest: dict[str, Any]) -> None:
        """Fold one batch's manifest in (again is harmless: a prune killed before the folders went folds them
        again)."""
        for name, spec in (manifest.get("tables") or {}).items():
            position = str((spec or {}).get("schema_position") or "")
            if position:
                seen = self.tables.setdefault(name, {})
                seen[position] = max(batch_id, seen.get(position, batch_id))
        self.through = max(batch_id, self.through or batch_id)

    def position(self, held: Sequence[Held], before: str) -> str | None:
        """The schema position of the last folded batch that had the table (as `held` says), as a look-back over
        the manifests themselves would find it, for a batch `before` after every folded one (a folded batch's
        folder is gone: it is never applied again). A table's schema positions only grow from batch to batch
        (under one name too: a name given up and reused comes with later positions), so the last batch of each
        position is all the look-back needs."""
        best: tuple[str, int, str] | None = None
        for rank, (name, start, end) in enumerate(held):
            for position, batch in self.tables.get(name, {}).items():
                if batch < before and position >= start and (end is None or position < end):
                    candidate = (batch, -rank, position)  # the newest batch; in one batch, the first name held
                    best = candidate if best is None or candidate > best else best
        return best[2] if best is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "through": self.through, "tables": self.tables}


def read_folded(state: StateDir) -> Folded:
    path = state.batches / FOLDED
    document = read_json(path)
    if document is None:
        return Folded()
    through, tables = document.get("through"), document.get("tables")
    if document.get("version") != VERSION or not (through is None or isinstance(through, str)) or \
            not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise PositionError(f"{path} is corrupt or of another cdc version (\"through\", \"tables\")",
                            hint="restore it from a backup; cdc prune writes it before it removes batch folders")
    return Folded(through, {str(k): {str(p): str(b) for p, b in v.items()} for k, v in tables.items()})


def fold(state: StateDir, manifests: Iterable[tuple[str, dict[str, Any]]]) -> Folded:
    """Fold the manifests (batch id, manifest) into folded.json, written (fsynced) before their folders may go."""
    folded = read_folded(state)
    for batch_id, manifest in manifests:
        folded.add(batch_id, manifest)
    write_json_atomic(state.batches / FOLDED, folded.to_dict())
    return folded


def look_back(manifests: Sequence[Any], folded: Folded, held: Sequence[Held], before: str) -> str | None:
    """The table's schema position in the last batch before `before` that had it: in the kept manifests (Batch,
    in id order), else in what was folded (always older than every kept one)."""
    for earlier in reversed(manifests):
        if earlier.batch_id >= before:
            continue
        for name, start, end in held:
            found = str((earlier.manifest.get("tables", {}).get(name) or {}).get("schema_position") or "")
            if found and found >= start and (end is None or found < end):
                return found
    return folded.position(held, before)

