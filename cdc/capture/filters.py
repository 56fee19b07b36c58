"""Which tables tail captures, and which columns it drops or hashes (PII) before anything reaches disk."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from cdc.config import MySQLSettings
from cdc.errors import UsageError
from cdc.state import StateDir, read_json, write_json_atomic

# Server-internal schemas: their changes are never application data.
SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def _split_column(spec: str, option: str) -> tuple[str, str, str]:
    parts = spec.split(".")
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"{option} {spec!r} is not DB.TABLE.COLUMN", hint=f"e.g. {option} shop.customers.email")
    return parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class Filters:
    """Table globs (db.table, fnmatch syntax, case-sensitive like the server on Linux) and column rules."""

    databases: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    exclude_tables: tuple[str, ...] = ()
    exclude_columns: tuple[str, ...] = ()
    hash_columns: tuple[str, ...] = ()
    _cache: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for spec in self.tables + self.exclude_tables:
            if "." not in spec:
                raise UsageError(f"table filter {spec!r} is not DB.TABLE", hint="globs work: shop.*, *.orders")
        excluded = {_split_column(s, "--exclude-columns") for s in self.exclude_columns}
        hashed = {_split_column(s, "--hash-columns") for s in self.hash_columns}
        if excluded & hashed:
            raise UsageError(f"columns both excluded and hashed: {sorted('.'.join(c) for c in excluded & hashed)}")

    def wants(self, db: str, table: str) -> bool:
        """True if changes of db.table are captured."""
        key = (db, table)
        found = self._cache.get(key)
        if found is None:
            found = self._decide(db, table)
            self._cache[key] = found
        return found

    def _decide(self, db: str, table: str) -> bool:
        if db in SYSTEM_DATABASES:
            return False
        if self.databases and not any(fnmatch.fnmatchcase(db, pattern) for pattern in self.databases):
            return False
        name = f"{db}.{table}"
        if self.tables and not any(fnmatch.fnmatchcase(name, pattern) for pattern in self.tables):
            return False
        return not any(fnmatch.fnmatchcase(name, pattern) for pattern in self.exclude_tables)

    def wants_database(self, db: str) -> bool:
        """For statements naming only a database (DROP DATABASE): could any table of it be captured?"""
        if db in SYSTEM_DATABASES:
            return False
        return not self.databases or any(fnmatch.fnmatchcase(db, pattern) for pattern in self.databases)

    @classmethod
    def from_settings(cls, mysql: MySQLSettings) -> Filters:
        """Every rule from the settings (flags > environment > cdc.toml), so all commands capture alike."""
        return cls(mysql.databases, mysql.tables, mysql.exclude_tables, mysql.exclude_columns, mysql.hash_columns)

    def columns(self, db: str, table: str) -> tuple[frozenset[str], frozenset[str]]:
        """(excluded, hashed) column names of one table."""
        excluded = {c for d, t, c in map(lambda s: _split_column(s, "--exclude-columns"), self.exclude_columns)
                    if fnmatch.fnmatchcase(db, d) and fnmatch.fnmatchcase(table, t)}
        hashed = {c for d, t, c in map(lambda s: _split_column(s, "--hash-columns"), self.hash_columns)
                  if fnmatch.fnmatchcase(db, d) and fnmatch.fnmatchcase(table, t)}
        return frozenset(excluded), frozenset(hashed)


RULES_FILE = "column-rules.json"
RULES_VERSION = 1


def bind_column_rules(state: StateDir, filters: Filters) -> None:
    """Record the column rules a state directory's change log is written with, or refuse other ones.

    Why: excluding or hashing a column is a promise that its clear value never reaches disk.
    If one run hashed `email` and the next (a restart without the flag, `cdc run`, snapshot)
    did not, the change log would mix hashed and clear values of one column: the PII leaks and
    the merged state is wrong. So the first capture fixes the rules; later ones must match.
    """
    wanted = {"version": RULES_VERSION, "exclude_columns": sorted(set(filters.exclude_columns)),
              "hash_columns": sorted(set(filters.hash_columns))}
    path = state.root / RULES_FILE
    known = read_json(path)
    if known is None:
        write_json_atomic(path, wanted)
        return
    if known != wanted:
        raise UsageError(
            f"state directory {state.root} was captured with exclude_columns={known.get('exclude_columns')} "
            f"hash_columns={known.get('hash_columns')}, but this run asks for "
            f"exclude_columns={wanted['exclude_columns']} hash_columns={wanted['hash_columns']}; "
            "the change log would mix clear and masked values of the same columns",
            hint="set the rules once in cdc.toml ([mysql] exclude_columns / hash_columns) so every command uses "
            f"them; to change them on purpose, start a new --state-dir and snapshot again (or remove {path} "
            "if lines already written may keep their old form)",
        )
