"""What an ALTER TABLE does to columns, read from its text: added (with their DEFAULT), dropped, renamed.

MySQL fills every existing row of an added column without a row event (its DEFAULT, the type's implicit value
under NOT NULL, or NULL); the binlog's table map carries no defaults and information_schema read later may
already show a later ALTER, so the statement's own text is the position-exact source (issue #30). A small
tokenizer, not a SQL parser: it understands

    ADD [COLUMN] [IF NOT EXISTS] name type [NULL|NOT NULL] [DEFAULT literal|(expr)] [FIRST|AFTER x]
    ADD [COLUMN] [IF NOT EXISTS] (name type ..., name type ...)
    DROP [COLUMN] [IF EXISTS] name       RENAME COLUMN a TO b       CHANGE [COLUMN] [IF EXISTS] a b type ...

and leaves every other clause (indexes, MODIFY, options) alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Tokens: `ident`, 'string' / "string" (doubled quotes and backslash escapes), numbers, words, punctuation.
_TOKEN = re.compile(r"""\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")|"""
                    r"""(0[xX][0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?)|"""
                    r"""([A-Za-z_$@\u0080-\uffff][A-Za-z0-9_$@\u0080-\uffff]*)|(\S))""", re.S)
_NOT_A_COLUMN = frozenset({"INDEX", "KEY", "CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "FULLTEXT", "SPATIAL",
                           "CHECK", "PARTITION", "PERIOD", "SYSTEM", "VECTOR"})
_LITERAL_WORDS = frozenset({"NULL", "TRUE", "FALSE"})
# Column attributes whose values MySQL computes for existing rows: unknowable from the binlog.
_COMPUTED = frozenset({"AUTO_INCREMENT", "AS", "GENERATED"})
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


@dataclass(frozen=True)
class Token:
    kind: str  # ident | string | number | word | punct
    text: str  # identifiers and strings unquoted; words as written

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


@dataclass(frozen=True)
class AddedColumn:
    name: str
    not_null: bool
    # ("none",) no DEFAULT; ("null",); ("string", text); ("number", text); ("bool", "1"/"0");
    # ("hex", text) for x'..'/0x..; ("bits", text) for b'..'; ("computed", why) when MySQL evaluates it at ALTER time
    default: tuple[str, ...]


@dataclass
class AlterColumns:
    added: list[AddedColumn] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (old, new)
    retyped: bool = False  # a MODIFY, CHANGE or CONVERT TO: a column's type changes (not read from the text)
    # Generated columns a MODIFY or CHANGE (re)defines: MySQL computes them again in every row, without row events.
    regenerated: list[str] = field(default_factory=list)


def tokenize(text: str) -> list[Token]:
    tokens = []
    for match in _TOKEN.finditer(text):
        ident, string, number, word, punct = match.groups()
        if ident is not None:
            tokens.append(Token("ident", ident[1:-1].replace("``", "`")))
        elif string is not None:
            tokens.append(Token("string", _unquote_string(string)))
        elif number is not None:
            tokens.append(Token("number", number))
        elif word is not None:
            tokens.append(Token("word", word))
        elif punct is not None:
            tokens.append(Token("punct", punct))
    return tokens


def _unquote_string(literal: str) -> str:
    quote, body, out, i = literal[0], literal[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_ESCAPES.get(nxt, nxt if nxt not in "%_" else "\\" + nxt))
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def split_clauses(specs: str) -> list[str]:
    """An ALTER's clause list split at its top-level commas, each clause's text as written (stripped)."""
    parts, start, depth = [], 0, 0
    for match in _TOKEN.finditer(specs):
        text = match.group().strip()
        if text in ("(", ")"):
            depth += 1 if text == "(" else -1
        elif text == "," and depth == 0:
            parts.append(specs[start:match.start()].strip())
            start = match.end()
    parts.append(specs[start:].strip())
    return [p for p in parts if p]


def _split(tokens: list[Token]) -> list[list[Token]]:
    """Split on commas outside parentheses."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for token in tokens:
        if token.kind == "punct" and token.text == "(":
            depth += 1
        elif token.kind == "punct" and token.text == ")":
            depth -= 1
        if token.kind == "punct" and token.text == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(token)
    return [p for p in parts if p]


def parse_alter_columns(specs: str) -> AlterColumns:
    """The column changes of an ALTER TABLE's clause list (the text after the table name)."""
    found = AlterColumns()
    for clause in _split(tokenize(specs)):
        head = clause[0]
        if head.is_word("ADD"):
            _add(clause[1:], found)
        elif head.is_word("DROP"):
            rest = _skip(clause[1:], "COLUMN")
            if rest and not (rest[0].kind == "word" and rest[0].text.upper() in _NOT_A_COLUMN):
                rest = _skip_if_exists(rest)
                if rest and rest[0].kind in ("ident", "word"):
                    found.dropped.append(rest[0].text)
        elif head.is_word("RENAME") and len(clause) >= 4 and clause[1].is_word("COLUMN") and clause[3].is_word("TO"):
            found.renamed.append((clause[2].text, clause[4].text))
        elif head.is_word("MODIFY") or (head.is_word("CONVERT") and len(clause) > 1 and clause[1].is_word("TO")):
            found.retyped = True  # CONVERT TO CHARACTER SET; not CONVERT PARTITION / TABLE (cdc.capture.partitions)
            if head.is_word("MODIFY"):
                _regenerated(_skip_if_exists(_skip(clause[1:], "COLUMN")), found)
        elif head.is_word("CHANGE"):
            found.retyped = True
            rest = _skip_if_exists(_skip(clause[1:], "COLUMN"))
            if len(rest) >= 2 and rest[0].text != rest[1].text:
                found.renamed.append((rest[0].text, rest[1].text))
            _regenerated(rest[1:], found)
    return found


def _regenerated(definition: list[Token], found: AlterColumns) -> None:
    """A column definition (name first) with `AS (expr)` or `GENERATED ALWAYS AS`: a generated column."""
    if definition and _attribute_words(definition[1:]) & {"AS", "GENERATED"}:
        found.regenerated.append(definition[0].text)


def _attribute_words(attributes: list[Token]) -> set[str]:
    """The words of a column definition outside parentheses (not those of a type's, DEFAULT's or AS' expression)."""
    words, depth = set(), 0
    for token in attributes:
        if token.kind == "punct" and token.text in "()":
            depth += 1 if token.text == "(" else -1
        elif not depth and token.kind == "word":
            words.add(token.text.upper())
    return words


def _skip(tokens: list[Token], word: str) -> list[Token]:
    return tokens[1:] if tokens and tokens[0].is_word(word) else tokens


def _skip_if_exists(tokens: list[Token]) -> list[Token]:
    if len(tokens) >= 2 and tokens[0].is_word("IF") and tokens[1].is_word("EXISTS"):
        return tokens[2:]
    if len(tokens) >= 3 and tokens[0].is_word("IF") and tokens[1].is_word("NOT") and tokens[2].is_word("EXISTS"):
        return tokens[3:]
    return tokens


def _add(tokens: list[Token], found: AlterColumns) -> None:
    rest = _skip_if_exists(_skip(tokens, "COLUMN"))
    if not rest or (rest[0].kind == "word" and rest[0].text.upper() in _NOT_A_COLUMN):
        return
    if rest[0].kind == "punct" and rest[0].text == "(":
        inner = rest[1:-1] if rest[-1].kind == "punct" and rest[-1].text == ")" else rest[1:]
        for definition in _split(inner):
            if definition[0].kind == "word" and definition[0].text.upper() in _NOT_A_COLUMN:
                continue
            found.added.append(_column(definition))
        return
    found.added.append(_column(rest))


def _column(tokens: list[Token]) -> AddedColumn:
    name, attributes = tokens[0].text, tokens[1:]
    not_null = False
    default: tuple[str, ...] = ("none",)
    depth = 0
    for index, token in enumerate(attributes):
        if token.kind == "punct" and token.text in "()":
            depth += 1 if token.text == "(" else -1
            continue
        if depth or token.kind != "word":
            continue
        word = token.text.upper()
        if word == "NOT" and index + 1 < len(attributes) and attributes[index + 1].is_word("NULL"):
            not_null = True
        elif word in _COMPUTED and default[0] != "computed":
            default = ("computed", f"{name}: {word}")
        elif word == "DEFAULT" and default[0] != "computed":
            default = _default(attributes[index + 1:], name)
    return AddedColumn(name, not_null, default)


def _default(tokens: list[Token], name: str) -> tuple[str, ...]:
    if not tokens:
        return ("computed", f"{name}: DEFAULT without a value")
    sign = ""
    if tokens[0].kind == "punct" and tokens[0].text in "+-" and len(tokens) > 1 and tokens[1].kind == "number":
        sign, tokens = ("-" if tokens[0].text == "-" else ""), tokens[1:]
    first = tokens[0]
    if first.kind == "number" and first.text[:2].lower() == "0x":
        return ("hex", first.text[2:])
    if first.kind == "number":
        return ("number", sign + first.text)
    if first.kind == "string":
        return ("string", first.text)
    if first.kind == "word" and first.text.upper() in _LITERAL_WORDS:
        word = first.text.upper()
        return ("null",) if word == "NULL" else ("bool", "1" if word == "TRUE" else "0")
    if first.kind == "word" and len(tokens) > 1 and tokens[1].kind == "string":
        letter = first.text.lower()
        if letter == "x":
            return ("hex", tokens[1].text)
        if letter == "b":
            return ("bits", tokens[1].text)
        if letter.startswith("_"):  # a charset introducer: _utf8mb4'text'
            return ("string", tokens[1].text)
    # (expr), CURRENT_TIMESTAMP, NOW(), uuid(): evaluated by MySQL when the ALTER runs.
    return ("computed", f"{name}: DEFAULT {'(expression)' if first.text == '(' else first.text}")
