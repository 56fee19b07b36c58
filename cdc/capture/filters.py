"""Which tables tail captures, and which columns it drops or hashes (PII) before anything reaches disk."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from cdc.errors import UsageError

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

    def columns(self, db: str, table: str) -> tuple[frozenset[str], frozenset[str]]:
        """(excluded, hashed) column names of one table."""
        excluded = {c for d, t, c in map(lambda s: _split_column(s, "--exclude-columns"), self.exclude_columns)
                    if fnmatch.fnmatchcase(db, d) and fnmatch.fnmatchcase(table, t)}
        hashed = {c for d, t, c in map(lambda s: _split_column(s, "--hash-columns"), self.hash_columns)
                  if fnmatch.fnmatchcase(db, d) and fnmatch.fnmatchcase(table, t)}
        return frozenset(excluded), frozenset(hashed)
