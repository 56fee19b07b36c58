"""check-binlog's verdicts on the tables' keys, pure functions of the facts (cdc.source.facts).

A primary key per table (or the UNIQUE NOT NULL key cdc uses instead), and each cascading foreign key with how
cdc handles the child rows its cascades change.
"""

from __future__ import annotations

from typing import Any

from cdc.schema import cascades_in_binlog
from cdc.source.facts import Facts
from cdc.source.tables import exclude_setting
from cdc.source.verdicts import OK, WARN, Check

SHOWN_TABLES = 10


def check_primary_keys(facts: Facts) -> Check:
    """Tables keyed by a UNIQUE NOT NULL key instead of a primary key are named; keyless ones warn (issue #24)."""
    tables = facts.tables_without_pk
    scope = ", ".join(facts.databases) or "all non-system databases"
    unique = [f"{name} ({', '.join(key)})" for name, key in sorted(facts.unique_keys.items())]
    keyed = f"; keyed by their UNIQUE NOT NULL key instead: {_shown(unique)}" if unique else ""
    if not tables:
        every = "has a primary key" if not unique else "has a primary key or a UNIQUE NOT NULL key"
        return Check("primary_keys", OK, f"every captured table in {scope} {every}{keyed}", "a primary key per table")
    return Check("primary_keys", WARN, f"{len(tables)} table(s) without a primary key: {_shown(list(tables))}{keyed}",
                 "a primary key per table",
                 "keyless tables are copied with snapshot --allow-no-pk and replicated as multisets of whole rows "
                 "(duplicates kept; verify compares them whole, which costs memory per distinct row); "
                 "or add a primary key (ALTER TABLE ... ADD PRIMARY KEY (...))")


def check_versioned(facts: Facts) -> Check:
    """MariaDB's system-versioned tables are refused by snapshot and tail (cdc.source.tables): name them first."""
    expected = "none, or left out ([mysql] exclude_tables)"
    if not facts.versioned_tables:
        return Check("system_versioned", OK, "none", expected)
    return Check("system_versioned", WARN, f"{len(facts.versioned_tables)} system-versioned table(s), not replicated: "
                 f"{_shown(list(facts.versioned_tables))}", expected,
                 f"leave them out of capture: {exclude_setting(list(facts.versioned_tables))} in cdc.toml "
                 "(snapshot refuses them otherwise)")


def _shown(names: list[str]) -> str:
    more = f" and {len(names) - SHOWN_TABLES} more" if len(names) > SHOWN_TABLES else ""
    return ", ".join(names[:SHOWN_TABLES]) + more


def _captured(facts: Facts, db: str) -> bool:
    return db in facts.databases if facts.databases else True


def cascade_notes(facts: Facts) -> list[dict[str, Any]]:
    """Each cascading foreign key (ON DELETE/UPDATE CASCADE, SET NULL, SET DEFAULT) and how cdc handles it."""
    logged = cascades_in_binlog(facts.server.flavour, facts.server.version)
    notes = []
    for key in facts.foreign_keys:
        if not key.cascades:
            continue
        if "SET DEFAULT" in (key.on_delete, key.on_update):
            handling = "not reproduced: InnoDB refuses SET DEFAULT, so such a key never changes a row"
        elif not _captured(facts, key.db):
            handling = (f"child table {key.child} is not captured: spark-merge reports the cascades of "
                        f"{key.parent} into it and changes nothing there")
        elif not _captured(facts, key.ref_db):
            handling = (f"parent table {key.parent} is not captured: its changes, and so the cascades they make "
                        f"into {key.child}, are not seen (capture {key.ref_db} too)")
        elif logged:
            handling = "the binlog carries the changed child rows; spark-merge applies them once, as they are"
        else:
            handling = ("reproduced by spark-merge: the child rows InnoDB changes (and the binlog omits) are "
                        "changed at the parent's position")
        notes.append({**key.to_dict(), "handling": handling})
    return notes


def check_foreign_keys(facts: Facts) -> Check:
    expected = "cascading foreign keys reproduced in the lake and Snowflake"
    if "foreign_keys" in facts.errors:
        return Check("foreign_keys", WARN, f"cannot read: {facts.errors['foreign_keys']}", expected,
                     "GRANT SELECT on the replicated databases (information_schema shows only visible tables)")
    notes = cascade_notes(facts)
    if not notes:
        return Check("foreign_keys", OK, f"{len(facts.foreign_keys)} foreign key(s), none cascading", expected)
    unhandled = [n for n in notes if not n["handling"].startswith(("reproduced", "the binlog"))]
    how = ("the binlog carries their rows" if cascades_in_binlog(facts.server.flavour, facts.server.version)
           else "spark-merge reproduces them (the binlog omits their rows)")
    value = f"{len(notes)} cascading foreign key(s): {how}"
    if not unhandled:
        return Check("foreign_keys", OK, value, expected)
    names = ", ".join(f"{n['db']}.{n['table']}.{n['name']}" for n in unhandled[:SHOWN_TABLES])
    return Check("foreign_keys", WARN, f"{value}; not reproduced: {names}", expected,
                 "capture the child tables too (--databases); see cascading_foreign_keys in --json")
