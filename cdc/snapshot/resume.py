"""An existing snapshot against this run: resuming one in progress, and refusing a selection it does not hold.

A resume re-opens the snapshot at its hand-over position and re-plans the tables it holds, refusing one
whose shape changed since (two shapes in one copy) and a hand-over binlog the server has purged.
"""

from __future__ import annotations

from dataclasses import replace

import pymysql

from cdc.changelog import position_string
from cdc.config import Settings
from cdc.errors import PositionError, UsageError
from cdc.masking import ColumnRules, bind_rules
from cdc.schema import SchemaHistory
from cdc.snapshot.checkpoint import DONE, SnapshotCheckpoint
from cdc.snapshot.handover import Handover, begin_snapshot
from cdc.source.connect import query
from cdc.source.server import ServerInfo
from cdc.source.tables import TableInfo, TablePlan, plan_table, select_tables
from cdc.state import StateDir


def resume(
    settings: Settings, conn: pymysql.Connection, info: ServerInfo, state: StateDir, checkpoint: SnapshotCheckpoint
) -> tuple[SnapshotCheckpoint, list[TablePlan]]:
    h = checkpoint.handover
    bind_rules(state, ColumnRules.from_settings(settings.mysql))  # the rules the first chunks were written with
    check_selection(settings, conn, checkpoint)
    _check_binlog_kept(conn, h)
    begin_snapshot(conn)
    at = position_string(h.file, h.pos, 0, snapshot=True)
    history = SchemaHistory(state.schema)
    sizes = _table_sizes(conn)
    plans = []
    for entry in sorted(checkpoint.tables.values(), key=lambda t: (t.db, t.table)):
        est_rows, data_length = sizes.get((entry.db, entry.table), (0, 0))
        # allow_no_pk: the table was accepted when the snapshot started; its shape is checked below.
        plan = plan_table(conn, TableInfo(entry.db, entry.table, est_rows, data_length), at, allow_no_pk=True)
        recorded = history.at(entry.db, entry.table, at)
        if recorded is None or not recorded.same_shape(plan.schema):
            raise PositionError(
                f"table {entry.name} changed its columns or key since the snapshot started at {h.file}:{h.pos}; "
                "resuming would mix two shapes in one copy",
                hint="start the snapshot over in a new, empty state directory",
            )
        plans.append(plan)
    resumed = replace(checkpoint, resumes=checkpoint.resumes + 1)
    resumed.write(state)
    return resumed, plans


def check_selection(settings: Settings, conn: pymysql.Connection, checkpoint: SnapshotCheckpoint) -> None:
    if not settings.mysql.tables and not settings.mysql.databases:
        return  # a bare rerun resumes whatever snapshot.json holds
    wanted = {t.name for t in select_tables(conn, settings.mysql)}
    if wanted == set(checkpoint.tables):
        return
    taken = set(checkpoint.tables)
    change = "; ".join(part for part in (
        f"not in it: {', '.join(sorted(wanted - taken))}" if wanted - taken else "",
        f"in it but not selected now: {', '.join(sorted(taken - wanted))}" if taken - wanted else "") if part)
    if checkpoint.status == DONE:
        raise UsageError(
            f"the snapshot in this state directory is done for {len(taken)} table(s), and this run selects others "
            f"({change}); a finished snapshot is neither redone nor extended",
            hint="rerun with the same selection (or none) to see it done; to capture other tables, give them a new "
            "state directory of their own (--state-dir), with its own snapshot and tail")
    raise UsageError(
        f"a snapshot of {len(taken)} table(s) is in progress, and this run selects others ({change})",
        hint="rerun with the same selection (or none) to finish it; a different selection needs a new state directory")


def _check_binlog_kept(conn: pymysql.Connection, handover: Handover) -> None:
    try:
        with conn.cursor() as cursor:
            cursor.execute("SHOW BINARY LOGS")
            files = {str(row[0]) for row in cursor.fetchall()}
    except pymysql.err.MySQLError:
        return  # no BINLOG MONITOR / REPLICATION CLIENT: tail will check when it starts
    if handover.file not in files:
        raise PositionError(
            f"the hand-over binlog {handover.file}:{handover.pos} has been purged; "
            "this snapshot can no longer be handed over to tail",
            hint="raise binlog retention (`cdc set-retention`), then start over in a new, empty state directory",
        )


def _table_sizes(conn: pymysql.Connection) -> dict[tuple[str, str], tuple[int, int]]:
    rows = query(conn, "SELECT TABLE_SCHEMA AS s, TABLE_NAME AS t, TABLE_ROWS AS r, DATA_LENGTH AS l "
                       "FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'")
    return {(str(r["s"]), str(r["t"])): (int(r["r"] or 0), int(r["l"] or 0)) for r in rows}
