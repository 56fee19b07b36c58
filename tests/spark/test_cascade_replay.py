"""The cascade replay alone (cdc.spark.cascades): pure Python, no Spark; test_cascades.py runs it end to end."""

from __future__ import annotations

import pytest

from cdc.schema import Column, ForeignKey, TableSchema, cascades_in_binlog
from cdc.spark.cascades import Change, Graph, Replay

EMP = ("hr", "emp")
BOSS = ForeignKey("boss", "hr", "emp", ("boss",), "hr", "emp", ("id",), "CASCADE", "RESTRICT")


def _schema(position: str, keys: tuple[ForeignKey, ...]) -> TableSchema:
    columns = (Column("id", "int(11)", "int", nullable=False), Column("boss", "int(11)", "int"))
    return TableSchema("hr", "emp", columns, ("id",), position, keys, keys)


def _replay(versions: list[TableSchema]) -> Replay:
    replay = Replay(Graph({EMP: versions}), {EMP: ("id",)})
    # The lake: a chain 1 <- 2 <- 3 <- 4, and 5 on its own; the run deletes 1 at position p2.
    lake = [{"id": "1", "boss": None}, {"id": "2", "boss": "1"}, {"id": "3", "boss": "2"}, {"id": "4", "boss": "3"},
            {"id": "5", "boss": None}]
    replay.add_rows(EMP, [(r["id"],) for r in lake], lake)
    replay.add_changes([Change(EMP, "p2", "d", "t", {"id": "1", "boss": None}, None)])
    return replay


def test_a_self_referencing_chain_cascades_to_a_fixed_point() -> None:
    replay = _replay([_schema("p0", (BOSS,))])
    rounds = 0
    while True:
        rounds += 1
        derived, missing = replay.run()
        if not missing:
            break
        replay.needs_loaded |= missing  # every row is loaded already: the lake above
    assert [(c.position, c.op, c.before and c.before["id"]) for c in derived] == [
        ("p2:k000000", "d", "2"), ("p2:k000001", "d", "3"), ("p2:k000002", "d", "4")]
    assert rounds == 5  # one more value to look up per level (1, 2, 3, 4), then nothing


def test_a_parent_change_made_with_foreign_key_checks_off_cascades_nothing() -> None:
    """InnoDB runs no ON DELETE action under foreign_key_checks=0: 2 keeps its dangling boss, nothing is looked up."""
    replay = _replay([_schema("p0", (BOSS,))])
    replay.changes.clear()
    replay.add_changes([Change(EMP, "p2", "d", "t", {"id": "1", "boss": None}, None, fk_checks=False)])
    assert replay.run() == ([], set())


def test_a_key_added_after_the_parent_change_does_not_cascade_it() -> None:
    replay = _replay([_schema("p0", ()), _schema("p3", (BOSS,))])
    derived, missing = replay.run()
    assert (derived, missing) == ([], set())


@pytest.mark.parametrize(("flavour", "version", "logged"), [
    ("mariadb", "10.11.6-MariaDB", False), ("rds-mariadb", "11.4.2", False), ("mysql", "8.0.36", False),
    ("aurora-mysql", "8.0.mysql_aurora.3.05.2", False), ("mysql", "8.4.3", True), ("rds-mysql", "9.1.0", True)])
def test_which_servers_write_their_cascades_to_the_binlog(flavour: str, version: str, logged: bool) -> None:
    assert cascades_in_binlog(flavour, version) is logged


def test_a_keyless_child_cascades_into_every_copy_of_a_row() -> None:
    """Issue #24: a child without a key is a multiset; InnoDB changes each identical copy, one derived change each."""
    dept, log = ("hr", "dept"), ("hr", "log")
    key = ForeignKey("fk", "hr", "log", ("dept",), "hr", "dept", ("id",), "CASCADE", "SET NULL")
    parent = TableSchema("hr", "dept", (Column("id", "int(11)", "int", nullable=False),), ("id",), "p0", (), (key,))
    child = TableSchema("hr", "log", (Column("dept", "int(11)", "int"), Column("note", "text", "text")), (), "p0",
                        (key,), ())
    replay = Replay(Graph({dept: [parent], log: [child]}), {dept: ("id",), log: ("dept", "note")}, frozenset({log}))
    rows = [{"dept": "1", "note": "a"}, {"dept": "1", "note": "a"}, {"dept": "1", "note": "b"}, {"dept": "2", "note": "a"}]
    replay.add_rows(log, [("1", "a"), ("1", "b"), ("2", "a")], rows)
    replay.add_rows(log, [("1", "a")], rows[:2])  # loaded again for another value: its copies count once
    replay.add_changes([Change(dept, "p2", "u", "t", {"id": "1"}, {"id": "7"}),  # SET NULL on update
                        Change(log, "p3", "c", "t", None, {"dept": "2", "note": "a"}),
                        Change(dept, "p4", "d", "t", {"id": "2"}, None)])  # CASCADE on delete: both copies
    replay.needs_loaded |= {(log, ("dept",), ("1",)), (log, ("dept",), ("2",))}
    derived, missing = replay.run()
    assert missing == set()
    assert [(c.position, c.op, c.before, c.after) for c in derived] == [
        ("p2:k000000", "u", {"dept": "1", "note": "a"}, {"dept": None, "note": "a"}),
        ("p2:k000001", "u", {"dept": "1", "note": "a"}, {"dept": None, "note": "a"}),
        ("p2:k000002", "u", {"dept": "1", "note": "b"}, {"dept": None, "note": "b"}),
        ("p4:k000000", "d", {"dept": "2", "note": "a"}, None), ("p4:k000001", "d", {"dept": "2", "note": "a"}, None)]
