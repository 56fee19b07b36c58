"""Column rules (exclude / hash a column) as every stage must see them.

Capture (snapshot, tail) applies the rules to values before anything reaches disk. The schema
history keeps the source's real column types, because tail needs them to decode binlog rows;
every stage downstream (spark-merge, Snowflake, verify) reads the history through `mask`, so an
excluded column does not exist for them and a hashed one is the 64-character hex string it holds
in the change log, whatever its type in MySQL.

The rules are fixed per state directory (`column-rules.json`, written by the first capture):
a restart that forgot a flag must not write clear values beside hashed ones.

Hashing is keyed (HMAC-SHA-256, #26): plain SHA-256 of an e-mail, a phone number or a national id is reversed
by brute force in minutes. The key comes from CDC_MYSQL_HASH_KEY or a 0600 key file (mysql.hash_key_file),
never from argv or cdc.toml; column-rules.json records its fingerprint, never the key, so a run with another
key is refused instead of mixing two keys' hashes in one change log.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from cdc.config import MySQLSettings
from cdc.errors import ConfigError, UsageError
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.state import StateDir, read_json, write_json_atomic

RULES_FILE = "column-rules.json"
RULES_VERSION = 2  # 2: hash_key_fingerprint (#26); a version 1 file hashed with plain SHA-256
HASHED_TYPE = "char(64)"  # HMAC-SHA-256 as lower-case hex
MIN_KEY_BYTES = 32  # 256 bits: as long as the HMAC's output, so the key is never the weak part
UNKEYED = "sha256 (no key)"  # what a version 1 file's hashes were
_FINGERPRINT_LABEL = b"cdc hash_columns key fingerprint"


@dataclass(frozen=True)
class HashKey:
    """The HMAC key of --hash-columns, and where it came from (for messages; the key itself is never shown)."""

    secret: bytes = field(repr=False)
    source: str

    @property
    def fingerprint(self) -> str:
        """Names the key without revealing it: an HMAC of a fixed label, truncated (the key is 256 random bits)."""
        return "hmac-sha256:" + hmac.new(self.secret, _FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:16]


def load_hash_key(mysql: MySQLSettings) -> HashKey | None:
    """The key from CDC_MYSQL_HASH_KEY or mysql.hash_key_file (one of them), or None if neither is set."""
    if mysql.hash_key and mysql.hash_key_file:
        raise ConfigError("both CDC_MYSQL_HASH_KEY and mysql.hash_key_file are set",
                          hint="keep one: two places for one key is how a wrong one gets used")
    if mysql.hash_key:
        return _checked(mysql.hash_key.encode("utf-8"), "environment CDC_MYSQL_HASH_KEY")
    if mysql.hash_key_file:
        return _checked(_read_key_file(mysql.hash_key_file), f"key file {mysql.hash_key_file}")
    return None


def _read_key_file(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            # fstat of the open file: the mode checked is that of the bytes read, not of a file swapped in between.
            mode = os.fstat(file.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise ConfigError(f"hash key file {path} is not a regular file")
            if mode & 0o077:
                raise ConfigError(f"hash key file {path} is readable or writable by others (mode {stat.S_IMODE(mode):04o})",
                                  hint=f"chmod 600 {path}")
            data = file.read()
    except OSError as exc:
        raise ConfigError(f"hash key file {path}: {exc.strerror}",
                          hint="check mysql.hash_key_file / CDC_MYSQL_HASH_KEY_FILE") from None
    return data.rstrip(b"\r\n")


def _checked(secret: bytes, source: str) -> HashKey:
    if len(secret) < MIN_KEY_BYTES:
        raise ConfigError(f"the hash key ({source}) is {len(secret)} bytes; at least {MIN_KEY_BYTES} are needed",
                          hint="make one with: openssl rand -hex 32")
    return HashKey(secret, source)


def _no_key_error() -> ConfigError:
    return ConfigError(
        "hash_columns needs a key: set CDC_MYSQL_HASH_KEY or mysql.hash_key_file (a 0600 file)",
        hint="make one with `openssl rand -hex 32` and keep it as you keep a password: a hash without a secret key "
        "is reversed by brute force (docs/config.md, column rules)")


def split_column(spec: str, option: str) -> tuple[str, str, str]:
    parts = spec.split(".")
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"{option} {spec!r} is not DB.TABLE.COLUMN", hint=f"e.g. {option} shop.customers.email")
    return parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class ColumnRules:
    """DB.TABLE.COLUMN globs (fnmatch, case-sensitive) of columns never written / written as sha256 hex."""

    exclude_columns: tuple[str, ...] = ()
    hash_columns: tuple[str, ...] = ()
    hash_key: HashKey | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        excluded = {split_column(s, "--exclude-columns") for s in self.exclude_columns}
        hashed = {split_column(s, "--hash-columns") for s in self.hash_columns}
        if excluded & hashed:
            raise UsageError(f"columns both excluded and hashed: {sorted('.'.join(c) for c in excluded & hashed)}")

    @classmethod
    def from_settings(cls, mysql: MySQLSettings) -> ColumnRules:
        """The rules with their key; hash_columns without a key is a ConfigError (never an unkeyed hash)."""
        return cls(mysql.exclude_columns, mysql.hash_columns).keyed(mysql)

    def keyed(self, mysql: MySQLSettings) -> ColumnRules:
        """These rules with the settings' hash key (refused without one when a column is hashed)."""
        if not self.hash_columns:
            return self
        key = load_hash_key(mysql)
        if key is None:
            raise _no_key_error()
        return replace(self, hash_key=key)

    def require_key(self) -> HashKey:
        if self.hash_key is None:
            raise _no_key_error()
        return self.hash_key

    def check_key(self, schema: TableSchema) -> None:
        """Refuse rules that touch the key (the primary key, or every column of a table without one).

        Rows are identified, paginated and merged by their key, so it must stay as the source has it.
        Snapshot and tail both call this, so a table is refused by both or by neither.
        """
        excluded, hashed = self.columns(schema.db, schema.table)
        touched = (excluded | hashed) & set(schema.primary_key or schema.column_names)
        if touched:
            raise UsageError(
                f"{schema.db}.{schema.table}: exclude_columns/hash_columns name key column(s) {sorted(touched)} "
                "(the primary key, or every column without one); rows are identified, paginated and merged "
                "by their key, so it must stay as the source has it",
                hint=f"drop those columns from the rules, or leave {schema.db}.{schema.table} out (exclude_tables)")

    def columns(self, db: str, table: str) -> tuple[frozenset[str], frozenset[str]]:
        """(excluded, hashed) column names of one table."""
        return _matching(self.exclude_columns, "--exclude-columns", db, table), \
            _matching(self.hash_columns, "--hash-columns", db, table)

    def mask(self, schema: TableSchema) -> TableSchema:
        """The table as the change log holds it: excluded columns gone, hashed ones char(64) text."""
        excluded, hashed = self.columns(schema.db, schema.table)
        if not excluded and not hashed:
            return schema
        columns = tuple(_hashed(c) if c.name in hashed else c for c in schema.columns if c.name not in excluded)
        return replace(schema, columns=columns)

    def row_masker(self, schema: TableSchema) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """Rows in change-log form (column -> value) of `schema` -> as capture writes them under the rules."""
        excluded, hashed = self.columns(schema.db, schema.table)
        if not excluded and not hashed:
            return lambda row: row

        key = self.require_key() if hashed else None

        def masked(row: dict[str, Any]) -> dict[str, Any]:
            return {k: hash_value(v, key) if k in hashed and key else v for k, v in row.items() if k not in excluded}
        return masked

    def to_dict(self) -> dict[str, object]:
        fingerprint = self.require_key().fingerprint if self.hash_columns else None
        return {"version": RULES_VERSION, "exclude_columns": sorted(set(self.exclude_columns)),
                "hash_columns": sorted(set(self.hash_columns)), "hash_key_fingerprint": fingerprint}


def _matching(specs: tuple[str, ...], option: str, db: str, table: str) -> frozenset[str]:
    found = set()
    for spec in specs:
        d, t, c = split_column(spec, option)
        if fnmatch.fnmatchcase(db, d) and fnmatch.fnmatchcase(table, t):
            found.add(c)
    return frozenset(found)


def hash_value(value: Any, key: HashKey) -> str | None:
    """HMAC-SHA-256 hex of a value as the change log would hold it (strings: their UTF-8; else their JSON)."""
    if value is None:
        return None
    data = value.encode("utf-8") if isinstance(value, str) else orjson.dumps(value)
    return hmac.digest(key.secret, data, "sha256").hex()  # the one-shot C HMAC: a third faster than hmac.new


def _hashed(column: Column) -> Column:
    return Column(name=column.name, type=HASHED_TYPE, data_type="char", nullable=column.nullable, charset="ascii")


def read_rules(state: StateDir, mysql: MySQLSettings | None = None) -> ColumnRules:
    """The rules the state directory's change log was written with (none if nothing was captured yet).

    With `mysql`, the rules carry that settings' hash key, refused unless it is the key the change log was
    hashed with (verify hashes the source to compare it): its fingerprint must be the recorded one.
    """
    path = state.root / RULES_FILE
    document = _migrated(read_json(path) or {})
    try:
        rules = ColumnRules(tuple(document.get("exclude_columns", ())), tuple(document.get("hash_columns", ())))
    except (TypeError, UsageError) as exc:
        raise UsageError(f"{path} is corrupt ({exc})", hint="restore it: it records which columns are masked") from exc
    if mysql is None or not rules.hash_columns:
        return rules
    rules = rules.keyed(mysql)
    _same_key(state, document.get("hash_key_fingerprint"), rules.require_key())
    return rules


def _migrated(document: dict[str, Any]) -> dict[str, Any]:
    """A version 1 file as version 2: its hashes, if any, were plain SHA-256 (no key)."""
    if document and document.get("version") == 1:
        unkeyed = UNKEYED if document.get("hash_columns") else None
        return {**document, "version": RULES_VERSION, "hash_key_fingerprint": unkeyed}
    return document


def bind_rules(state: StateDir, rules: ColumnRules) -> None:
    """Record the rules a capture writes with, or refuse rules (or a hash key) other than the recorded ones."""
    path = state.root / RULES_FILE
    raw = read_json(path)
    wanted = rules.to_dict()
    if raw is None:
        write_json_atomic(path, wanted)
        return
    known = _migrated(raw)
    same_columns = all(known.get(k) == wanted[k] for k in ("exclude_columns", "hash_columns"))
    if not same_columns:
        raise UsageError(
            f"state directory {state.root} was captured with exclude_columns={known.get('exclude_columns')} "
            f"hash_columns={known.get('hash_columns')}, but this run asks for "
            f"exclude_columns={wanted['exclude_columns']} hash_columns={wanted['hash_columns']}; "
            "the change log would mix clear and masked values of the same columns",
            hint="set the rules once in cdc.toml ([mysql] exclude_columns / hash_columns) so every command uses "
            f"them; to change them on purpose, start a new --state-dir and snapshot again (or remove {path} "
            "if lines already written may keep their old form)",
        )
    if rules.hash_columns:
        _same_key(state, known.get("hash_key_fingerprint"), rules.require_key())
    if raw != wanted:
        write_json_atomic(path, wanted)  # a version 1 file without hashed columns, now version 2


def _same_key(state: StateDir, recorded: Any, key: HashKey) -> None:
    if recorded == key.fingerprint:
        return
    was = "plain SHA-256, without a key (cdc before #26)" if recorded == UNKEYED else f"the key {recorded}"
    raise ConfigError(
        f"state directory {state.root} was hashed with {was}, but this run's key ({key.source}) is "
        f"{key.fingerprint}; the change log would mix hashes that never match",
        hint="use the key this state directory was captured with; a new key means a new --state-dir and a new "
        "snapshot (docs/config.md: rotating the hash key)")


def masked_history(state: StateDir) -> SchemaHistory:
    """The schema history as stages downstream of capture must read it (see the module docstring)."""
    return SchemaHistory(state.schema, mask=read_rules(state).mask)
