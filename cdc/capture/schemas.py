"""What the binlog does not carry about a captured table, recorded in the schema history at its position.

A table map names columns by type only; the JSON flag, the keys, the foreign keys and what an ALTER did to the
rows already there come from information_schema, read over a control connection (a second connection beside the
binlog stream), and are recorded at the position of the event that made them true: the table map of a new or
changed shape, the ALTER itself, a RENAME, any DDL that may change a foreign key at either of its ends.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import pymysql

from cdc.capture.ddl import TableDdl
from cdc.capture.fills import alter_effects
from cdc.capture.filters import Filters
from cdc.capture.hidden_writes import reached_tables
from cdc.capture.statements import called_names, statement_tables
from cdc.config import MySQLSettings
from cdc.errors import DataError, TransientError
from cdc.rows.table_map import schema_from_map
from cdc.schema import SchemaHistory, TableSchema
from cdc.schema.retype import STRICT_ALL_TABLES, STRICT_TRANS_TABLES, Session
from cdc.source.binlog import Event
from cdc.source.connect import bounded_waits, open_connection, query
from cdc.source.schema_reads import read_foreign_keys, read_table_schema
from cdc.source.tables import SEQUENCE_COLUMNS

log = logging.getLogger(__name__)
T = TypeVar("T")

_VERSIONING = re.compile(r"\b(?:ADD|WITH)\s+SYSTEM\s+VERSIONING\b", re.I)
PARTIAL_IMAGES = ("rows changed by an event with partial row images (binlog_row_image MINIMAL or NOBLOB in the "
                  "writing session; the global setting is FULL)")


class SchemaRecorder:
    """The schema history of one tail run, and the control connection that fills in what the binlog lacks."""

    def __init__(self, history: SchemaHistory, filters: Filters, mysql: MySQLSettings, *,
                 control: pymysql.Connection | None = None, control_timeout: float | None = None) -> None:
        self.history, self.filters, self.mysql = history, filters, mysql
        self._ctl: Any = control  # for schemas and lag; (re)opened on first use when None or closed
        # Reopened with every wait bounded (cdc.source.connect.bounded_waits): a query into a dead link must fail.
        self._ctl_options: dict[str, Any] = {} if control_timeout is None else bounded_waits(mysql, control_timeout)
        # Names a statement logged as SQL text held that are no table (columns, keywords): not asked again until
        # the next DDL, which may create one (forget_absent).
        self._absent: set[tuple[str, str]] = set()
        self._mariadb: bool | None = None
        self._partial: set[tuple[str, str]] = set()  # tables warned of partial row images in this run

    # --- the control connection --------------------------------------------------------------------------

    def control(self) -> pymysql.Connection:
        """A second connection for queries (schemas, lag), opened on first use."""
        if self._ctl is None or not self._ctl.open:
            self._ctl = open_connection(self.mysql, **self._ctl_options)
        return self._ctl

    def is_mariadb(self) -> bool:
        """The server's flavour, asked once (how it cuts fractional seconds at an ALTER: cdc.schema.retype)."""
        if self._mariadb is None:
            self._mariadb = "mariadb" in self.control().get_server_info().lower()
        return self._mariadb

    def close_control(self) -> None:
        if self._ctl is not None:
            try:
                self._ctl.close()
            except pymysql.err.Error:  # already closed, or the socket is dead: nothing to release
                pass
            self._ctl = None

    def read_current(self, db: str, table: str) -> TableSchema | None:
        return self._ask(f"the schema of {db}.{table}", lambda conn: read_table_schema(conn, db, table))

    @staticmethod
    def is_sequence(event: Event) -> bool:
        """The table map is a MariaDB sequence's (its column names; tail needs them: binlog_row_metadata=FULL)."""
        return tuple(column.name for column in event.raw.columns) == SEQUENCE_COLUMNS

    def _ask(self, what: str, read: Callable[[pymysql.Connection], T]) -> T:
        """One read over the control connection; a failure closes it and is transient (e.g. the server restarted
        under it: tail's rerun resumes from its checkpoint)."""
        try:
            return read(self.control())
        except pymysql.err.MySQLError as exc:
            self.close_control()
            raise TransientError(f"reading {what} from {self.mysql.describe()} failed: {exc}") from None

    # --- recording -------------------------------------------------------------------------------------------

    def at_table_map(self, event: Event, position: str) -> TableSchema:
        """The captured table's schema at its table map, recorded when it is new or its shape changed."""
        db, table = event.db or "", event.table or ""
        latest = self.history.latest(db, table)
        hints = [latest] if latest is not None else []
        schema = schema_from_map(event.raw, db, table, position, hints)
        if latest is not None:  # foreign keys change only by DDL (refresh_foreign_keys), never in a table map
            schema = replace(schema, foreign_keys=latest.foreign_keys, referenced_by=latest.referenced_by)
        if latest is None or not latest.same_shape(schema) or not self.history.knows_foreign_keys(db, table):
            # New table, changed shape or a history from before foreign keys were recorded: ask information_schema
            # for what the binlog does not carry (JSON flag, foreign keys).
            current = self.read_current(db, table)
            if current is not None:
                schema = replace(schema_from_map(event.raw, db, table, position, hints + [current]),
                                 foreign_keys=current.foreign_keys, referenced_by=current.referenced_by)
        self.history.record(schema)
        return schema

    def at_alter(self, change: TableDdl, position: str, sql_mode: int | None = None) -> None:
        """Record the table's shape at the ALTER's own position, with what older rows hold in added columns.

        At the DDL, not at the table's next rows event: an ALTER followed by no row change of the table must
        still reach the lake and Snowflake (spark-merge evolves a table from its DDL line alone), and a row
        written before the ALTER in the same merge run must get the fill, not NULL (issue #30).
        """
        before = self.history.latest(change.db, change.table)
        if before is None:
            return  # a table tail has not seen yet: its first table map records it
        now = self.read_current(change.db, change.table)
        if change.ignore and sql_mode is not None:  # IGNORE turns a strict session's refusals into conversions
            sql_mode &= ~(STRICT_TRANS_TABLES | STRICT_ALL_TABLES)
        effects = alter_effects(before, now, change.clauses, Session(sql_mode, self.is_mariadb()))
        if effects.schema is not None:
            self.history.record(replace(effects.schema, position=position))
        elif effects.fills or effects.renamed or effects.resnapshot:
            # information_schema already shows a later change: the next table map gives this ALTER's shape.
            self.history.note_pending(change.db, change.table, position, effects.fills, effects.renamed,
                                      effects.resnapshot)
        if effects.resnapshot:
            _warn_resnapshot(change.db, change.table, f"{effects.resnapshot} (ALTER at {position})", position)

    @staticmethod
    def refuse_versioned(change: TableDdl, sql: str, position: str) -> None:
        """A captured table made system-versioned (CREATE ... WITH / ALTER ... ADD SYSTEM VERSIONING) stops tail
        before its DDL line: its history rows would reach the change log as rows (cdc.source.tables)."""
        text = change.clauses if change.kind == "alter" else sql if change.kind == "create" else ""
        if _VERSIONING.search(text):
            raise DataError(f"{change.db}.{change.table} is made system-versioned at {position}: system-versioned "
                            "tables are not supported (their history rows reach the binlog as row changes of the "
                            "table)", hint=f"leave {change.db}.{change.table} out of capture ([mysql] exclude_tables)"
                            " and restart tail; its rows stay downstream as of this DDL")

    def at_rows_changed(self, change: TableDdl, position: str) -> None:
        """DDL changed the table's rows with no row event (partition maintenance): flag it for a re-snapshot."""
        if self._flag(change.db, change.table, position, change.rows_changed):
            _warn_resnapshot(change.db, change.table, f"{change.rows_changed} (ALTER at {position})", position)

    def at_text_dml(self, sql: str, default_db: str, position: str) -> None:
        """A row change the binlog holds as SQL text (binlog_format STATEMENT or MIXED in its session): its rows are
        in no row event. Every captured table it writes, or its triggers and stored functions may write, is flagged
        for a re-snapshot (cdc.capture.statements, cdc.capture.hidden_writes)."""
        written = statement_tables(sql, default_db)
        if written is None:
            return
        reason = "rows changed by a statement logged as SQL text (binlog_format STATEMENT or MIXED), not as row events"
        reached = self._ask("triggers and stored functions", lambda conn: reached_tables(
            lambda q, params: query(conn, q, params), written, called_names(sql, default_db)))
        for (db, table), hidden in reached.items():
            why = f"{reason}{', through a trigger or stored function' if hidden else ''}"
            if self.filters.wants(db, table) and self._flag(db, table, position, why):
                _warn_resnapshot(db, table, f"{why} (at {position})", position)

    def tables_of(self, db: str) -> list[TableDdl]:
        """A `DROP DATABASE db`'s tables, as the DROP TABLE of each that tail has a history of (every table with rows
        downstream has one: snapshot and tail record the tables they write)."""
        return [TableDdl("drop", db, table) for known, table in self.history.tables() if known == db]

    def at_partial_rows(self, db: str, table: str, position: str) -> None:
        """A rows event whose images leave columns out (one session's binlog_row_image MINIMAL or NOBLOB): the
        row's other values, even its key in an UPDATE's after image, are not in it. Nothing of it is written; the
        table is flagged for a re-snapshot at the event's position, and warned of once per table per run."""
        if self._flag(db, table, position, PARTIAL_IMAGES) and (db, table) not in self._partial:
            self._partial.add((db, table))
            _warn_resnapshot(db, table, f"{PARTIAL_IMAGES} (at {position})", position)

    def forget_absent(self) -> None:
        """A DDL statement was read: a name that was no table may be one now."""
        self._absent.clear()

    def _flag(self, db: str, table: str, position: str, reason: str) -> bool:
        """Flag a table for a re-snapshot; False if it does not exist (a word that names no table, or a table
        dropped again since: then a later DROP line removes every row the flag was about).

        A table tail has not recorded yet (made by the statement, or never changed since it was captured) gets
        its shape from information_schema first, so that the flag has a table to belong to."""
        if self.history.latest(db, table) is None:
            current = None if (db, table) in self._absent else self.read_current(db, table)
            if current is None:
                self._absent.add((db, table))
                return False
            self.history.record(replace(current, position=position))
        self.history.flag(db, table, position, reason)
        return True

    def at_rename(self, change: TableDdl, new_db: str, event: Event, position: str) -> None:
        """The table goes on under its new name from the RENAME's position (spark-merge and apply follow it).

        Refused across column rules: values hashed or left out under the old name would be written in clear
        under the new one (the rules are fixed per state directory)."""
        if self.filters.columns(change.db, change.table) != self.filters.columns(new_db, change.new_table or ""):
            raise DataError(f"RENAME TABLE {change.db}.{change.table} TO {new_db}.{change.new_table} at "
                            f"{event.file}:{event.pos}: exclude_columns/hash_columns differ between the two names",
                            hint="rules that match both names (a pattern such as db.*.email) keep the table masked; "
                                 "changing the rules needs a new state directory and snapshot")
        self.history.record_move(change.db, change.table, new_db, change.new_table or "", position)

    def refresh_foreign_keys(self, db: str, table: str, position: str) -> None:
        """After DDL on a table: record, at the DDL's position, any change of its foreign keys or of theirs.

        A foreign key is in two tables' versions (the child's `foreign_keys`, the parent's `referenced_by`),
        so both ends, before and after the statement, are checked. information_schema says how the keys are
        now, which is how they are after this DDL unless later DDL already ran (docs/limits.md).
        """
        latest = self.history.latest(db, table)
        ends = {(db, table)}
        for key in (latest.foreign_keys + latest.referenced_by) if latest is not None else ():
            ends |= {(key.db, key.table), (key.ref_db, key.ref_table)}
        own, referencing = self._ask(f"the foreign keys of {db}.{table}", lambda conn: read_foreign_keys(conn, db, table))
        for key in own + referencing:
            ends |= {(key.db, key.table), (key.ref_db, key.ref_table)}
        for end_db, end_table in sorted(ends):
            known = self.history.latest(end_db, end_table)
            if known is None or not self.filters.wants(end_db, end_table):
                continue  # not captured (yet): its first table map reads its keys
            if (end_db, end_table) == (db, table):
                keys = (own, referencing)
            else:
                keys = read_foreign_keys(self.control(), end_db, end_table)
            if (known.foreign_keys, known.referenced_by) != keys and known.position < position:
                self.history.record(replace(known, position=position, foreign_keys=keys[0], referenced_by=keys[1]))


def _warn_resnapshot(db: str, table: str, reason: str, position: str) -> None:
    name = shlex.quote(f"{db}.{table}")
    log.warning(f"{db}.{table}: {reason}: the binlog cannot carry what it did to the existing rows; they need "
                f"`cdc resnapshot {name}` (`cdc run` starts it by itself; `cdc status` lists such tables)",
                extra={"stage": "tail", "position": position})
