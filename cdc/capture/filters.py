"""Which tables tail captures, and which columns it drops or hashes (PII) before anything reaches disk."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from cdc.config import MySQLSettings
from cdc.errors import UsageError
from cdc.masking import ColumnRules, HashKey
from cdc.source.tables import is_captured


@dataclass(frozen=True)
class Filters:
    """Table globs (db.table, fnmatch syntax, case-sensitive like the server on Linux) and column rules."""

    databases: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    exclude_tables: tuple[str, ...] = ()
    exclude_columns: tuple[str, ...] = ()
    hash_columns: tuple[str, ...] = ()
    hash_key: HashKey | None = field(default=None, compare=False, repr=False)
    _cache: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False, repr=False)
    # Tables a running capture was asked to add (`cdc snapshot --add-table`, cdc.capture.windows): captured too.
    added: set[tuple[str, str]] = field(default_factory=set, compare=False, repr=False)

    def __post_init__(self) -> None:
        for spec in self.tables + self.exclude_tables:
            if "." not in spec:
                raise UsageError(f"table filter {spec!r} is not DB.TABLE", hint="globs work: shop.*, *.orders")
        self.rules  # noqa: B018 - validates the column rules now, not at the first row

    def wants(self, db: str, table: str) -> bool:
        """True if changes of db.table are captured."""
        key = (db, table)
        if key in self.added:
            return True
        found = self._cache.get(key)
        if found is None:
            found = self._decide(db, table)
            self._cache[key] = found
        return found

    def _decide(self, db: str, table: str) -> bool:
        return is_captured(self.databases, self.tables, self.exclude_tables, db, table)

    @classmethod
    def from_settings(cls, mysql: MySQLSettings) -> Filters:
        """Every rule from the settings (flags > environment > cdc.toml), so all commands capture alike."""
        return cls(mysql.databases, mysql.tables, mysql.exclude_tables, mysql.exclude_columns,
                   mysql.hash_columns).keyed(mysql)

    def keyed(self, mysql: MySQLSettings) -> Filters:
        """These filters with the settings' hash key, unless they have one (hash_columns without one: refused)."""
        if not self.hash_columns or self.hash_key is not None:
            return self
        return replace(self, hash_key=self.rules.keyed(mysql).hash_key, _cache={})

    @cached_property  # built once: columns() runs for every new table map
    def rules(self) -> ColumnRules:
        return ColumnRules(self.exclude_columns, self.hash_columns, self.hash_key)

    def columns(self, db: str, table: str) -> tuple[frozenset[str], frozenset[str]]:
        """(excluded, hashed) column names of one table."""
        return self.rules.columns(db, table)
