"""Row changes the binlog carries as statement text: the tables they may have changed.

With binlog_format STATEMENT or MIXED (the global setting, or one session's `SET SESSION binlog_format`, as
pt-table-checksum does), an INSERT, UPDATE, DELETE, REPLACE or LOAD DATA reaches the binlog as its SQL text and
its rows are in no row event. Tail refuses a server whose global format is not ROW (cdc.source.capturable); what one
session logs as text is caught here: every table the statement names is a table whose rows may have changed,
and tail flags each captured one for a re-snapshot instead of passing over the statement in silence.

Names are collected, not parsed: every `name` and `db.name` of the statement's text outside string literals and
comments. A word that is not a table (a column, a keyword) matches no captured table and is dropped by the
caller, so the only error is a table flagged that did not change: one re-read too many, never a change missed.
Not seen: tables a statement changes without naming them (a trigger's, a stored function's).
"""

from __future__ import annotations

import re

from cdc.capture.alter import tokenize
from cdc.capture.ddl import clean_statement

_DML = re.compile(r"^(?:INSERT|REPLACE|UPDATE|DELETE|LOAD\s+(?:DATA|XML))\b", re.I)


def statement_tables(sql: str, default_db: str) -> list[tuple[str, str]] | None:
    """(db, name) of every name a DML statement holds, in order, without repeats; None if `sql` is not DML."""
    text = clean_statement(sql)
    if not _DML.match(text):
        return None
    tokens = tokenize(text)
    found: dict[tuple[str, str], None] = {}
    for i, token in enumerate(tokens):
        if token.kind not in ("ident", "word"):
            continue
        found[(default_db, token.text)] = None
        if i + 2 < len(tokens) and tokens[i + 1].text == "." and tokens[i + 2].kind in ("ident", "word"):
            found[(token.text, tokens[i + 2].text)] = None
    return list(found)
