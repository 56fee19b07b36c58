"""`cdc resnapshot --all` after the server purged the binlog tail still needed (issue #27).

Tail stops with exit 5 when its checkpoint's binlog file is gone: the changes in between (the gap) can never be
read again. The recovery, with capture of new changes going on:

1. tail's checkpoint moves to the server's current binlog end (under tail's lock; tail must be stopped, which it is
   after exit 5). Change-log positions keep growing: the file numbers of one server only go up.
2. every captured table is read again online (cdc.snapshot.resnapshot, watermarks through the binlog) while
   `cdc tail --follow` runs from there. A row changed in the gap is read again; a row deleted in the gap is not,
   and the table's end line (its `cut`, taken after step 1) removes every row older than the cut that was not
   read again, so the lake and Snowflake lose it too.

The re-snapshot's checkpoint is written before tail's moves: a kill -9 between the two resumes both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pymysql

from cdc.changelog import file_seq
from cdc.checkpoints import TailCheckpoint
from cdc.config import Settings
from cdc.errors import PositionError
from cdc.schema import SchemaHistory
from cdc.source.binlog import current_position
from cdc.source.connect import query
from cdc.source.gtids import server_state, state_at
from cdc.source.server import ServerInfo
from cdc.source.tables import TableInfo, select_tables
from cdc.state import StateDir


@dataclass(frozen=True)
class PurgeGap:
    """Tail's checkpoint before and after the move: the binlog between them was purged unread."""

    purged_at: str  # FILE:POS tail needed
    oldest: str  # the oldest binlog file the server still has
    restarted_at: str  # FILE:POS tail goes on from

    def to_dict(self) -> dict[str, str]:
        return {"purged_at": self.purged_at, "oldest": self.oldest, "restarted_at": self.restarted_at}


def captured_tables(conn: pymysql.Connection, settings: Settings, state: StateDir) -> list[TableInfo]:
    """Every table tail captures: the mysql.databases / tables / exclude_tables selection when set, else every table
    of the schema history (snapshot and tail record each table they write) that still exists; never the
    watermark table."""
    mysql = settings.mysql
    if mysql.databases or mysql.tables:
        infos = select_tables(conn, mysql)
    else:
        known = set(SchemaHistory(state.schema).tables())
        infos = [i for i in select_tables(conn, replace(mysql, databases=("*",))) if (i.db, i.table) in known]
    return [info for info in infos if info.name != mysql.watermark_table]


def purged_checkpoint(conn: pymysql.Connection, state: StateDir) -> tuple[TailCheckpoint, str] | None:
    """Tail's checkpoint and the server's oldest binlog when the checkpoint's file was purged; else None."""
    tail = TailCheckpoint.read(state)
    names = sorted((str(row["Log_name"]) for row in query(conn, "SHOW BINARY LOGS")), key=file_seq)
    if tail is None or not names or tail.file in names:
        return None
    if file_seq(tail.file) > file_seq(names[-1]):
        raise PositionError(f"tail's checkpoint {tail.file}:{tail.pos} is past the server's last binlog {names[-1]}: "
                            "not a purge (another server, or the binlog was reset)",
                            hint="point cdc at the server tail read (after a failover, `cdc tail --rebase`)")
    return tail, names[0]


def restart_tail_after_purge(state: StateDir, conn: pymysql.Connection, info: ServerInfo) -> PurgeGap | None:
    """Move tail's checkpoint to the server's binlog end when the binlog it needs was purged (see the docstring)."""
    with state.lock(TailCheckpoint.STAGE):  # tail stopped at the purge (exit 5); a running one is refused here
        found = purged_checkpoint(conn, state)
        if found is None:
            return None
        tail, oldest = found
        at = current_position(conn)
        known = state_at(conn, info.is_mariadb, at)
        gtid_state = known if known is not None else server_state(conn, info.is_mariadb)
        # last_segment stays: a segment sealed after it but never checkpointed holds lines that sort before
        # the new position, so tail keeps them as they are (cdc.capture.start.uncheckpointed_segments).
        moved = replace(tail, file=at.file, pos=at.pos, gtid=None,
                        server_uuid=info.server_uuid, gtid_state=str(gtid_state) or None, skip_gtids=())
        moved.write(state)
    return PurgeGap(f"{tail.file}:{tail.pos}", oldest, f"{at.file}:{at.pos}")
