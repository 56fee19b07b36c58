"""Does the server write every change cdc captures to its binlog? What tail and a new snapshot refuse (exit 4).

Each case reads as success downstream, never as an error: tail says "caught up" with none of the changes.
- binlog_format not ROW (STATEMENT, MIXED): row changes logged as SQL text (cdc.source.binlog);
- a captured database left out by binlog-do-db / binlog-ignore-db (cdc.source.binlog_filters);
- a replica without log_slave_updates / log_replica_updates (cdc.source.replica_updates).
A snapshot checks before its copy, which would otherwise take hours and then hand over to a tail that refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

import pymysql

from cdc.source.binlog import require_row_format
from cdc.source.binlog_filters import require_logged
from cdc.source.flavour import binlog_status_statement
from cdc.source.replica_updates import require_replica_updates
from cdc.source.server import ServerInfo


def require_capturable(conn: pymysql.Connection, info: ServerInfo, databases: Sequence[str], tables: Sequence[str],
                       where: str) -> None:
    require_row_format(conn, where)
    require_logged(conn, binlog_status_statement(info), databases, tables, where)
    require_replica_updates(conn, where)
