"""Where tail starts: its checkpoint, else the snapshot's hand-over, else an explicit flag. It never guesses."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import pymysql

from cdc.changelog import SEGMENT_PREFIX, file_seq, list_segments
from cdc.checkpoints import SnapshotStatus, TailCheckpoint
from cdc.errors import PositionError, UsageError
from cdc.source.binlog import PURGED_HINT, Position, current_position
from cdc.source.connect import query
from cdc.state import StateDir


@dataclass(frozen=True)
class StartRequest:
    """What the user asked for on the command line (at most one)."""

    position: str | None = None  # FILE:POS
    gtid: str | None = None  # MariaDB domain-server-seq[,...]: start after these transactions
    from_now: bool = False

    def __post_init__(self) -> None:
        # A malformed option is a usage error (exit 2), found before any connection is made; a position that
        # parses but is not on the server is a position error (exit 5), found later by resolve_start.
        if self.position is not None:
            try:
                Position.parse(self.position)
            except PositionError as exc:
                raise UsageError(f"--start-position: {exc.message}", hint=exc.hint) from None


@dataclass(frozen=True)
class Start:
    position: Position
    gtid: str | None
    last_segment: str | None
    origin: str  # "checkpoint" | "snapshot" | "--start-position" | ... | "rebase (checkpoint)"
    gtid_state: str | None = None  # every transaction captured before `position` (None: not known yet)
    seq_offset: int = 0  # added to binlog file numbers in change-log positions (set by --rebase)
    skip_gtids: tuple[str, ...] = ()  # captured transactions still ahead of `position` (after a --rebase)
    foreign: bool = False  # read on another server than this connection's: only --rebase may go on from it


def resolve_start(state: StateDir, request: StartRequest, conn: pymysql.Connection, server_uuid: str,
                  *, rebase: bool) -> Start:
    """The position to read from, refusing a foreign checkpoint and refusing to guess."""
    chosen = [name for name, given in (("--start-position", request.position), ("--start-gtid", request.gtid),
                                       ("--from-now", request.from_now)) if given]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} contradict each other", hint="give one start option")
    checkpoint = TailCheckpoint.read(state)
    if checkpoint is not None:
        path = TailCheckpoint.path(state)
        if chosen:
            raise UsageError(f"{chosen[0]} given, but tail already has a checkpoint {path}",
                             hint=f"omit {chosen[0]} to resume, or move {path} and the change log away to start over")
        # A checkpoint of a very old cdc names no server: server.json then says whose positions these are.
        known = state.read_server()
        owner = checkpoint.server_uuid or (known.server_uuid if known is not None else None)
        foreign = owner not in (None, server_uuid)
        if foreign and not rebase:
            raise PositionError(
                f"checkpoint {path} was written against server {owner}, "
                f"but this connection reached server {server_uuid}",
                hint="point --host/--state-dir at the right server, or, after a failover to a replica of that "
                "server, run `cdc tail --until-now --rebase` once: it continues from the GTIDs cdc has captured",
            )
        return Start(Position(checkpoint.file, checkpoint.pos), checkpoint.gtid, checkpoint.last_segment,
                     "checkpoint", checkpoint.gtid_state, checkpoint.seq_offset, checkpoint.skip_gtids, foreign)
    if request.position:
        return Start(_on_the_server(conn, Position.parse(request.position)), None, None, "--start-position")
    if request.gtid:
        return Start(position_after_gtid(conn, request.gtid), request.gtid, None, "--start-gtid")
    if request.from_now:
        return Start(current_position(conn), None, None, "--from-now")
    snapshot = SnapshotStatus.read(state)
    if snapshot is not None:
        start = _from_snapshot(state, snapshot)
        known = state.read_server()
        # Without --rebase, binding the state directory to this server refuses it (StateDir.bind_server).
        return replace(start, foreign=rebase and known is not None and known.server_uuid != server_uuid)
    raise PositionError(
        f"tail has no checkpoint in {state.root} and no snapshot hand-over; it never guesses a start position",
        hint="run `cdc snapshot` first, or pass --start-position FILE:POS, --start-gtid SET or --from-now",
    )


_BOUNDARY_HINT = ("give a transaction boundary: the End_log_pos of an Xid or COMMIT in SHOW BINLOG EVENTS, "
                  "or use --start-gtid / --from-now")


def _on_the_server(conn: pymysql.Connection, position: Position) -> Position:
    """Refuse a position the server does not have: beyond its end tail would "catch up" at once and checkpoint it."""
    try:
        logs = {str(row["Log_name"]): int(row["File_size"]) for row in query(conn, "SHOW BINARY LOGS")}
    except pymysql.err.MySQLError:
        return position  # no BINLOG MONITOR: the server judges the position when the dump starts
    where = f"the server at {conn.host}:{conn.port} cannot send the binlog from {position}"
    if position.file not in logs:
        names = sorted(logs, key=file_seq)
        listed = f"{names[0]} .. {names[-1]}" if names else "none"
        if names and file_seq(position.file) < file_seq(names[0]):
            raise PositionError(f"{where}: {position.file} was purged (the server has {listed})", hint=PURGED_HINT)
        raise PositionError(f"{where}: there is no {position.file} (the server has {listed})",
                            hint="check the file name (SHOW BINARY LOGS)")
    if not 4 <= position.pos <= logs[position.file]:
        raise PositionError(f"{where}: {position.file} has {logs[position.file]} bytes", hint=_BOUNDARY_HINT)
    return position


def _from_snapshot(state: StateDir, snapshot: SnapshotStatus) -> Start:
    path = SnapshotStatus.path(state)
    if not snapshot.is_done:
        raise PositionError(f"snapshot {path} has status {snapshot.status!r}, not 'done'",
                            hint="finish `cdc snapshot` (rerun it) before starting tail")
    handover = snapshot.handover
    if handover is None:
        raise PositionError(f"snapshot {path} has no usable hand-over ('handover')", hint="rerun `cdc snapshot`")
    # The hand-over's "gtid" is the server's whole GTID state at that position (cdc/snapshot/handover.py).
    return Start(Position(handover.file, handover.pos), handover.gtid, None, "snapshot", handover.gtid)


_GTID = re.compile(r"^\d+-\d+-\d+$")


def position_after_gtid(conn: pymysql.Connection, gtid_set: str) -> Position:
    """MariaDB: the transaction boundary right after the last GTID of `gtid_set` (scans SHOW BINLOG EVENTS)."""
    wanted = {g.strip() for g in gtid_set.split(",") if g.strip()}
    if not wanted or not all(_GTID.match(g) for g in wanted):
        raise UsageError(f"--start-gtid {gtid_set!r} is not a MariaDB GTID list", hint="e.g. --start-gtid 0-1-57")
    found: Position | None = None
    for log in query(conn, "SHOW BINARY LOGS"):
        name = str(log["Log_name"])
        current: str | None = None
        for event in query(conn, f"SHOW BINLOG EVENTS IN '{name}'"):  # name comes from the server itself
            info = str(event.get("Info") or "")
            if event["Event_type"] == "Gtid":
                current = info.split("GTID ", 1)[-1].strip() if "GTID" in info else None
            elif current in wanted and event["Event_type"] in ("Xid", "Query") and not info.startswith("BEGIN"):
                found = Position(name, int(event["End_log_pos"]))
                current = None
    if found is None:
        raise PositionError(f"GTID {gtid_set} is not in the server's binlogs",
                            hint="check the GTID (SELECT @@gtid_binlog_pos), or start from --start-position")
    return found


def uncheckpointed_segments(changelog: Path, last_segment: str | None) -> list[Path]:
    """Tail segments sealed after the checkpoint's last one (a crash between seal and checkpoint)."""
    found = []
    for path in list_segments(changelog, after=last_segment):
        kind = path.name[len(SEGMENT_PREFIX):].split("-")[2][:1]
        if kind == "b":  # snapshot segments (kind s) belong to snapshot, not to this recovery
            found.append(path)
    return found


def last_position_in(path: Path) -> str:
    """The position of the last line of a sealed segment."""
    import orjson

    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        block = min(size, 1 << 20)
        while True:
            handle.seek(size - block)
            lines = handle.read(block).rstrip(b"\n").split(b"\n")
            if len(lines) > 1 or block == size:
                return str(orjson.loads(lines[-1])["position"])
            block = min(size, block * 2)
