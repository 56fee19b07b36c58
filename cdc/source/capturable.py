"""Does the server write every change cdc captures to its binlog? What tail and a new snapshot refuse (exit 4).

Each case reads as success downstream, never as an error: tail says "caught up" with none of the changes.
- binlog_format not ROW (STATEMENT, MIXED: MariaDB's default): row changes logged as SQL text, which tail,
  reading row events only, passes over;
- binlog_row_image not FULL (MINIMAL, NOBLOB): images without the columns a change did not set;
- a captured database left out by binlog-do-db / binlog-ignore-db (cdc.source.binlog_filters);
- a replica without log_slave_updates / log_replica_updates (cdc.source.replica_updates).
A snapshot checks before its copy, which would otherwise take hours and then hand over to a tail that refuses.
check-binlog (cdc.source.preflight) gives the same verdicts with the same fixes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pymysql

from cdc.errors import PreconditionError
from cdc.source import flavour
from cdc.source.binlog_filters import require_logged
from cdc.source.connect import variables
from cdc.source.replica_updates import NAMES as REPLICA_UPDATES
from cdc.source.replica_updates import require_replica_updates
from cdc.source.server import ServerInfo

# Why a binlog_format fix is not done until the applications reconnect (check-binlog says it too).
FORMAT_WHY = "; sessions already open keep their format until they reconnect"


def require_capturable(conn: pymysql.Connection, info: ServerInfo, databases: Sequence[str], tables: Sequence[str],
                       where: str) -> None:
    found = variables(conn, ["log_bin", "binlog_format", "binlog_row_image", *REPLICA_UPDATES])
    if found.get("log_bin", "").upper() != "ON":
        return  # binlog off: the position reads that follow say so (exit 4)
    require_row_format(found, info, where)
    require_full_images(found, info, where)
    require_logged(conn, flavour.binlog_status_statement(info), databases, tables, where)
    require_replica_updates(conn, found, where)


def require_row_format(found: Mapping[str, str], info: ServerInfo, where: str) -> None:
    value = found.get("binlog_format", "")
    if value.upper() != "ROW":
        raise PreconditionError(
            f"{where} logs row changes as binlog_format={value}: tail reads row events only, and the changes it "
            "logs as SQL text would never reach the change log",
            hint=flavour.variable_fix(info, "binlog_format", "ROW") + FORMAT_WHY)


def require_full_images(found: Mapping[str, str], info: ServerInfo, where: str) -> None:
    """Every rows event must carry every column: a partial image's missing values are unknown (one session's
    override is caught per event instead: cdc.capture.schemas.at_partial_rows)."""
    value = found.get("binlog_row_image", "FULL")  # a server without the variable logs full images
    if value.upper() != "FULL":
        raise PreconditionError(
            f"{where} logs binlog_row_image={value}: its rows events leave out the columns a change did not set, "
            "whose values the change log must hold",
            hint=flavour.variable_fix(info, "binlog_row_image", "FULL") + FORMAT_WHY)
