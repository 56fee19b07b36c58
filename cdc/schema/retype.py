"""Whether the lake and Snowflake can reproduce what MySQL did to a column's stored values at a type change.

A MODIFY / CHANGE (or CONVERT TO CHARACTER SET) that changes a column's type converts every existing row in
place, with no row event. spark-merge and snowflake-apply convert the older values with a cast
(cdc.spark.evolve, cdc.snowflake.evolve), which is exact only where it rounds, cuts and refuses as MySQL did:

- wider integers and DECIMALs, a DECIMAL's scale (both round half away from zero), an integer made a DECIMAL;
- more fractional digits; fewer on a DATETIME/TIMESTAMP where the server truncates them (MariaDB, unless its
  sql_mode has TIME_ROUND_FRACTIONAL; MySQL only with TIME_TRUNCATE_FRACTIONAL);
- a VARCHAR made shorter or longer (the cut is reproduced), a CHAR or VARCHAR made a TEXT, a TEXT made wider,
  a VARBINARY or BLOB made wider, ENUM members added or reordered (labels are kept), SET members added at the end;
- a character set that holds every character of the old one (utf8mb4 holds all).

In a strict session (STRICT_TRANS_TABLES or STRICT_ALL_TABLES, the default of MySQL 5.7+ and MariaDB 10.2.4+)
MySQL refuses the ALTER rather than cut, clip or coerce a value, so a narrowing that succeeded changed no value:
a narrower integer or DECIMAL, a shorter CHAR, ENUM or SET members removed, a narrower character set, NOT NULL
on a nullable column. In a non-strict session it clips, cuts, drops members, replaces characters with '?' and
NULLs with the type's implicit value, which no cast reproduces.

Anything else (a DECIMAL made an INT, a text made a number or a date, a TIME's fraction cut, a BINARY's length,
floating point, DATETIME <-> TIMESTAMP, ...) is not reproduced: the table is flagged for a re-snapshot, as for
an ALTER-time default (#30), and `cdc run` re-reads it by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdc.schema.table import Column

# sql_mode bits as a query event carries them: the same in MySQL and MariaDB up to bit 31, not above (checked against
# MariaDB 10.11 by tests/capture/test_retype.py; MySQL's from its sql_mode definitions).
STRICT_TRANS_TABLES = 1 << 21
STRICT_ALL_TABLES = 1 << 22
MYSQL_TIME_TRUNCATE_FRACTIONAL = 1 << 32
MARIADB_TIME_ROUND_FRACTIONAL = 1 << 34

_INTEGER_RANGE = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
_TEXT_BYTES = {"tinytext": 255, "text": 65535, "mediumtext": 2**24 - 1, "longtext": 2**32 - 1}
_BLOB_BYTES = {"tinyblob": 255, "blob": 65535, "mediumblob": 2**24 - 1, "longblob": 2**32 - 1}
_TEMPORAL = ("datetime", "timestamp")
# Character sets holding every character of any other (a conversion to them never replaces one).
_UNIVERSAL = frozenset({"utf8mb4", "utf16", "utf16le", "utf32"})
_BMP = frozenset({"utf8mb3", "utf8", "ucs2"})  # every character of the Basic Multilingual Plane
_STRINGS = frozenset({"char", "varchar", *_TEXT_BYTES})
_BYTES = frozenset({"binary", "varbinary", *_BLOB_BYTES})
_LENGTH = re.compile(r"^\w+\((\d+)\)")


@dataclass(frozen=True)
class Session:
    """What decides how the server converted stored values: the ALTER's sql_mode (None: not known) and server."""

    sql_mode: int | None
    mariadb: bool

    @property
    def strict(self) -> bool:
        return self.sql_mode is not None and bool(self.sql_mode & (STRICT_TRANS_TABLES | STRICT_ALL_TABLES))

    @property
    def truncates_fractions(self) -> bool:
        mode = self.sql_mode or 0
        return not mode & MARIADB_TIME_ROUND_FRACTIONAL if self.mariadb else bool(mode & MYSQL_TIME_TRUNCATE_FRACTIONAL)


# The session assumed where it is not known: non-strict, fractions rounded (every narrowing may have changed values).
LOSSIEST = Session(None, mariadb=False)


def unreproduced(old: Column, new: Column, session: Session) -> str | None:
    """Why the targets' cast of `old`'s stored values to `new` may differ from MySQL's conversion; None if it cannot."""
    loose = "" if session.strict else " in a non-strict session"
    if old.nullable and not new.nullable and not session.strict:
        return f"column {new.name} made NOT NULL{loose} (MySQL gave NULLs the type's implicit value)"
    change = None if old.type == new.type else _change(old, new)
    if change == "fraction" and session.truncates_fractions and old.data_type in _TEMPORAL:
        change = None  # cut as the targets cut it (cdc.spark.evolve.cut_fraction)
    if change is None or change == "narrowed" and session.strict:
        return _charset(old, new, session)
    what = {"narrowed": f"narrowed{loose}", "fraction": "cut to fewer fractional digits", "converted": "converted"}[change]
    return f"column {new.name} {what} from {old.type} to {new.type} (MySQL converted its stored values)"


def widens(old: Column, new: Column) -> bool:
    """Every value `old` can hold is one of `new`, unchanged (an SCD2 table's older versions can take the new type)."""
    same_charset = old.charset == new.charset or None in (old.charset, new.charset) or new.charset in _UNIVERSAL
    if not same_charset or old.type != new.type and _change(old, new) is not None:
        return False
    # Conversions the casts reproduce that still change values: a DECIMAL's scale cut (rounds), a VARCHAR's (cuts).
    if new.data_type == "decimal" and (new.scale or 0) < (old.scale or 0):
        return False
    return not (old.data_type == new.data_type == "varchar" and _length(new) < _length(old))


def _charset(old: Column, new: Column, session: Session) -> str | None:
    """A character set that cannot hold every old character replaced them with '?' in a non-strict session."""
    if old.charset == new.charset or None in (old.charset, new.charset) or new.charset in _UNIVERSAL or session.strict:
        return None
    if new.charset in _BMP and old.charset in _BMP | {"latin1", "ascii"}:
        return None
    return f"column {new.name} converted from {old.charset} to {new.charset} in a non-strict session"


def _change(old: Column, new: Column) -> str | None:
    """None (every stored value kept as is), 'narrowed' (a value may not fit), 'fraction' (digits cut), 'converted'."""
    a, b = old.data_type, new.data_type
    if a in _INTEGER_RANGE and b in (*_INTEGER_RANGE, "decimal") or a == b == "decimal":
        return None if _holds(new, old) else "narrowed"
    if a == b and a in (*_TEMPORAL, "time"):
        return None if (new.fsp or 0) >= (old.fsp or 0) else "fraction"
    if a == b == "enum":  # values are kept by label
        return _members(old.enum_values or (), new.enum_values or ())
    if a == b == "set":
        return _members(old.set_values or (), new.set_values or (), ordered=True)
    if a in _STRINGS and b in _STRINGS:
        return _text_change(old, new)
    if a in _BYTES and b in _BYTES - {"binary"}:  # BINARY's zero padding is kept when it becomes a VARBINARY/BLOB
        return None if _bytes(new) >= _bytes(old) else "narrowed"
    return "converted"  # across types (a DECIMAL made an INT, a text a number, ...), a BINARY's length, floats


def _holds(new: Column, old: Column) -> bool:
    """Every value of `old` (an integer or DECIMAL) is one of `new`, unchanged or rounded only by a scale cut."""
    if new.data_type in _INTEGER_RANGE:
        return old.data_type in _INTEGER_RANGE and _range(new)[0] <= _range(old)[0] and _range(old)[1] <= _range(new)[1]
    if old.data_type in _INTEGER_RANGE:
        return (new.precision or 10) - (new.scale or 0) >= len(str(_range(old)[1]))
    digits_old, digits_new = (old.precision or 10) - (old.scale or 0), (new.precision or 10) - (new.scale or 0)
    # A cut scale rounds: 99.99 -> DECIMAL(3,1) is 100.0, one more digit before the point.
    return digits_new > digits_old or digits_new == digits_old and (new.scale or 0) >= (old.scale or 0)


def _range(column: Column) -> tuple[int, int]:
    bits = _INTEGER_RANGE[column.data_type]
    return (0, 2**bits - 1) if column.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _members(old: tuple[str, ...], new: tuple[str, ...], *, ordered: bool = False) -> str | None:
    """ENUM/SET labels. A label that only differs in case takes the new spelling, strict or not; a SET value reads
    as its members in definition order, so reordered members change the text of a value."""
    folded = {member.lower() for member in new}
    if any(member not in new and member.lower() in folded for member in old):
        return "converted"
    if ordered and [m for m in new if m in old] != [m for m in old if m in new]:
        return "converted"
    return None if set(old) <= set(new) else "narrowed"


def _text_change(old: Column, new: Column) -> str | None:
    a, b = old.data_type, new.data_type
    if a == b == "varchar":
        return None  # a shorter VARCHAR's cut is reproduced (cdc.spark.evolve.cut_text)
    if b in _TEXT_BYTES:  # a TEXT cuts by bytes, and cuts trailing spaces even in strict mode: only wider is kept
        return None if _bytes(old) <= _TEXT_BYTES[b] else "converted"
    if a == "char":  # CHAR values read without trailing spaces: a CHAR or VARCHAR as long keeps them
        return None if _length(new) >= _length(old) else "narrowed"
    return "converted"  # VARCHAR -> CHAR (trailing spaces dropped), TEXT -> CHAR/VARCHAR


def _length(column: Column) -> int:
    match = _LENGTH.match(column.type)
    return int(match[1]) if match else 0


def _bytes(column: Column) -> int:
    """The most bytes a value may take (a character counts 4: the widest of any character set)."""
    kind = column.data_type
    if kind in _TEXT_BYTES:
        return _TEXT_BYTES[kind]
    if kind in _BLOB_BYTES:
        return _BLOB_BYTES[kind]
    return _length(column) * (1 if kind in ("binary", "varbinary") else 4)
