"""A batch's RENAME TABLEs in Snowflake (cdc.snowflake.moves): a swap killed after any statement and rerun ends
exactly as one uninterrupted run (fakesnow)."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.snowflake.bootstrap import existing_columns
from cdc.snowflake.moves import finish_recorded, move_tables, renamed_tables
from tests.snowflake.stand_in import rows

MANIFEST = {"renames": [{"from": ["d", "a"], "to": ["d", "b"]}, {"from": ["d", "b"], "to": ["x", "A"]},
                        {"from": ["d", "c"], "to": ["e", "c"]}]}  # a swap (a -> b, b -> a) and a move keeping its name


class Killed(Exception):
    pass


def _tables(sf: Any) -> dict[str, list[Any]]:
    names = [r[0] for r in rows(sf, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = "
                                    "CURRENT_SCHEMA() ORDER BY 1")]
    return {n: [r[0] for r in rows(sf, f'SELECT "WHO" FROM "{n}"')] for n in names if not n.startswith("_CDC_")}


@pytest.mark.parametrize("kill_after", [None, *range(11)])  # 11 statements: marker, 4 + 1, 4 + 1
def test_a_swap_killed_anywhere_and_rerun_ends_exact(sf: Any, kill_after: int | None) -> None:  # noqa: F811
    for name in ("A", "B", "A_HISTORY", "B_HISTORY"):
        rows(sf, f'CREATE TABLE "{name}" ("WHO" VARCHAR)')
        rows(sf, f'INSERT INTO "{name}" VALUES (?)', (f"was {name}",))
    rows(sf, 'CREATE TABLE "X" ("WHO" VARCHAR)')  # unrelated
    moves = renamed_tables(MANIFEST)
    assert moves == [("A", "B"), ("B", "A")]
    done: list[str] = []

    def execute(statement: str) -> None:
        if kill_after is not None and len(done) == kill_after:
            raise Killed(statement)
        rows(sf, statement)
        done.append(statement)

    def existing() -> dict[str, dict[str, str]]:
        return existing_columns(sf.cursor(), rows(sf, "SELECT CURRENT_SCHEMA()")[0][0])

    if kill_after is not None:
        with pytest.raises(Killed):
            move_tables(execute, existing(), "b000000000007", moves)
        kill_after = None
    move_tables(execute, existing(), "b000000000007", moves)
    move_tables(execute, existing(), "b000000000007", moves)  # a rerun after the renames changes nothing
    assert _tables(sf) == {"A": ["was B"], "B": ["was A"], "A_HISTORY": ["was B_HISTORY"],
                           "B_HISTORY": ["was A_HISTORY"], "X": []}


def test_a_start_drops_only_the_markers_of_recorded_batches(sf: Any) -> None:  # noqa: F811
    """A run killed after recording a batch with renames leaves its marker; the next start drops it by the marker
    tables it finds (not by every batch id ever applied: a long run's bookkeeping is not fetched whole)."""
    for name in ("A", "B", "A_HISTORY", "B_HISTORY"):
        rows(sf, f'CREATE TABLE "{name}" ("WHO" VARCHAR)')

    def existing() -> dict[str, dict[str, str]]:
        return existing_columns(sf.cursor(), rows(sf, "SELECT CURRENT_SCHEMA()")[0][0])

    move_tables(lambda statement: rows(sf, statement), existing(), "b000000000007", renamed_tables(MANIFEST))
    marker = "_CDC_MOVE_B000000000007_3"
    assert marker in existing()
    finish_recorded(lambda statement: rows(sf, statement), existing(), lambda batch_id: batch_id != "b000000000007")
    assert marker in existing()  # not recorded: a rerun of the batch still needs it
    finish_recorded(lambda statement: rows(sf, statement), existing(), lambda batch_id: batch_id == "b000000000007")
    assert marker not in existing() and "A" in existing()
