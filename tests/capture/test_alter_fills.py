"""The ALTER reader (cdc.capture.alter) and the values existing rows get (cdc.capture.fills), without a server.

The end-to-end proof against MariaDB, Spark and fakesnow is tests/pipeline/test_ddl_effects.py; these pin the
statement forms and type conversions one by one.
"""

from __future__ import annotations

from typing import Any

import pytest

from cdc.capture.alter import AddedColumn, parse_alter_columns
from cdc.capture.fills import alter_effects, fill_value
from cdc.schema import Column, SchemaHistory, TableSchema, carried


def test_alter_clauses_are_read_with_their_defaults() -> None:
    change = parse_alter_columns(
        " ADD COLUMN `we``ird` INT NOT NULL DEFAULT -100, ADD (a ENUM('x','y') NOT NULL, b VARCHAR(5) DEFAULT "
        "'O''B\\\\n'), ADD INDEX (a), DROP COLUMN IF EXISTS c, ADD d DATETIME DEFAULT CURRENT_TIMESTAMP, "
        "ADD e CHAR(36) DEFAULT (uuid()), ADD IF NOT EXISTS f BINARY(2) DEFAULT x'01' FIRST, ADD g INT AUTO_INCREMENT, "
        "RENAME COLUMN h TO `i j`, CHANGE k l INT, DROP PRIMARY KEY, ADD m BIT(3) DEFAULT b'101' AFTER a")
    assert change.added == [
        AddedColumn("we`ird", True, ("number", "-100")), AddedColumn("a", True, ("none",)),
        AddedColumn("b", False, ("string", "O'B\\n")), AddedColumn("d", False, ("computed", "d: DEFAULT CURRENT_TIMESTAMP")),
        AddedColumn("e", False, ("computed", "e: DEFAULT (expression)")), AddedColumn("f", False, ("hex", "01")),
        AddedColumn("g", False, ("computed", "g: AUTO_INCREMENT")), AddedColumn("m", False, ("bits", "101"))]
    assert change.dropped == ["c"] and change.renamed == [("h", "i j"), ("k", "l")] and change.retyped


def _column(column_type: str, data_type: str, **kw: Any) -> Column:
    return Column("c", column_type, data_type, **kw)


@pytest.mark.parametrize(("column", "default", "not_null", "expected"), [
    (_column("int(11)", "int"), ("number", "100"), True, 100),
    (_column("int(11)", "int"), ("none",), True, 0),
    (_column("int(11)", "int"), ("none",), False, None),
    (_column("int(11)", "int"), ("null",), False, None),
    (_column("tinyint(1)", "tinyint"), ("bool", "1"), True, 1),
    (_column("decimal(8,2)", "decimal", precision=8, scale=2), ("string", "-1.5"), False, "-1.50"),
    (_column("decimal(8,2)", "decimal", precision=8, scale=2), ("none",), True, "0.00"),
    (_column("double", "double"), ("number", "2.5"), False, 2.5),
    (_column("varchar(10)", "varchar"), ("string", "O'Brien"), False, "O'Brien"),
    (_column("char(3)", "char"), ("string", "a  "), False, "a"),
    (_column("char(3)", "char"), ("none",), True, ""),
    (_column("binary(2)", "binary"), ("hex", "01"), False, "AQA="),
    (_column("binary(2)", "binary"), ("none",), True, "AAA="),
    (_column("blob", "blob"), ("none",), True, ""),
    (_column("enum('gold','silver')", "enum", enum_values=("gold", "silver")), ("none",), True, "gold"),
    (_column("enum('gold','silver')", "enum", enum_values=("gold", "silver")), ("string", "SILVER"), True, "silver"),
    (_column("set('a','b')", "set", set_values=("a", "b")), ("string", "b,a"), True, ["a", "b"]),
    (_column("set('a','b')", "set", set_values=("a", "b")), ("none",), True, []),
    (_column("date", "date"), ("none",), True, "0000-00-00"),
    (_column("date", "date"), ("string", "2026-11-26"), True, "2026-11-26"),
    (_column("datetime(6)", "datetime", fsp=6), ("string", "2026-11-26 07:00:01.5"), True, "2026-11-26 07:00:01.500000"),
    (_column("datetime", "datetime", fsp=0), ("none",), True, "0000-00-00 00:00:00"),
    (_column("time(3)", "time", fsp=3), ("string", "-01:30:00.25"), True, "-01:30:00.250000"),
    (_column("bit(3)", "bit"), ("bits", "101"), False, 5),
    (_column("year(4)", "year"), ("number", "2026"), False, 2026),
])
def test_fill_values_are_what_mysql_stores(column: Column, default: tuple[str, ...], not_null: bool,
                                           expected: Any) -> None:
    assert fill_value(AddedColumn("c", not_null, default), column) == (expected, None)


@pytest.mark.parametrize(("column", "default"), [
    (_column("datetime", "datetime"), ("computed", "c: DEFAULT CURRENT_TIMESTAMP")),
    (_column("timestamp", "timestamp"), ("string", "2026-11-26 07:00:00")),  # read in the session's time zone
    (_column("timestamp", "timestamp"), ("none",)),  # may be CURRENT_TIMESTAMP (explicit_defaults_for_timestamp)
    (_column("enum('a')", "enum", enum_values=("a",)), ("string", "zzz")),
])
def test_unknowable_fills_ask_for_a_resnapshot(column: Column, default: tuple[str, ...]) -> None:
    value, why = fill_value(AddedColumn("c", True, default), column)
    assert value is None and why


def _schema(position: str, names: list[str], **kw: Any) -> TableSchema:
    return TableSchema("d", "t", tuple(Column(n, "int(11)", "int") for n in names), ("id",), position, **kw)


def test_alter_read_late_keeps_fills_and_derives_drops() -> None:
    before = _schema("p1", ["id", "a", "b"])
    later = _schema("", ["id", "a", "x", "y"])  # information_schema after this ALTER and a later one
    added = alter_effects(before, later, "ADD COLUMN x INT NOT NULL DEFAULT 4")
    assert added.schema is None and added.fills == {"x": 4}
    dropped = alter_effects(before, later, "DROP COLUMN b, RENAME COLUMN a TO a2")
    assert dropped.schema is not None and dropped.schema.column_names == ["id", "a2"]
    assert dropped.renamed == {"a2": "a"}


@pytest.mark.parametrize(("clauses", "regenerated"), [
    ("MODIFY total DECIMAL(12,2) AS (price * qty * 2) STORED", ["total"]),
    ("CHANGE COLUMN IF EXISTS g `g 2` INT GENERATED ALWAYS AS (a + 1) VIRTUAL, ADD INDEX (a)", ["g 2"]),
    ("MODIFY COLUMN g INT AS (a) PERSISTENT, MODIFY b INT", ["g"]),
    ("MODIFY id BIGINT AUTO_INCREMENT", []),  # ids run out: no value changes, so no re-read of a big table
    ("MODIFY c VARCHAR(10) COMMENT 'x AS y' DEFAULT (a)", []),
    ("ADD g INT AS (a) VIRTUAL", []),  # an added column's own reason (test_alter_clauses_are_read...)
])
def test_a_generated_column_redefined_is_recomputed_in_every_row(clauses: str, regenerated: list[str]) -> None:
    assert parse_alter_columns(clauses).regenerated == regenerated
    before = _schema("p1", ["id", "a", "b", "c", "g", "total"])
    effects = alter_effects(before, before, clauses)
    assert bool(regenerated) == ("computed it again in every row" in (effects.resnapshot or ""))


def test_carried_walks_every_version(tmp_path: Any) -> None:
    history = SchemaHistory(tmp_path)
    history.record(_schema("p1", ["id", "a", "n"]))
    history.record(_schema("p2", ["id", "a", "n", "x"], fills={"x": 1}))
    history.record(_schema("p3", ["id", "a"]))  # n, x dropped
    history.record(_schema("p4", ["id", "b", "x"], fills={"x": 2}, renamed={"b": "a"}))  # x again, a renamed
    history.note_pending("d", "t", "p5", {"z": 9}, {}, None)
    history.record(_schema("p6", ["id", "b", "x", "z"]))
    versions = SchemaHistory(tmp_path).versions("d", "t")  # read back: version 2 with fills and renames
    assert [v.fills for v in versions] == [{}, {"x": 1}, {}, {"x": 2}, {"z": 9}]
    assert carried(versions, "x", "p1", "p2").fill == 1 and carried(versions, "x", "p2", "p2").source == "x"
    assert carried(versions, "x", "p2", "p6").fill == 2 and carried(versions, "x", "p2", "p6").added_at == "p4"
    assert carried(versions, "b", "p1", "p6").source == "a" and carried(versions, "b", "p4", "p6").source == "b"
    assert carried(versions, "z", "p4", "p6").fill == 9
