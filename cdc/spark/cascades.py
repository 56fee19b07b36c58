"""Foreign-key cascades: the child-row changes InnoDB makes itself, derived as change events (issue #24).

InnoDB applies ON DELETE CASCADE / SET NULL and ON UPDATE CASCADE / SET NULL inside the storage engine, and
on MariaDB and MySQL before 8.4 it writes no row event for the child rows it changes
(https://dev.mysql.com/doc/refman/8.0/en/innodb-and-mysql-replication.html, "cascading actions"). A pipeline
that only replays row events leaves those child rows behind in the lake and in Snowflake.

Design: the merge derives the missing events before compaction and adds them to the run's events, each at
the position of the parent change that caused it plus a sub-order (`<parent position>:k<n>`, which sorts
after the parent's position and before the next real event). Compaction (last change per key by position),
the lake and the Snowflake batches then need nothing special: a derived delete or update is a change like
any other, and a later real change of the same child row (the same transaction re-inserting it, say) wins
because its position is later. The alternatives were worse: cascading inside the compaction would tie every
table's compaction to its parents' (one table is compacted at a time), and patching the lake after the fact
would leave the batch sent to Snowflake without the child changes.

A derived event needs the child row as it was at the parent's position: its lake row, replayed through the
child's own earlier changes in the run (and earlier derived ones). This module is that replay, pure Python
over rows whose values are canonical text (cascade_reads builds them with Spark: the text parses back to
the exact lake value). It runs over the parent changes that can cascade (deletes, and updates that change
a referenced key) in position order; each derived change is itself such a change of the child, so chains
(parent -> child -> grandchild) and self-referencing tables (employee -> manager) cascade through it
depth-first, as InnoDB does. The rows it needs are only the child rows whose foreign key holds a value a
parent change removed: it asks for them (`Need`), cascade_reads loads them (lake rows + every change of
those keys in the run), and the replay starts again, until it asks for nothing new (a fixed point).

Cost: nothing when no captured table has a cascading foreign key, or when no parent table has an update or
delete in the run (the scan counts them); otherwise one filter over the parent tables' lines, and work
proportional to the parent changes that cascade and the child rows they reach, on the driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from cdc.schema import ForeignKey, TableSchema

TableId = tuple[str, str]  # (db, table)
Row = dict[str, str | None]  # column name -> canonical text (cascade_reads) or None for NULL
Key = tuple[str | None, ...]
Need = tuple[TableId, tuple[str, ...], Key]  # child table, its foreign-key columns, a value they may hold

SUB_ORDER = ":k"  # a derived change's position: its parent change's position + SUB_ORDER + 6 digits
REPRODUCED_RULES = frozenset({"CASCADE", "SET NULL"})  # SET DEFAULT: InnoDB refuses such keys


@dataclass(frozen=True)
class Change:
    """One row change of one table, images in canonical text."""

    table: TableId
    position: str
    op: str  # c, u, d, r
    ts: str | None
    before: Row | None  # u, d
    after: Row | None  # c, u, r
    # False: run with foreign_key_checks=0, when InnoDB checks no constraint and runs no ON DELETE / ON UPDATE
    # action (https://mariadb.com/docs/reference/mdb/system-variables/foreign_key_checks): it applies, never cascades.
    fk_checks: bool = True

    def is_derived(self) -> bool:
        return SUB_ORDER in self.position


@dataclass
class Graph:
    """Which tables' changes cascade where: the foreign keys of the captured tables, as their histories say."""

    versions: dict[TableId, list[TableSchema]]  # every captured table's schema history
    children: dict[TableId, list[ForeignKey]] = field(default_factory=dict)  # parent -> cascading keys into it
    uncaptured: dict[TableId, list[ForeignKey]] = field(default_factory=dict)  # parent -> keys of other tables

    def __post_init__(self) -> None:
        for table, versions in sorted(self.versions.items()):
            for key in dict.fromkeys(k for v in versions for k in v.foreign_keys if _reproduced(k)):
                self.children.setdefault((key.ref_db, key.ref_table), []).append(key)
            for key in dict.fromkeys(k for v in versions for k in v.referenced_by if _reproduced(k)):
                if (key.db, key.table) not in self.versions:
                    self.uncaptured.setdefault(table, []).append(key)

    @property
    def parents(self) -> set[TableId]:
        return set(self.children) | set(self.uncaptured)

    def in_force(self, key: ForeignKey, position: str) -> bool:
        """The key existed at `position` (the child's schema version then lists it)."""
        found = None
        for version in self.versions.get((key.db, key.table), []):
            if version.position > position:
                break
            found = version
        return found is not None and key in found.foreign_keys

    def referenced_columns(self, parent: TableId) -> list[str]:
        keys = self.children.get(parent, []) + self.uncaptured.get(parent, [])
        return list(dict.fromkeys(c for k in keys for c in k.ref_columns))


def _reproduced(key: ForeignKey) -> bool:
    return key.on_delete in REPRODUCED_RULES or key.on_update in REPRODUCED_RULES


def primary_key(versions: list[TableSchema]) -> tuple[str, ...]:
    return versions[-1].primary_key if versions else ()


class Replay:
    """The run's changes of the rows loaded so far, replayed with the cascades InnoDB would have made."""

    def __init__(self, graph: Graph, keys: dict[TableId, tuple[str, ...]],
                 keyless: frozenset[TableId] = frozenset()) -> None:
        self.graph, self.keys = graph, keys
        # Tables without a key (a multiset, issue #24): their key is the whole row, and identical rows are
        # copies, counted; InnoDB cascades into every copy.
        self.keyless = keyless
        self.base: dict[TableId, dict[Key, Row]] = {}  # lake rows of the loaded keys
        self.copies: dict[TableId, dict[Key, int]] = {}  # keyless tables: lake copies of each loaded row
        self.changes: dict[tuple[TableId, str], Change] = {}  # real changes (a duplicated line counts once)
        self.loaded: dict[TableId, set[Key]] = {}  # keys whose lake row and every change are here
        self.needs_loaded: set[Need] = set()
        self.unreached: dict[str, int] = {}  # uncaptured key "db.table.name" -> parent changes that cascade into it

    def add_changes(self, changes: Iterable[Change]) -> None:
        for change in changes:
            self.changes.setdefault((change.table, change.position), change)

    def add_rows(self, table: TableId, keys: Iterable[Key], lake_rows: Iterable[Row]) -> None:
        """Keys now loaded: their lake rows (those it has) and, through add_changes, all their changes."""
        loaded = self.loaded.setdefault(table, set())
        fresh = set(keys) - loaded  # a keyless row loaded again must not count its copies twice
        loaded.update(keys)
        base = self.base.setdefault(table, {})
        copies = self.copies.setdefault(table, {})
        for row in lake_rows:
            key = self.key_of(table, row)
            if table not in self.keyless:
                base[key] = row
            elif key in fresh:
                base[key] = row
                copies[key] = copies.get(key, 0) + 1

    def key_of(self, table: TableId, row: Row) -> Key:
        return tuple(row.get(k) for k in self.keys[table])

    def run(self) -> tuple[list[Change], set[Need]]:
        """The derived changes, and the child rows still to load (when any: load them, run again)."""
        state = _State(self)
        derived: list[Change] = []
        missing: set[Need] = set()
        self.unreached = {}
        for change in sorted(self.changes.values(), key=lambda c: c.position):
            state.apply(change)
            if (change.op in ("u", "d") and change.fk_checks and change.table in self.graph.parents
                    and change.before is not None):
                counter = iter(range(1_000_000))
                after = change.after if change.op == "u" else None
                self._cascade(state, change.table, change.before, after, change, counter, derived, missing)
        return derived, missing

    def _cascade(self, state: _State, table: TableId, old: Row, new: Row | None, cause: Change,
                 counter: Iterator[int], derived: list[Change], missing: set[Need]) -> None:
        for key in self.graph.uncaptured.get(table, []):
            if _rule(key, old, new) is not None:
                name = f"{key.child}.{key.name}"
                self.unreached[name] = self.unreached.get(name, 0) + 1
        for key in self.graph.children.get(table, []):
            rule = _rule(key, old, new)
            if rule is None or not self.graph.in_force(key, cause.position):
                continue
            child = (key.db, key.table)
            need: Need = (child, key.columns, tuple(old.get(c) for c in key.ref_columns))
            if need not in self.needs_loaded:
                missing.add(need)
                continue
            for child_key in sorted(state.matching(child, key.columns, need[2]), key=_sortable):
                row = state.rows[child][child_key]
                if rule == "SET NULL":
                    after: Row | None = {**row, **{c: None for c in key.columns}}
                elif new is None:  # ON DELETE CASCADE
                    after = None
                else:  # ON UPDATE CASCADE: the child's columns take the parent's new values
                    after = {**row, **{c: new.get(r) for c, r in zip(key.columns, key.ref_columns, strict=True)}}
                for _ in range(state.count(child, child_key)):  # each copy of a keyless row is a row changed
                    position = f"{cause.position}{SUB_ORDER}{next(counter):06d}"
                    change = Change(child, position, "d" if after is None else "u", cause.ts, row, after)
                    derived.append(change)
                    state.apply(change)
                    self._cascade(state, child, row, after, cause, counter, derived, missing)


def _rule(key: ForeignKey, old: Row, new: Row | None) -> str | None:
    """The rule that fires for this parent change (None: the change leaves the referenced value alone)."""
    before = tuple(old.get(c) for c in key.ref_columns)
    if None in before:  # a NULL in the referenced columns matches no child row
        return None
    if new is not None and tuple(new.get(c) for c in key.ref_columns) == before:
        return None
    rule = key.on_delete if new is None else key.on_update
    return rule if rule in REPRODUCED_RULES else None


def _sortable(key: Key) -> tuple[tuple[bool, str], ...]:
    return tuple((v is not None, v or "") for v in key)


class _State:
    """The loaded rows of every table as the replay goes, with an index per foreign key it looks up."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.rows = {table: dict(rows) for table, rows in replay.base.items()}
        self.copies = {table: dict(copies) for table, copies in replay.copies.items()}  # keyless tables
        self._index: dict[tuple[TableId, tuple[str, ...]], dict[Key, set[Key]]] = {}

    def apply(self, change: Change) -> None:
        table, loaded = change.table, self.replay.loaded.get(change.table, set())
        if change.before is not None:
            old = self.replay.key_of(table, change.before)
            if old in loaded or change.is_derived():
                self._drop(table, old)
        if change.after is not None:
            new = self.replay.key_of(table, change.after)
            if new in loaded or change.is_derived():
                self._put(table, new, change.after)

    def count(self, table: TableId, key: Key) -> int:
        """Copies of the row held under `key`: 1 for a keyed table."""
        return self.copies.get(table, {}).get(key, 0) if table in self.replay.keyless else 1

    def matching(self, table: TableId, columns: tuple[str, ...], value: Key) -> set[Key]:
        index = self._index.get((table, columns))
        if index is None:
            index = self._index[(table, columns)] = {}
            for key, row in self.rows.get(table, {}).items():
                index.setdefault(tuple(row.get(c) for c in columns), set()).add(key)
        return set(index.get(value, ()))

    def _put(self, table: TableId, key: Key, row: Row) -> None:
        if table in self.replay.keyless:
            copies = self.copies.setdefault(table, {})
            copies[key] = copies.get(key, 0) + 1
            if copies[key] > 1:  # one more copy of a row already held
                return
        else:
            self._drop(table, key)
        self.rows.setdefault(table, {})[key] = row
        for (indexed, columns), index in self._index.items():
            if indexed == table:
                index.setdefault(tuple(row.get(c) for c in columns), set()).add(key)

    def _drop(self, table: TableId, key: Key) -> None:
        if table in self.replay.keyless:
            copies = self.copies.setdefault(table, {})
            copies[key] = copies.get(key, 0) - 1
            if copies[key] > 0:  # other copies of the row stay
                return
            copies.pop(key, None)
        row = self.rows.get(table, {}).pop(key, None)
        if row is None:
            return
        for (indexed, columns), index in self._index.items():
            if indexed == table:
                index.get(tuple(row.get(c) for c in columns), set()).discard(key)
