"""What an ALTER TABLE's partition clauses do to rows the binlog never shows.

Partition maintenance reaches the binlog as the statement alone, in every binlog format: the rows it deletes
or moves are in no row event. Time-partitioned tables whose oldest partition is dropped, truncated or
exchanged into an archive table every day are a common retention scheme, so these are ordinary statements:

    TRUNCATE PARTITION p[, ...]            the partitions' rows deleted (ALL: every row, as TRUNCATE TABLE)
    DROP PARTITION [IF EXISTS] p[, ...]    the partitions and their rows deleted
    EXCHANGE PARTITION p WITH TABLE t      the partition's rows and t's swapped: both tables change
    CONVERT PARTITION p TO TABLE t         (MariaDB) the partition's rows moved into a new table t
    CONVERT TABLE t TO PARTITION p ...     (MariaDB) t's rows moved in as a partition, and t is gone
    IMPORT [PARTITION p] TABLESPACE        rows read from tablespace files put in place of the old ones

Which rows a partition held is the partitioning function's answer, which the change log cannot evaluate
exactly for every function (KEY hashes, TO_DAYS of a DATETIME); the repair is the table's online re-snapshot,
which reads what it holds now and deletes what it no longer does. Clauses that only move rows between
partitions (ADD, REORGANIZE, COALESCE, REBUILD, REMOVE PARTITIONING, PARTITION BY) change no row: left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.capture.alter import Token, split_clauses, tokenize


@dataclass(frozen=True)
class OtherTable:
    """The second table of an EXCHANGE or CONVERT: `db` None means the statement's default database."""

    db: str | None
    table: str
    kind: str  # the DDL line it gets: alter (its rows changed too) | create (made with rows) | drop (gone)
    reason: str  # why its rows are not what the binlog says ("" for a drop: its rows are all gone)


@dataclass(frozen=True)
class PartitionEffects:
    reason: str = ""  # why the altered table's rows are not what the binlog says; "" if none changed
    truncated: bool = False  # TRUNCATE PARTITION ALL: every row gone, exactly as TRUNCATE TABLE
    others: tuple[OtherTable, ...] = ()


def partition_effects(specs: str, table: str) -> PartitionEffects:
    """The row effects of an ALTER TABLE's clause list (the text after the table name) on `table` and others."""
    reasons: list[str] = []
    others: list[OtherTable] = []
    truncated = False
    for clause in split_clauses(specs):
        words = tokenize(clause)
        if _starts(words, "TRUNCATE", "PARTITION"):
            if len(words) == 3 and words[2].is_word("ALL"):
                truncated = True
            reasons.append("TRUNCATE PARTITION deleted rows with no row event")
        elif _starts(words, "DROP", "PARTITION"):
            reasons.append("DROP PARTITION deleted rows with no row event")
        elif _starts(words, "EXCHANGE", "PARTITION") and (name := _name_after(words, "TABLE")) is not None:
            reasons.append(f"EXCHANGE PARTITION swapped rows with table {name[1]} with no row event")
            others.append(OtherTable(*name, "alter", f"EXCHANGE PARTITION swapped its rows with table {table} with "
                                                     "no row event"))
        elif _starts(words, "CONVERT", "PARTITION") and (name := _name_after(words, "TABLE")) is not None:
            reasons.append(f"CONVERT PARTITION moved rows to table {name[1]} with no row event")
            others.append(OtherTable(*name, "create", f"CONVERT PARTITION made it from rows of table {table} with "
                                                      "no row event"))
        elif _starts(words, "CONVERT", "TABLE") and (name := _name_at(words, 2)) is not None:
            reasons.append(f"CONVERT TABLE moved the rows of table {name[1]} in with no row event")
            others.append(OtherTable(*name, "drop", ""))
        elif _starts(words, "IMPORT") and words[-1].is_word("TABLESPACE"):
            reasons.append("IMPORT TABLESPACE put rows in place with no row event")
    if truncated and len(reasons) == 1:
        return PartitionEffects(truncated=True)
    return PartitionEffects("; ".join(dict.fromkeys(reasons)), False, tuple(others))


def _starts(tokens: list[Token], *words: str) -> bool:
    return len(tokens) >= len(words) and all(t.is_word(w) for t, w in zip(tokens, words, strict=False))


def _name_after(tokens: list[Token], word: str) -> tuple[str | None, str] | None:
    """The `[db.]table` name right after the clause's first `word` past its head (None if none is there)."""
    at = next((i for i in range(1, len(tokens)) if tokens[i].is_word(word)), None)
    return None if at is None else _name_at(tokens, at + 1)


def _name_at(tokens: list[Token], at: int) -> tuple[str | None, str] | None:
    """(db or None, table) of the `[db.]table` name starting at tokens[at]."""
    rest = tokens[at:]
    if len(rest) >= 3 and rest[1].kind == "punct" and rest[1].text == "." and _is_name(rest[0]) and _is_name(rest[2]):
        return rest[0].text, rest[2].text
    if rest and _is_name(rest[0]):
        return None, rest[0].text
    return None


def _is_name(token: Token) -> bool:
    return token.kind in ("ident", "word")
