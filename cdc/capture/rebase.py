"""`cdc tail --rebase`: continue a state directory on another server of the same replication topology.

After a failover the new primary's binlog files and offsets have nothing to do with the old primary's, so
a checkpoint's file:pos is never applied to it. What carries over is the GTID state cdc has captured
(recorded in tail.json with every checkpoint): the new server must hold all of it in its binlogs, and tail
resumes at the first transaction outside it. Anything else stops with exit 5 and writes nothing.

Change-log positions start with the binlog file's number. The new server's numbers may be lower than the
old one's, so tail adds `seq_offset` to them from here on: every line captured after the switch sorts after
every line captured before it (docs/formats.md).
"""

from __future__ import annotations

from dataclasses import replace

import pymysql

from cdc.capture.start import Start, last_position_in, uncheckpointed_segments
from cdc.changelog import file_seq, read_segment
from cdc.errors import PositionError, PreconditionError
from cdc.gtid import GtidSet
from cdc.source.flavour import replication_client_privilege
from cdc.source.gtids import locate, state_at
from cdc.source.server import ServerInfo
from cdc.state import StateDir

_NEW_SNAPSHOT = "take a new `cdc snapshot` into a new state directory (a file:pos from another server is never applied)"


def rebase_start(state: StateDir, carried: Start, conn: pymysql.Connection, info: ServerInfo, where: str) -> Start:
    """Where `carried` (a checkpoint or hand-over of the old server) continues on this server, or PositionError."""
    if carried.gtid_state is None:
        raise PositionError(
            f"cannot rebase {state.root} onto {where}: its {carried.origin} at {carried.position} has no GTID "
            "state (written by a cdc older than GTID tracking, or the old server ran without GTIDs), so there is "
            "no way to tell which transactions the new server still has to send", hint=_NEW_SNAPSHOT)
    seen, last_segment, last_position = _through_unrecorded(state, carried)
    try:
        _refuse_a_stranger(state, carried, conn, info, where)
        resume = locate(conn, info.is_mariadb, seen, where)
    except pymysql.err.MySQLError as exc:  # SHOW BINARY LOGS / BINLOG EVENTS need the replication client grant
        raise PreconditionError(
            f"cannot rebase {state.root} onto {where}: reading its binlogs failed ({exc.args[-1]})",
            hint=f"GRANT {replication_client_privilege(info)} ON *.* TO the cdc user ({getattr(conn, 'user', '?')}), "
            "then rerun; nothing was written",
        ) from None
    old_seq = max(file_seq(carried.position.file) + carried.seq_offset, int(last_position.split(":")[0]))
    offset = max(0, old_seq + 1 - file_seq(resume.position.file))
    return replace(carried, position=resume.position, last_segment=last_segment, origin=f"rebase ({carried.origin})",
                   gtid_state=str(seen), seq_offset=offset, skip_gtids=resume.skip, foreign=False)


def _through_unrecorded(state: StateDir, carried: Start) -> tuple[GtidSet, str | None, str]:
    """The GTID state with the segments sealed after the checkpoint (a kill between seal and checkpoint) added:
    their lines are in the change log, so their transactions must not be read again from the new server."""
    seen = GtidSet.parse(carried.gtid_state)
    last_segment = carried.last_segment
    last_position = f"{file_seq(carried.position.file) + carried.seq_offset:010d}"
    orphans = uncheckpointed_segments(state.changelog, carried.last_segment) if carried.origin == "checkpoint" else []
    for path in orphans:
        for change in read_segment(path):
            seen.add((change.get("src") or {}).get("gtid"))
        last_segment, last_position = path.name, max(last_position, last_position_in(path))
    return seen, last_segment, last_position


def _refuse_a_stranger(state: StateDir, carried: Start, conn: pymysql.Connection, info: ServerInfo,
                       where: str) -> None:
    """MariaDB: a server with the old server's server_id is no replica of it (replication skips events with the
    replica's own server_id), so its equal GTIDs are its own transactions, unless it is the old server itself
    (moved to another host or port): then its binlog has the checkpoint's position with the same GTID state."""
    old = state.read_server()
    if not info.is_mariadb or old is None or old.server_id != info.server_id:
        return
    if state_at(conn, True, carried.position) == GtidSet.parse(carried.gtid_state):
        return
    raise PositionError(
        f"cannot rebase {state.root} onto {where}: it has server_id {info.server_id} like the old server "
        f"({old.describe()}), so it is not a replica of it, and its binlog does not hold the old server's "
        f"{carried.position} at GTID state {carried.gtid_state}: an unrelated server whose GTIDs only look alike",
        hint=f"point tail at the promoted replica of the old server, or {_NEW_SNAPSHOT}")
