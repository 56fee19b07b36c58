"""Names and values made safe to show: control characters spelled out instead of acted on (#26).

MySQL and MariaDB accept almost any character in a quoted table or column name — a newline, ESC, a
right-to-left override — and row values hold anything. Such text must never reach a place where a character
does something: a newline in a `-- ...` comment of a generated SQL script ends the comment and turns the rest
of the name into a statement; ESC in a terminal starts an escape sequence (clear the screen, retitle the
window, rewrite the line above). `visible` spells every such character out the way Python does (`\\x1b`,
`\\u202e`); everything else, non-ASCII letters included, is left as it is.
"""

from __future__ import annotations

import unicodedata


def _is_active(char: str) -> bool:
    # C* = control, format (bidi overrides, zero-width), surrogate, private use, unassigned;
    # Zl/Zp = the Unicode line and paragraph separators, which some editors and parsers end a line at.
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp")


def _spelled(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, *, newlines: bool = False) -> str:
    """`text` with every control, format and line-separator character spelled out (newline -> `\\x0a`, ESC ->
    `\\x1b`); with `newlines`, a newline stays one (a message's own line breaks, shown on a terminal)."""
    if text.isprintable():  # the common case: nothing to do (isprintable is False for every character above)
        return text
    return "".join(_spelled(c) if _is_active(c) and not (newlines and c == "\n") else c for c in text)


def sql_comment(text: str) -> str:
    """`text` safe inside an SQL comment, `-- ...` or `/* ... */`: one line, and no comment delimiter in it."""
    return visible(text).replace("*/", "* /").replace("/*", "/ *")
