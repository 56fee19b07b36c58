"""Names an attacker who can create a table (or write a row) would pick: each tries to leave a quoted identifier,
a string literal or a comment line of generated SQL, or to act on a terminal."""

from __future__ import annotations

INJECT = 'DROP TABLE "PEOPLE";'
TABLES = [
    f"t\n{INJECT}\n--",  # the review's finding: a newline ends a `-- ...` comment line
    f"c\r{INJECT}\r/*",  # a lone CR, and a block comment opened
    f"q*/ {INJECT} /*",  # a block comment closed
    f"s'; {INJECT} --",  # a string literal closed
    f'd"; {INJECT} --',  # a quoted identifier closed
    "e\x1b[2J\x1b]0;owned\x07 \u202eevil",  # terminal escapes: clear screen, set title; a right-to-left override
]
COLUMNS = ["id", f"n\n{INJECT}\n--", "v*/ /*--'\"\x1b[31m"]
# A backslash: Snowflake reads it literally inside "...", the statement splitters as an escape.
BACKSLASHED = [f"b\\'; {INJECT} -- \\", "a\\"]


def q(name: str) -> str:
    """A MySQL quoted identifier."""
    return "`" + name.replace("`", "``") + "`"
