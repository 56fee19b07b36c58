"""A batch's RENAME TABLEs done in Snowflake before its rows are merged (issue #30): crash-safe, swaps included.

spark-merge lists in a batch's manifest each table its run renamed, from its name when the run started to its name
at the end (`renames`: chains such as a -> b -> c arrive as a -> c, a swap of a and b as a -> b and b -> a). Each
Snowflake table follows (`ALTER TABLE ... RENAME TO`, its SCD2 history table with it) before the batch's MERGE, so
the batch's rows, written under either name, land in the table under its new name.

Snowflake commits each rename by itself, so they cannot share the batch's transaction, and "does the table exist"
cannot tell a swap not yet done from one done. So the renames go in two phases behind a marker table whose name
records the phase reached (renaming it is one atomic statement): phase 1 moves every renamed table to a name of its
own (`_CDC_MOVE_<batch>_<n>`), phase 2 moves those to the new names, dropping a table still under a new name
(a table dropped in MySQL before the RENAME took its name; or created empty there by a bootstrap that ran first).
A run killed at any statement reruns from its phase, and each step looks at what exists before it acts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc import sql
from cdc.snowflake import names

_Q = sql.quote_ident
MOVE_PREFIX = "_CDC_MOVE_"


def renamed_tables(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """(old, new) Snowflake names of the tables the batch renamed (a move to another database keeps its name)."""
    found = []
    for move in manifest.get("renames") or []:
        old, new = names.snowflake_name(move["from"][1]), names.snowflake_name(move["to"][1])
        if old != new:
            found.append((old, new))
    return found


def vacated(moves: list[tuple[str, str]]) -> set[str]:
    """Names the renames leave free: a table MySQL creates under one in the same batch is created by apply."""
    return {old for old, _ in moves} - {new for _, new in moves}


def _marker(batch_id: str, phase: int) -> str:
    return f"{MOVE_PREFIX}{batch_id.upper()}_{phase}"


def _scratch(batch_id: str, tag: str) -> str:
    return f"{MOVE_PREFIX}{batch_id.upper()}_T{tag}"


def move_tables(execute: Callable[[str], Any], existing: dict[str, dict[str, str]], batch_id: str,
                moves: list[tuple[str, str]]) -> list[str]:
    """Rename the batch's tables (and their history tables) in Snowflake; `existing` is kept up to date.

    Returns what was done, one line per rename. Nothing when the batch renamed nothing.
    """
    if not moves:
        return []
    pairs = [(old, new, f"{i}") for i, (old, new) in enumerate(moves)]
    pairs += [(names.derived_name(old, "_HISTORY"), names.derived_name(new, "_HISTORY"), f"{i}H")
              for i, (old, new) in enumerate(moves)]
    done: list[str] = []
    phase = next((p for p in (3, 2, 1) if _marker(batch_id, p) in existing), 0)
    if phase == 0:
        _run(execute, existing, f"CREATE TABLE {_Q(_marker(batch_id, 1))} (\"DONE\" BOOLEAN)", None,
             _marker(batch_id, 1))
        phase = 1
    if phase == 1:
        for old, _, tag in pairs:
            scratch = _scratch(batch_id, tag)
            if scratch not in existing and old in existing:
                _rename(execute, existing, old, scratch)
        _rename(execute, existing, _marker(batch_id, 1), _marker(batch_id, 2))
        phase = 2
    if phase == 2:
        for old, new, tag in pairs:
            scratch = _scratch(batch_id, tag)
            if scratch in existing:
                if new in existing:
                    _run(execute, existing, f"DROP TABLE IF EXISTS {_Q(new)}", new, None)
                _rename(execute, existing, scratch, new)
                done.append(f"rename table {old} to {new}")
        _rename(execute, existing, _marker(batch_id, 2), _marker(batch_id, 3))
    return done


def finish_recorded(execute: Callable[[str], Any], existing: dict[str, dict[str, str]],
                    recorded: Callable[[str], bool]) -> None:
    """Drop the markers a run killed after recording its batch left (start(): its marker tables, not every batch
    ever applied)."""
    for table in [t for t in existing if t.startswith(MOVE_PREFIX) and t.endswith("_3")]:
        batch_id = table[len(MOVE_PREFIX):-2].lower()
        if recorded(batch_id):
            finish(execute, existing, batch_id)


def finish(execute: Callable[[str], Any], existing: dict[str, dict[str, str]], batch_id: str) -> None:
    """Drop the batch's marker once the batch is recorded as applied (a rerun then skips the whole batch)."""
    marker = _marker(batch_id, 3)
    if marker in existing:
        _run(execute, existing, f"DROP TABLE IF EXISTS {_Q(marker)}", marker, None)


def _rename(execute: Callable[[str], Any], existing: dict[str, dict[str, str]], old: str, new: str) -> None:
    execute(f"ALTER TABLE {_Q(old)} RENAME TO {_Q(new)}")
    existing[new] = existing.pop(old)


def _run(execute: Callable[[str], Any], existing: dict[str, dict[str, str]], statement: str, gone: str | None,
         made: str | None) -> None:
    execute(statement)
    if gone is not None:
        existing.pop(gone, None)
    if made is not None:
        existing[made] = {}
