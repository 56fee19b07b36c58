"""Row changes the binlog carries as statement text: the tables they may have changed.

With binlog_format STATEMENT or MIXED (the global setting, or one session's `SET SESSION binlog_format`, as
pt-table-checksum does), an INSERT, UPDATE, DELETE, REPLACE or LOAD DATA reaches the binlog as its SQL text and
its rows are in no row event. Tail refuses a server whose global format is not ROW (cdc.source.capturable); what one
session logs as text is caught here: every table the statement may write is a table whose rows may have changed,
and tail flags each captured one for a re-snapshot instead of passing over the statement in silence.

Names are collected, not parsed, from the part of the statement that names what it writes: the INSERT / REPLACE /
LOAD DATA target, an UPDATE's table references (before SET), a DELETE's targets and table references (before
WHERE). Tables only read (`INSERT ... SELECT ... FROM src`, pt-table-checksum's `REPLACE INTO percona.checksums
SELECT ... FROM db.t`) are not flagged: a checksum run must not re-read every table it checks. A word that is no
table (an alias, a keyword) matches no captured table and is dropped by the caller, so the only error is a table
flagged that did not change. `called_names` gives the names called like functions anywhere in the statement: a
stored function among them may write other tables (cdc.capture.hidden_writes follows them, and triggers).
"""

from __future__ import annotations

import re

from cdc.capture.alter import Token, tokenize
from cdc.capture.ddl import clean_statement

_DML = re.compile(r"^(?:INSERT|REPLACE|UPDATE|DELETE|LOAD\s+(?:DATA|XML))\b", re.I)
_MODIFIERS = frozenset({"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "INTO"})
# Where the written part of each statement ends, at the top level (outside parentheses).
_ENDS = {"INSERT": {"(", "VALUES", "VALUE", "SET", "SELECT", "PARTITION", "WITH", "TABLE", "ON", "RETURNING"},
         "UPDATE": {"SET"}, "DELETE": {"WHERE", "ORDER", "LIMIT", "RETURNING", "FOR"}}


def statement_tables(sql: str, default_db: str) -> list[tuple[str, str]] | None:
    """(db, name) of every name a DML statement may write, in order, without repeats; None if `sql` is not DML."""
    tokens = _dml_tokens(sql)
    if tokens is None:
        return None
    verb = tokens[0].text.upper()
    if verb == "LOAD":
        at = next((i + 2 for i in range(len(tokens) - 2)
                   if tokens[i].text.upper() == "INTO" and tokens[i + 1].text.upper() == "TABLE"), len(tokens))
        return _qualified(tokens, at, default_db)
    kind = "INSERT" if verb == "REPLACE" else verb
    start = 1
    while start < len(tokens) and tokens[start].text.upper() in _MODIFIERS:
        start += 1
    return _names(_until(tokens[start:], _ENDS[kind]), default_db)


def called_names(sql: str, default_db: str) -> list[tuple[str, str]]:
    """(db, name) of every `name(` and `db.name(` in `sql` (a statement or a routine's or trigger's body): the
    stored functions it may call, among built-ins that name none."""
    tokens = tokenize(clean_statement(sql))
    found: dict[tuple[str, str], None] = {}
    for i, token in enumerate(tokens[:-1]):
        if token.kind in ("ident", "word") and tokens[i + 1].text == "(":
            qualified = i >= 2 and tokens[i - 1].text == "." and tokens[i - 2].kind in ("ident", "word")
            found[(tokens[i - 2].text, token.text) if qualified else (default_db, token.text)] = None
    return list(found)


def body_tables(body: str, default_db: str) -> list[tuple[str, str]]:
    """Every name and db.name of a trigger's or routine's body, outside literals and comments: what it may write
    (over-counted: a body is not parsed)."""
    return _names(tokenize(clean_statement(body)), default_db)


def _dml_tokens(sql: str) -> list[Token] | None:
    text = clean_statement(sql)
    return tokenize(text) if _DML.match(text) else None


def _qualified(tokens: list[Token], at: int, default_db: str) -> list[tuple[str, str]]:
    """The table named at `at` (`name` or `db.name`), or none past the end."""
    if at >= len(tokens):
        return []
    if at + 2 < len(tokens) and tokens[at + 1].text == ".":
        return [(tokens[at].text, tokens[at + 2].text)]
    return [(default_db, tokens[at].text)]


def _until(tokens: list[Token], ends: set[str]) -> list[Token]:
    """The tokens before the first top-level one in `ends` (a word, or "(" itself)."""
    depth = 0
    for i, token in enumerate(tokens):
        if depth == 0 and token.kind in ("word", "punct") and token.text.upper() in ends and i > 0:
            return tokens[:i]
        depth += {"(": 1, ")": -1}.get(token.text, 0) if token.kind == "punct" else 0
    return tokens


def _names(tokens: list[Token], default_db: str) -> list[tuple[str, str]]:
    found: dict[tuple[str, str], None] = {}
    for i, token in enumerate(tokens):
        if token.kind not in ("ident", "word"):
            continue
        found[(default_db, token.text)] = None
        if i + 2 < len(tokens) and tokens[i + 1].text == "." and tokens[i + 2].kind in ("ident", "word"):
            found[(token.text, tokens[i + 2].text)] = None
    return list(found)
