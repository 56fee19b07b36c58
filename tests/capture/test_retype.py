"""Which MODIFY/CHANGE conversions the targets' casts reproduce (no re-snapshot) and which flag the table.

The verdicts as a pure function over the column before and after and the ALTER's session. The end-to-end
counterpart (real MariaDB, the sql_mode read from the binlog, `cdc run` repairing the flagged tables) is
tests/pipeline/test_retypes.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.capture.fills import alter_effects
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.schema.retype import (
    LOSSIEST,
    MARIADB_TIME_ROUND_FRACTIONAL,
    MYSQL_TIME_TRUNCATE_FRACTIONAL,
    STRICT_TRANS_TABLES,
    Session,
    unreproduced,
    widens,
)
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, tail_once
from tests.rig import MariaDB

STRICT_MARIADB = Session(STRICT_TRANS_TABLES, mariadb=True)
LOOSE_MARIADB = Session(0, mariadb=True)


def _column(kind: str, *, name: str = "c", nullable: bool = True, charset: str | None = None) -> Column:
    base = kind.split("(")[0].split(" ")[0]
    numbers = kind[len(base) + 1:-1].split(",") if kind.startswith(f"{base}(") and base == "decimal" else []
    labels = tuple(label.strip("'") for label in kind[len(base) + 1:-1].split(",")) if base in ("enum", "set") else None
    fsp = int(kind[len(base) + 1:-1]) if base in ("datetime", "timestamp", "time") and "(" in kind else None
    return Column(name, kind, base, unsigned="unsigned" in kind, nullable=nullable,
                  precision=int(numbers[0]) if numbers else None, scale=int(numbers[1]) if numbers else None,
                  charset=charset if charset or base not in ("char", "varchar", "text") else "utf8mb4", fsp=fsp,
                  enum_values=labels if base == "enum" else None, set_values=labels if base == "set" else None)


@pytest.mark.parametrize(("old", "new"), [
    ("int(11)", "int(10)"), ("int(11)", "bigint(20)"), ("tinyint(1)", "tinyint(4)"), ("int(10) unsigned", "bigint(20)"),
    ("smallint(6)", "decimal(10,2)"), ("decimal(8,2)", "decimal(12,4)"), ("decimal(8,2)", "decimal(9,1)"),
    ("datetime(3)", "datetime(6)"), ("time", "time(3)"), ("enum('a','b')", "enum('b','a','c')"),
    ("set('a','b')", "set('a','b','c')"), ("varchar(10)", "varchar(4)"), ("varchar(10)", "varchar(40)"),
    ("char(3)", "varchar(3)"), ("char(10)", "text"), ("varchar(20)", "mediumtext"), ("text", "longtext"),
    ("varbinary(4)", "blob"), ("binary(4)", "varbinary(8)"), ("tinyblob", "blob"),
])
def test_conversions_the_casts_reproduce_are_not_flagged_even_in_a_loose_session(old: str, new: str) -> None:
    assert unreproduced(_column(old), _column(new), LOOSE_MARIADB) is None


@pytest.mark.parametrize(("old", "new"), [
    ("bigint(20)", "int(11)"), ("int(11)", "int(10) unsigned"), ("decimal(8,2)", "decimal(6,2)"),
    ("decimal(5,2)", "decimal(4,1)"),  # 999.99 rounds to 1000.0: one digit more before the point
    ("int(11)", "decimal(5,2)"), ("char(10)", "char(3)"), ("enum('a','b')", "enum('a')"), ("set('a','b')", "set('a')"),
    ("varbinary(8)", "varbinary(4)"),
])
def test_narrowings_are_exact_in_a_strict_session_and_flagged_in_a_loose_one(old: str, new: str) -> None:
    assert unreproduced(_column(old), _column(new), STRICT_MARIADB) is None  # MySQL refuses a value that does not fit
    why = unreproduced(_column(old), _column(new), LOOSE_MARIADB)
    assert why == f"column c narrowed in a non-strict session from {old} to {new} (MySQL converted its stored values)"


@pytest.mark.parametrize(("old", "new"), [
    ("decimal(10,2)", "int(11)"),  # MySQL rounds half away from zero, a cast truncates
    ("varchar(10)", "int(11)"), ("varchar(20)", "date"), ("int(11)", "varchar(20)"), ("float", "double"),
    ("double", "decimal(10,2)"), ("datetime", "timestamp"), ("date", "datetime"), ("time(6)", "time"),
    ("binary(4)", "binary(8)"),  # zero-padded to the new length
    ("varchar(10)", "char(10)"),  # trailing spaces dropped
    ("text", "tinytext"), ("text", "varchar(100)"), ("enum('a','b')", "enum('A','b')"),  # 'a' takes the new spelling
    ("set('a','b')", "set('b','a')"),  # 'a,b' reads 'b,a'
    ("json", "longtext"), ("bit(8)", "bit(16)"), ("year(4)", "smallint(6)"),
])
def test_conversions_no_cast_reproduces_are_flagged_strict_or_not(old: str, new: str) -> None:
    for session in (STRICT_MARIADB, LOOSE_MARIADB):
        assert unreproduced(_column(old), _column(new), session) is not None, session


def test_fractions_cut_are_exact_where_the_server_truncates_them() -> None:
    old, new = _column("datetime(6)"), _column("datetime(2)")
    assert unreproduced(old, new, Session(STRICT_TRANS_TABLES, mariadb=True)) is None  # MariaDB truncates
    assert unreproduced(old, new, Session(MARIADB_TIME_ROUND_FRACTIONAL, mariadb=True)) is not None
    assert unreproduced(old, new, Session(STRICT_TRANS_TABLES, mariadb=False)) is not None  # MySQL rounds
    assert unreproduced(old, new, Session(MYSQL_TIME_TRUNCATE_FRACTIONAL, mariadb=False)) is None
    assert unreproduced(old, new, LOSSIEST) is not None


def test_not_null_and_character_sets() -> None:
    nullable, not_null = _column("varchar(10)"), _column("varchar(10)", nullable=False)
    assert unreproduced(nullable, not_null, STRICT_MARIADB) is None  # refused while a NULL is there
    assert unreproduced(nullable, not_null, LOOSE_MARIADB) == (
        "column c made NOT NULL in a non-strict session (MySQL gave NULLs the type's implicit value)")
    latin, utf8 = _column("varchar(10)", charset="latin1"), _column("varchar(10)", charset="utf8mb4")
    assert unreproduced(latin, utf8, LOOSE_MARIADB) is None
    assert unreproduced(utf8, latin, STRICT_MARIADB) is None
    assert unreproduced(utf8, latin, LOOSE_MARIADB) == (
        "column c converted from utf8mb4 to latin1 in a non-strict session")
    assert unreproduced(latin, _column("varchar(10)", charset="utf8mb3"), LOOSE_MARIADB) is None


def test_alter_effects_flags_a_retyped_column_only_when_information_schema_shows_this_alter() -> None:
    before = TableSchema("d", "t", (_column("int(11)", name="id", nullable=False), _column("decimal(10,2)", name="p")),
                         ("id",), "p1")
    now = TableSchema("d", "t", (before.columns[0], _column("int(11)", name="price")), ("id",), "p1")
    effects = alter_effects(before, now, "CHANGE p price INT", STRICT_MARIADB)
    assert effects.resnapshot == ("column price converted from decimal(10,2) to int(11) "
                                  "(MySQL converted its stored values)")
    assert effects.schema is not None and effects.schema.resnapshot == effects.resnapshot
    later = TableSchema("d", "t", (*now.columns, _column("int(11)", name="added_later")), ("id",), "p1")
    assert alter_effects(before, later, "CHANGE p price INT", STRICT_MARIADB).resnapshot is None  # not this ALTER's
    widened = TableSchema("d", "t", (before.columns[0], _column("decimal(12,2)", name="p")), ("id",), "p1")
    assert alter_effects(before, widened, "MODIFY p DECIMAL(12,2)", STRICT_MARIADB).resnapshot is None


@pytest.mark.parametrize(("old", "new", "held"), [
    ("int(11)", "bigint(20)", True), ("decimal(8,2)", "decimal(12,4)", True), ("varchar(10)", "varchar(20)", True),
    ("datetime(3)", "datetime(6)", True), ("enum('a')", "enum('a','b')", True),
    ("decimal(8,2)", "decimal(8,1)", False),  # rounds
    ("varchar(10)", "varchar(4)", False),  # cuts
    ("int(11)", "int(10) unsigned", False), ("datetime(6)", "datetime", False), ("decimal(10,2)", "int(11)", False),
])
def test_widens_only_where_every_old_value_is_kept_unchanged(old: str, new: str, held: bool) -> None:
    assert widens(_column(old), _column(new)) is held


@pytest.mark.parametrize(("mode", "column", "modify", "flagged"), [
    ("STRICT_TRANS_TABLES", "CHAR(10)", "CHAR(3)", False),  # strict: MySQL would have refused a longer value
    ("", "CHAR(10)", "CHAR(3)", True),
    ("STRICT_TRANS_TABLES", "DATETIME(6)", "DATETIME(2)", False),  # MariaDB truncates, as the targets do
    ("STRICT_TRANS_TABLES,TIME_ROUND_FRACTIONAL", "DATETIME(6)", "DATETIME(2)", True),  # it rounded
])
def test_the_alters_sql_mode_is_read_from_its_binlog_event(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                           mode: str, column: str, modify: str, flagged: bool) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, c {column})")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t (id) VALUES (1)")  # a table map: tail knows the table before the ALTER
    with mariadb.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"SET SESSION sql_mode = '{mode}'")
        cursor.execute(f"ALTER TABLE `{fresh_db}`.t MODIFY c {modify}")
    tail_once(mariadb, tmp_path, fresh_db, start)
    reason = SchemaHistory(StateDir(tmp_path).schema).resnapshot_reason(fresh_db, "t")
    assert (reason is not None) is flagged, reason
