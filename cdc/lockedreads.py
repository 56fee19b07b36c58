"""The locked chunk read: `cdc resnapshot` on a server whose watermark table cannot be written (a read-only replica).

The watermark technique (cdc.watermarks) needs two writes per chunk through the binlog. A replica with
`read_only=1`, or a cdc user without INSERT/UPDATE on the watermark table, cannot write them, and writing
anything into a replica's binlog would be an errant transaction anyway. Instead, each chunk is read under a
table lock, and the two processes meet through files in the run's directory (`<state>/resnapshot/<run>/`):

    locked-N.json   resnapshot: the intent (run, table, chunk N; or the table's end line with its cut)
    locked-N.ack    tail: it opened a window for the table at this boundary B and notes every key changed after it
    locked-N.ready  resnapshot: the chunk file, and P, the binlog end read under the lock
    locked-N.at     tail: E, the boundary (>= P) where it emits the chunk; written before the lines
    locked-N.done   tail: the lines at E are sealed (written just before the tail.json that follows them)

Why the result is exact. The resnapshot writes the intent and waits for the ack, then `LOCK TABLES t READ`,
reads P (SHOW MASTER STATUS), SELECTs the chunk, `UNLOCK TABLES`. The lock waits for every transaction that
wrote t to end (its metadata lock is held until its commit, which comes after its binlog write) and keeps any
new one out until the unlock, so the chunk is the table exactly as of binlog position P: every change of t
before P is in it, none after P is. Tail emits the chunk as `r` lines at E, the first transaction boundary at
or after P it reaches once the chunk is ready (a transaction of its own, between two of the server's), minus
the keys it noted since B. B <= P (tail had read up to B before the lock was taken), so the keys changed
between P and E, whose newer state is already in the change log, are among them: an older read never
overwrites a newer change. The keys changed between B and P are dropped too; harmless, since their binlog
lines carry full row images: the state P holds is already in the change log for them.

Why kill -9 of either process is safe. While the window is open tail does not move tail.json past it (as
for a watermark window), so a killed tail reads the window again from before B; it finds the intent, opens
the window at once (noting from an earlier point: a superset) and, when `.at` exists, emits at that same E,
skipping the lines a killed run already sealed (cdc.capture.commit); when `.at` does not exist it picks a new
E past those sealed lines. `.done` is written just before the first tail.json after the lines, so a step
with `.done` is sealed and never emitted again. A rerun of a killed resnapshot removes the steps it left
(tail drops a window whose intent is gone) and reads the unfinished chunk again under a new number (an `r`
line twice is harmless); `cdc resnapshot --cancel` removes the run's directory, which does the same. A DDL of
the table inside a window makes tail refuse the chunk (`.redo`), as for watermarks.

What the lock costs: writes to t wait while one chunk is read (on a replica, its SQL thread waits: lag).
Grants: SELECT and LOCK TABLES on the table, BINLOG MONITOR (MariaDB) or REPLICATION CLIENT (MySQL) for
the binlog position. Not covered: rows a foreign-key cascade changes in t while it is locked, if the server
does not take the child table's metadata lock for a cascade (MySQL 8.0 and MariaDB 10.6+ do).

This module holds the file contract both stages share; it does no MySQL I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.source.binlog import Position
from cdc.state import read_json, write_json_atomic

CHUNK, END = "chunk", "end"
WATERMARKS, LOCKED, AUTO = "watermarks", "locked", "auto"  # `cdc resnapshot --mode`
MODES = (AUTO, WATERMARKS, LOCKED)


@dataclass(frozen=True)
class Intent:
    """One step of a locked run, as the resnapshot asks tail for it."""

    run: str
    kind: str  # chunk | end
    db: str
    table: str
    chunk: int
    cut: tuple[str, int] | None = None  # end: binlog (file, pos) read before the table's first chunk
    row_base: int = 0  # end: the row number of its line (lines of one run never share a position)

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"chunk": self.chunk, "db": self.db, "kind": self.kind, "row_base": self.row_base,
                                "run": self.run, "table": self.table, "version": 1}
        if self.cut is not None:
            body["cut"] = list(self.cut)
        return body

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> Intent:
        cut = body.get("cut")
        return cls(str(body["run"]), str(body["kind"]), str(body["db"]), str(body["table"]), int(body["chunk"]),
                   None if cut is None else (str(cut[0]), int(cut[1])), int(body.get("row_base", 0)))


@dataclass(frozen=True)
class Ready:
    """The chunk was read under the lock at binlog end `p`; its rows take row numbers from `row_base` on."""

    file: str
    p: Position
    row_base: int


def step_path(directory: Path, chunk: int, suffix: str) -> Path:
    return directory / f"locked-{chunk:06d}.{suffix}"


def write_intent(directory: Path, intent: Intent) -> None:
    write_json_atomic(step_path(directory, intent.chunk, "json"), intent.to_dict())


def read_intent(path: Path) -> Intent | None:
    body = read_json(path)
    try:
        return None if body is None else Intent.from_dict(body)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def write_position(path: Path, position: Position, **extra: Any) -> None:
    write_json_atomic(path, {"file": position.file, "pos": position.pos, **extra})


def read_position(path: Path) -> Position | None:
    body = read_json(path)
    return None if body is None else Position(str(body["file"]), int(body["pos"]))


def write_ready(directory: Path, chunk: int, ready: Ready) -> None:
    write_position(step_path(directory, chunk, "ready"), ready.p, chunk_file=ready.file, row_base=ready.row_base)


def read_ready(directory: Path, chunk: int) -> Ready | None:
    body = read_json(step_path(directory, chunk, "ready"))
    if body is None:
        return None
    return Ready(str(body["chunk_file"]), Position(str(body["file"]), int(body["pos"])), int(body["row_base"]))


def intents(root: Path) -> list[tuple[Path, Intent]]:
    """Every intent in the state directory's runs, oldest chunk first."""
    found = []
    for path in sorted(root.glob("resnapshot/*/locked-*.json")):
        intent = read_intent(path)
        if intent is not None:
            found.append((path, intent))
    return sorted(found, key=lambda pair: (pair[1].run, pair[1].chunk))


def remove_step(directory: Path, chunk: int) -> None:
    """The step is behind tail's checkpoint: its files are not needed again."""
    for suffix in ("json", "ack", "ready", "at", "done"):
        step_path(directory, chunk, suffix).unlink(missing_ok=True)
