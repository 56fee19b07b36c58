"""The server's binlog filters (`binlog-do-db`, `binlog-ignore-db`): databases whose changes never reach the binlog.

Both are mysqld start-up options (no SET GLOBAL changes them), shown by the binlog status statement as
Binlog_Do_DB and Binlog_Ignore_DB. A row change is filtered by its table's database: a captured database the
filters leave out loses every change with no error anywhere, so tail refuses to start (exit 4) and check-binlog
fails. A statement (DDL) is filtered by the session's default database instead, whatever database its table is
in: with any filter set, an ALTER of a captured table run while `USE`-ing a filtered database is not logged
either, which check-binlog warns of.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

import pymysql

from cdc.errors import PreconditionError
from cdc.source.connect import PRIVILEGE_DENIED, query
from cdc.source.schema_reads import user_databases

FIX = ("remove binlog-do-db / binlog-ignore-db from the server's configuration and restart it (start-up options: SET "
       "GLOBAL cannot change them), or leave {databases} out of [mysql] databases")


@dataclass(frozen=True)
class BinlogFilters:
    do: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.do or self.ignore)

    def logs(self, db: str) -> bool:
        """A row change of a table in `db` reaches the binlog."""
        return (not self.do or db in self.do) and db not in self.ignore

    def describe(self) -> str:
        shown = [f"binlog_do_db={','.join(self.do)}" if self.do else "", f"binlog_ignore_db={','.join(self.ignore)}"
                 if self.ignore else ""]
        return " ".join(s for s in shown if s) or "none"


def read_filters(conn: pymysql.Connection, statement: str) -> BinlogFilters | None:
    """The filters from the binlog status statement (cdc.source.flavour.binlog_status_statement); None if binlog is off."""
    rows = query(conn, statement)
    if not rows:
        return None
    return BinlogFilters(_names(rows[0].get("Binlog_Do_DB")), _names(rows[0].get("Binlog_Ignore_DB")))


def _names(value: object) -> tuple[str, ...]:
    return tuple(n for n in str(value or "").split(",") if n)


def captured_databases(databases: Sequence[str], tables: Sequence[str], present: Iterable[str]) -> list[str]:
    """The databases among `present` (the server's own left out) that a capture with these filters reads from:
    matching a `databases` glob, and the database part of a `tables` glob (each when given)."""
    def read(db: str) -> bool:
        if databases and not any(fnmatchcase(db, pattern) for pattern in databases):
            return False
        return not tables or any(fnmatchcase(db, pattern.split(".", 1)[0]) for pattern in tables)
    return [db for db in present if read(db)]


def unlogged(filters: BinlogFilters, databases: Iterable[str]) -> list[str]:
    """The databases among `databases` whose row changes the binlog leaves out."""
    return [db for db in databases if not filters.logs(db)]


def require_logged(conn: pymysql.Connection, statement: str, databases: Sequence[str], tables: Sequence[str],
                   where: str) -> None:
    """Refuse (exit 4) a server whose binlog filters leave a captured database out: its changes would never come."""
    try:
        filters = read_filters(conn, statement)
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] in PRIVILEGE_DENIED:  # no BINLOG MONITOR: tail's next step names the grant
            return
        raise
    if filters is None or not filters.any:
        return
    lost = unlogged(filters, captured_databases(databases, tables, user_databases(conn)))
    if lost:
        raise PreconditionError(
            f"{where} leaves {', '.join(lost)} out of its binlog ({filters.describe()}): tail would never see a "
            "change of their tables",
            hint=FIX.format(databases=", ".join(lost)))
