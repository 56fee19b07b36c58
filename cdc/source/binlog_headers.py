"""Whether a stretch of the binlog holds any transaction, or only what the server writes by itself.

A server moves its binlog end without a transaction: a rotation (FLUSH BINARY LOGS, max_binlog_size, a
restart) writes a Rotate and a Stop event into the old file and a Format_desc, Gtid_list/Previous_gtids header
into the new one, and MariaDB adds a Binlog_checkpoint up to a second later, once the engines have made the
old file's commits durable. A stage that ran up to "now" just before holds every row there is, yet its
checkpoint is before the server's end. `cdc verify` and `cdc wait --position` ask this module before calling
such a stage behind.
"""

from __future__ import annotations

import pymysql

from cdc.changelog import file_seq
from cdc.source.connect import query

# SHOW BINLOG EVENTS' Event_type of the events that carry no transaction (MariaDB and MySQL spellings).
HEADER_EVENTS = frozenset({"Format_desc", "Gtid_list", "Previous_gtids", "Binlog_checkpoint", "Rotate", "Stop",
                           "Start_encryption"})
MAX_EVENTS = 64  # a real gap of headers is a handful of events per file; more means transactions, or too far to look


def only_headers_between(conn: pymysql.Connection, start: tuple[str, int], end: tuple[str, int]) -> bool:
    """True if every event from `start` (an event's start) up to `end` is a header: no transaction lies there.

    False when unsure: a file missing from SHOW BINARY LOGS (purged, another server), `end` past what the server
    has written, more than MAX_EVENTS events, or a position the server refuses (not an event's start).
    """
    sizes = {str(row["Log_name"]): int(row["File_size"]) for row in query(conn, "SHOW BINARY LOGS")}
    first, last = file_seq(start[0]), file_seq(end[0])
    files = sorted((name for name in sizes if first <= file_seq(name) <= last), key=file_seq)
    if not files or files[0] != start[0] or files[-1] != end[0] or len(files) != last - first + 1:
        return False
    if end[1] > sizes[end[0]]:
        return False  # a position the server has not written yet
    budget = MAX_EVENTS
    for name in files:
        sql = f"SHOW BINLOG EVENTS IN %s FROM %s LIMIT {budget + 1}"
        try:
            events = query(conn, sql, (name, start[1] if name == start[0] else 4))
        except pymysql.MySQLError:
            return False
        if name == end[0]:
            events = [event for event in events if int(event["Pos"]) < end[1]]
        if len(events) > budget or any(str(event["Event_type"]) not in HEADER_EVENTS for event in events):
            return False
        budget -= len(events)
    return True
