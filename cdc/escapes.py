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


def json_safe(text: str) -> str:
    """JSON text (as json.dumps writes it with ensure_ascii=False) with every active character `\\u`-escaped.

    JSON escapes only U+0000-U+001F itself: DEL, the C1 controls U+0080-U+009F (U+009B is a one-character CSI
    to a terminal that honours C1), bidi overrides and U+2028/U+2029 would reach the terminal raw, and --json
    output is read at a terminal as often as by a program. A `\\uXXXX` escape decodes to the same string, so
    the data a program reads is unchanged; outside strings JSON text is ASCII, so only strings are touched.
    """
    if text.isprintable():
        return text
    return "".join(_json_escape(c) if _is_active(c) and c != "\n" else c for c in text)  # "\n": indent=2's lines


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON spells a character beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def sql_comment(text: str) -> str:
    """`text` safe inside an SQL comment, `-- ...` or `/* ... */`: one line, and no comment delimiter in it."""
    return visible(text).replace("*/", "* /").replace("/*", "/ *")
