"""What snowflake-apply reports: MERGE counts per table, a run's summary, and a refused MERGE as a message that
names the batch, the table and the fix. Read from the connector's cursor; no statement is sent here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cdc import sql
from cdc.errors import CdcError, DataError, TransientError

_Q = sql.quote_ident


@dataclass
class Counts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    def add(self, other: Counts) -> None:
        self.inserted += other.inserted
        self.updated += other.updated
        self.deleted += other.deleted


@dataclass
class Summary:
    applied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already in the bookkeeping table
    tables: dict[str, Counts] = field(default_factory=dict)
    transactional: bool = True
    last_batch: str | None = None
    cleanup_skipped: bool = False  # staged files could not be removed (harmless, see _cleanup)
    stopped: bool = False  # a stop came while sealed batches were still waiting (--until-now is then incomplete)
    evolved: list[str] = field(default_factory=list)  # column changes made to follow MySQL's DDL
    statements: int = 0  # statements sent to Snowflake by this run (each a round trip)

    def to_dict(self) -> dict[str, Any]:
        return {"batches": len(self.applied), "applied": self.applied, "skipped": self.skipped,
                "last_batch": self.last_batch, "transactional": self.transactional, "evolved": self.evolved,
                "statements": self.statements,
                "tables": {k: vars(v) for k, v in sorted(self.tables.items())}}


def affected(cursor: Any) -> int:
    """Rows a DELETE/INSERT changed: Snowflake returns them as a result row, the rowcount elsewhere."""
    row = cursor.fetchone() if cursor.description else None
    if row and isinstance(row[0], int):
        return row[0]
    return max(int(cursor.rowcount or 0), 0)


def stuck(batch_id: str, key: str, table: str, exc: CdcError, not_null: list[str]) -> CdcError:
    """A MERGE Snowflake refused, naming the batch, the table, the NOT NULL column(s) it may have hit, and the fix.

    Every later batch waits behind it (batches apply in order), so `cdc status` shows this as apply's last error.
    """
    if isinstance(exc, TransientError):
        return exc  # the link failed, not the batch: nothing is stuck, a rerun applies it
    if not not_null:
        return DataError(f"batch {batch_id}: MySQL table {key} (Snowflake {table}) cannot be applied; it and every "
                         f"later batch wait: {exc.message}", hint=exc.hint)
    fix = "; ".join(f"ALTER TABLE {_Q(table)} ALTER COLUMN {_Q(c)} DROP NOT NULL" for c in not_null)
    return DataError(
        f"batch {batch_id}: MySQL table {key} (Snowflake {table}) cannot be applied; it and every later batch wait. "
        f"Column(s) {', '.join(not_null)} are NOT NULL in Snowflake, and MySQL's schema at this batch need not fill "
        f"them (renamed, dropped, or added later): {exc.message}",
        hint=f"{fix}; then rerun snowflake-apply (cdc puts NOT NULL only on key columns)")


def merge_counts(cursor: Any) -> Counts:
    row = cursor.fetchone() or ()
    found = Counts()
    for column, value in zip(cursor.description or (), row, strict=False):
        label = column[0].lower()
        for kind in ("inserted", "updated", "deleted"):
            if kind in label:
                setattr(found, kind, int(value or 0))
    return found
