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


def test_a_key_added_after_the_parent_change_does_not_cascade_it() -> None:
    replay = _replay([_schema("p0", ()), _schema("p3", (BOSS,))])
    derived, missing = replay.run()
    assert (derived, missing) == ([], set())


@pytest.mark.parametrize(("flavour", "version", "logged"), [
    ("mariadb", "10.11.6-MariaDB", False), ("rds-mariadb", "11.4.2", False), ("mysql", "8.0.36", False),
    ("aurora-mysql", "8.0.mysql_aurora.3.05.2", False), ("mysql", "8.4.3", True), ("rds-mysql", "9.1.0", True)])
def test_which_servers_write_their_cascades_to_the_binlog(flavour: str, version: str, logged: bool) -> None:
    assert cascades_in_binlog(flavour, version) is logged
