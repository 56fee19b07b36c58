"""Tables a statement logged as SQL text changes without naming them: through triggers and stored functions.

A row change logged as text (cdc.capture.statements) fires the triggers of the tables it writes and runs the stored
functions it calls, and their changes are in no row event either (the replica re-runs them). Their bodies are read
from information_schema, as they are now (a trigger or function changed since the statement is read in its new
form), and followed: the tables a body names, the triggers on those, the functions a body calls, until nothing
new is found. A body's names are collected, not parsed, so a table only read there is flagged too.

information_schema shows a trigger only to a user with the TRIGGER privilege on its table, and a routine's body
only to its definer or a user who may read `mysql.proc` (MariaDB) / has SHOW_ROUTINE (MySQL); what cdc's user cannot
see it cannot follow (docs/limits.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cdc.capture.statements import body_tables, called_names

Name = tuple[str, str]  # (schema, name)
Query = Callable[[str, Any], list[dict[str, Any]]]

_TRIGGERS = ("SELECT TRIGGER_SCHEMA AS s, ACTION_STATEMENT AS body FROM information_schema.TRIGGERS "
             "WHERE (EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE) IN ({})")
_FUNCTIONS = ("SELECT ROUTINE_SCHEMA AS s, ROUTINE_DEFINITION AS body FROM information_schema.ROUTINES "
              "WHERE ROUTINE_TYPE = 'FUNCTION' AND (ROUTINE_SCHEMA, ROUTINE_NAME) IN ({})")


def reached_tables(query: Query, written: Iterable[Name], called: Iterable[Name]) -> dict[Name, bool]:
    """Every table the statement may change: `written` (False) and those its triggers and functions reach (True).

    One query per level of triggers and one per level of functions: a statement with neither costs two."""
    found: dict[Name, bool] = dict.fromkeys(written, False)
    tables, routines, seen_routines = list(found), list(dict.fromkeys(called)), set()
    while tables or routines:
        bodies = _bodies(query, _TRIGGERS, tables) + _bodies(query, _FUNCTIONS, routines)
        seen_routines.update(routines)
        tables, routines = [], []
        for schema, body in bodies:
            for name in body_tables(body, schema):
                if name not in found:
                    found[name] = True
                    tables.append(name)
            routines += [n for n in called_names(body, schema) if n not in seen_routines and n not in routines]
    return found


def _bodies(query: Query, sql: str, names: list[Name]) -> list[tuple[str, str]]:
    """(schema, body) of the triggers on / functions named `names`; a body hidden from cdc's user is NULL: left out."""
    if not names:
        return []
    rows = query(sql.format(", ".join(["(%s, %s)"] * len(names))), [part for name in names for part in name])
    return [(str(r["s"]), str(r["body"])) for r in rows if r["body"] is not None]
