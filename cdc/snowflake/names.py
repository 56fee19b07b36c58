"""Snowflake names for MySQL objects: one case policy, always quoted, collisions refused.

Policy (docs/guide.md, "snowflake-bootstrap"): a MySQL name that would be a valid *unquoted* Snowflake
identifier (letters, digits, `_`, `$`, not starting with a digit or `$`) becomes its upper-case
form, so `customer_id` is `"CUSTOMER_ID"` and people can write `SELECT customer_id` unquoted. Any
other name (spaces, dashes, quotes, non-ASCII letters, a leading digit) keeps its exact spelling.
Every generated statement still quotes every identifier, so reserved words are safe either way.

MySQL column names are case-insensitive, so upper-casing never merges two columns of one table;
a collision can still come from a MySQL name equal to one of our `_CDC_*` columns, or from two
tables of different databases bootstrapped into one Snowflake schema. Both are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cdc.errors import PreconditionError

_UNQUOTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
MAX_IDENTIFIER = 255  # Snowflake's identifier length limit

# Columns cdc adds to every target table (and the batch files' metadata columns).
CDC_POSITION = "_CDC_POSITION"
CDC_COMMIT_TS = "_CDC_COMMIT_TS"
CDC_OP = "_CDC_OP"
CDC_DELETED = "_CDC_DELETED"
CDC_DELETED_AT = "_CDC_DELETED_AT"
VALID_FROM = "_CDC_VALID_FROM"
VALID_TO = "_CDC_VALID_TO"
IS_CURRENT = "_CDC_IS_CURRENT"
ACTION = "METADATA$ACTION"
IS_UPDATE = "METADATA$ISUPDATE"
RESERVED = frozenset({CDC_POSITION, CDC_COMMIT_TS, CDC_OP, CDC_DELETED, CDC_DELETED_AT, VALID_FROM, VALID_TO,
                      IS_CURRENT, ACTION, IS_UPDATE})

# Objects shared by every table of one Snowflake schema.
BOOKKEEPING_TABLE = "_CDC_APPLIED_BATCHES"
INTERNAL_STAGE = "_CDC_BATCHES"
FILE_FORMAT = "_CDC_JSON_GZIP"
EXTERNAL_STAGE = "_CDC_CHANGES"
STAGING_PREFIX = "_CDC_STG_"


def snowflake_name(mysql_name: str) -> str:
    """The Snowflake spelling of a MySQL table or column name (unquoted; quote with quote_ident)."""
    if len(mysql_name) > MAX_IDENTIFIER:
        raise PreconditionError(f"name {mysql_name[:40]!r}... is longer than Snowflake's {MAX_IDENTIFIER} characters")
    return mysql_name.upper() if _UNQUOTED.match(mysql_name) else mysql_name


def derived_name(base: str, suffix: str) -> str:
    """A name derived from a target table's Snowflake name (history table, landing table, pipe...)."""
    return f"{base}{suffix}" if _UNQUOTED.match(base) else f"{base}{suffix.lower()}"


def column_names(table: str, names: Iterable[str]) -> dict[str, str]:
    """MySQL column -> Snowflake column for one table; PreconditionError on any collision."""
    mapped: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in names:
        target = snowflake_name(name)
        if target.upper() in RESERVED:
            raise PreconditionError(
                f"table {table}: MySQL column {name!r} maps to {target!r}, a column cdc adds to every target table",
                hint=f"rename the MySQL column, or exclude {table} from replication",
            )
        if target in seen:
            raise PreconditionError(
                f"table {table}: MySQL columns {seen[target]!r} and {name!r} both map to Snowflake column {target!r}",
                hint="rename one of them in MySQL; cdc never guesses which one should win",
            )
        seen[target] = name
        mapped[name] = target
    return mapped


def table_names(tables: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(db, table) -> Snowflake table name in the one target schema; refuse two sources for one name."""
    mapped: dict[tuple[str, str], str] = {}
    seen: dict[str, tuple[str, str]] = {}
    for db, table in tables:
        target = snowflake_name(table)
        if target.upper().startswith("_CDC_"):
            raise PreconditionError(f"MySQL table {db}.{table} maps to {target!r}, a name reserved for cdc's own objects",
                                    hint=f"exclude {db}.{table} or rename it")
        if target in seen:
            other = seen[target]
            raise PreconditionError(
                f"MySQL tables {other[0]}.{other[1]} and {db}.{table} both map to Snowflake table {target!r}",
                hint="bootstrap each MySQL database into its own Snowflake schema (--schema), one run per database",
            )
        seen[target] = (db, table)
        mapped[(db, table)] = target
    return mapped
