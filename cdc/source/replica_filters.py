"""A replica's replication filters: tables whose changes on the primary the replica never applies.

`replicate-do-db`, `replicate-ignore-db`, `replicate-do-table`, `replicate-ignore-table`,
`replicate-wild-do-table` and `replicate-wild-ignore-table` (start-up options; shown by SHOW REPLICA STATUS / SHOW
SLAVE STATUS) make a replica skip some of the primary's changes. The replica's binlog is then right about the
replica, and cdc copies it exactly; but the replica's copy of a filtered table is not the primary's (stale, or
never created), which nobody pointing cdc at a replica "to spare the primary" means to replicate. check-binlog
warns, naming the captured tables left out and the rule that does it.

Row-based events are filtered by their table's database and name, in MySQL's order (the replication filter
rules of its manual): the database options first (`do-db` when any is set, else `ignore-db`), then the table
options: a `do-table`, then an `ignore-table`, then a `wild-do-table`, then a `wild-ignore-table` match decides;
with no match, a table is skipped only if some `do-table` / `wild-do-table` is set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import pymysql

from cdc.source.replica_updates import replica_status

FIELDS = ("Replicate_Do_DB", "Replicate_Ignore_DB", "Replicate_Do_Table", "Replicate_Ignore_Table",
          "Replicate_Wild_Do_Table", "Replicate_Wild_Ignore_Table")


@dataclass(frozen=True)
class ReplicaFilters:
    do_db: tuple[str, ...] = ()
    ignore_db: tuple[str, ...] = ()
    do_table: tuple[str, ...] = ()
    ignore_table: tuple[str, ...] = ()
    wild_do: tuple[str, ...] = ()
    wild_ignore: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return any((self.do_db, self.ignore_db, self.do_table, self.ignore_table, self.wild_do, self.wild_ignore))

    def rule_skipping(self, db: str, table: str) -> str | None:
        """The rule that makes the replica skip the primary's row changes of `db`.`table`, or None if it applies them."""
        if self.do_db and db not in self.do_db:
            return f"replicate_do_db={','.join(self.do_db)}"
        if not self.do_db and db in self.ignore_db:
            return f"replicate_ignore_db={db}"
        name = f"{db}.{table}"
        if name in self.do_table:
            return None
        if name in self.ignore_table:
            return f"replicate_ignore_table={name}"
        if any(_like(p).fullmatch(name) for p in self.wild_do):
            return None
        ignored = next((p for p in self.wild_ignore if _like(p).fullmatch(name)), None)
        if ignored is not None:
            return f"replicate_wild_ignore_table={ignored}"
        if self.do_table or self.wild_do:
            return f"replicate_do_table / replicate_wild_do_table ({','.join(self.do_table + self.wild_do)})"
        return None

    def describe(self) -> str:
        parts = [f"{label}={','.join(values)}" for label, values in zip(
            ("replicate_do_db", "replicate_ignore_db", "replicate_do_table", "replicate_ignore_table",
             "replicate_wild_do_table", "replicate_wild_ignore_table"),
            (self.do_db, self.ignore_db, self.do_table, self.ignore_table, self.wild_do, self.wild_ignore),
            strict=True) if values]
        return " ".join(parts) or "none"


def read_replica_filters(conn: pymysql.Connection) -> ReplicaFilters | None:
    """The filters of the server's replication (None: not a replica). A missing privilege raises (the caller's
    `_try` records it)."""
    row = replica_status(conn)
    return None if row is None else ReplicaFilters(*(_names(row.get(name)) for name in FIELDS))


def unreplicated(filters: ReplicaFilters, tables: Iterable[tuple[str, str]]) -> list[str]:
    """`db.table (rule)` of each of `tables` the replica does not apply the primary's changes to."""
    return [f"{db}.{table} ({rule})" for db, table in tables
            if (rule := filters.rule_skipping(db, table)) is not None]


def _names(value: object) -> tuple[str, ...]:
    text = value.decode() if isinstance(value, bytes) else str(value or "")
    return tuple(n.strip() for n in text.split(",") if n.strip())


@cache
def _like(pattern: str) -> re.Pattern[str]:
    """A LIKE pattern (`%`, `_`, `\\` escapes) as a regular expression."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.S)
