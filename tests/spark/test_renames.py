"""RENAME TABLE followed through a merge run (cdc.spark.renames) and through the schema history (issue #30)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.spark.renames import Rename, RenamePlan

ID = Column("id", "int(11)", "int", nullable=False)


def _p(n: int) -> str:
    return f"0000000001:{n:012d}:b000000000000"


def test_plan_follows_a_rename_a_chain_and_a_swap() -> None:
    plan = RenamePlan.build([
        Rename(_p(30), "d", "e", "d", "tmp"), Rename(_p(31), "d", "b", "d", "e"), Rename(_p(32), "d", "tmp", "d", "b"),
        Rename(_p(10), "d", "a", "d", "c"), Rename(_p(20), "d", "c", "d", "e"), Rename(_p(40), "d", "q", "x y", "q"),
    ])
    assert plan.moves() == [{"from": ["d", "a"], "to": ["d", "b"]}, {"from": ["d", "b"], "to": ["d", "e"]},
                            {"from": ["d", "q"], "to": ["x y", "q"]}]
    assert plan.base(("d", "b")) == ("d", "a") and plan.base(("d", "e")) == ("d", "b")
    assert plan.base(("d", "a")) is None  # a table created under `a` after it was renamed away starts empty
    assert plan.base(("d", "other")) == ("d", "other")


def test_plan_ends_a_dropped_table_whose_name_a_rename_takes() -> None:
    plan = RenamePlan.build([Rename(_p(10), "d", "a", "d", "b")])  # `b` had been dropped before: MySQL needs it free
    ended = [i for i in plan.identities if i.origin == ("d", "b")]
    assert [i.final for i in ended] == [None] and plan.base(("d", "b")) == ("d", "a")


def test_relabel_puts_each_line_under_its_tables_final_name(spark: Any) -> None:  # noqa: F811
    plan = RenamePlan.build([Rename(_p(10), "d", "a", "d", "b"), Rename(_p(20), "d", "b", "d", "a2")])
    lines = [("d", "a", "c", None, None, None, _p(5)), ("d", "a", "ddl", "rename", "d", "b", _p(10)),
             ("d", "b", "u", None, None, None, _p(15)), ("d", "b", "ddl", "rename", "d", "a2", _p(20)),
             ("d", "a2", "d", None, None, None, _p(25)), ("d", "a", "c", None, None, None, _p(26)),
             ("d", "z", "c", None, None, None, _p(27))]
    raw = spark.createDataFrame(lines, "db string, table string, op string, kind string, new_db string, "
                                       "new_table string, position string")
    found = [(r["table"], r["position"]) for r in plan.relabel(raw).orderBy("position").collect()]
    assert found == [("a2", _p(5)), ("a2", _p(10)), ("a2", _p(15)), ("a2", _p(20)), ("a2", _p(25)), ("a", _p(26)),
                     ("z", _p(27))]


def test_history_follows_the_table_through_its_names(tmp_path: Path) -> None:
    history = SchemaHistory(tmp_path)
    v = Column("v", "int(11)", "int")
    history.record(TableSchema("d", "a", (ID,), ("id",), _p(1)))
    history.record(TableSchema("d", "a", (ID, v), ("id",), _p(2)))
    history.record(TableSchema("d", "b", (ID,), ("id",), _p(3)))  # another table, swapped with `a` below
    history.record_move("d", "a", "d", "tmp", _p(10))
    history.record_move("d", "b", "d", "a", _p(11))
    history.record_move("d", "tmp", "d", "b", _p(12))
    history.record_move("d", "tmp", "d", "b", _p(12))  # a replay changes nothing
    again = SchemaHistory(tmp_path)
    assert [(s.table, s.position, s.column_names) for s in again.versions("d", "b")] == [
        ("b", _p(1), ["id"]), ("b", _p(2), ["id", "v"]), ("b", _p(10), ["id", "v"]), ("b", _p(12), ["id", "v"])]
    assert [(s.position, s.column_names) for s in again.versions("d", "a")] == [(_p(3), ["id"]), (_p(11), ["id"])]
    assert again.lineage("d", "b") == [("d", "a", "", _p(10)), ("d", "tmp", _p(10), _p(12)), ("d", "b", _p(12), None)]
    assert sorted(again.tables()) == [("d", "a"), ("d", "b")]  # `tmp` was renamed away
    # A table created under a name renamed away from is a new table, even with the same shape.
    history.record_move("d", "b", "d", "c", _p(20))
    assert history.tables() == [("d", "a"), ("d", "c")]
    history.record(TableSchema("d", "b", (ID, v), ("id",), _p(21)))
    assert [s.position for s in SchemaHistory(tmp_path).versions("d", "b")] == [_p(21)]
    assert sorted(SchemaHistory(tmp_path).tables()) == [("d", "a"), ("d", "b"), ("d", "c")]
