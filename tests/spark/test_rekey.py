"""Where a merge run ends before a primary-key change (cdc.spark.rekey): only where the run has row changes of
the table on both sides of it, so a run always makes progress (the end-to-end proof: tests/pipeline/test_key_change.py)."""

from __future__ import annotations

from pathlib import Path

from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.spark.rekey import key_change_cut
from cdc.spark.scan import TableStats

COLUMNS = (Column("a", "int(11)", "int", nullable=False), Column("b", "int(11)", "int", nullable=False))


def _history(tmp_path: Path) -> SchemaHistory:
    history = SchemaHistory(tmp_path / "schema")
    history.record(TableSchema("d", "t", COLUMNS, ("a",), "0000000001:000000000100:b000000000000"))
    history.record(TableSchema("d", "t", COLUMNS, ("b", "a"), "0000000001:000000000200:b000000000000"))
    history.record(TableSchema("d", "t", COLUMNS, ("a", "b"), "0000000001:000000000250:b000000000000"))  # same key
    history.record(TableSchema("d", "t", COLUMNS, ("b",), "0000000001:000000000300:b000000000000"))
    return history


def _stats(rows: int, low: str | None, last: str) -> TableStats:
    return TableStats("d", "t", rows, low, last, last, None, None)


def test_a_run_ends_at_the_first_key_change_with_row_changes_before_it(tmp_path: Path) -> None:
    history = _history(tmp_path)
    at = "0000000001:{:012d}:b000000000000".format
    assert key_change_cut(history, [_stats(3, at(150), at(350))]) == at(200)
    assert key_change_cut(history, [_stats(3, at(210), at(350))]) == at(300)  # (b, a) -> (a, b) is no change
    assert key_change_cut(history, [_stats(3, at(150), at(199))]) is None  # the change is not in the run
    assert key_change_cut(history, [_stats(3, at(200), at(299))]) is None  # rows from the ALTER on: one key
    assert key_change_cut(history, [_stats(0, None, at(350))]) is None  # DDL only: nothing to keep apart
    other = TableStats("d", "u", 5, at(100), at(400), at(400), None, None)  # no history: never cut
    assert key_change_cut(history, [other, _stats(1, at(260), at(301))]) == at(300)
