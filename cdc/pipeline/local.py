"""Read a state directory the way an operator needs it: every stage's checkpoint and what waits between stages.

Only reads; never takes a stage's lock (status must work while the stages run). Every stage writes
its checkpoint atomically (temp file + rename), so a read sees the old or the new document, never half.
A stage without a checkpoint has not run (or is not configured here); a corrupt one is a PositionError.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cdc.changelog import SEGMENT_PREFIX, SEGMENT_SUFFIX, file_seq, list_segments
from cdc.errors import PositionError
from cdc.state import StateDir, read_json

CHECKPOINT_VERSION = 1
# ship-s3 v2 adds a pending batch; tail v2 the GTID state and --rebase's offset. The other fields mean the same.
CHECKPOINT_VERSIONS = {"ship-s3": 2, "tail": 2}
# Stage name (as the user types it) -> checkpoint file stem; in pipeline order.
CHECKPOINTS: dict[str, str] = {
    "snapshot": "snapshot",
    "tail": "tail",
    "ship-kinesis": "ship-kinesis",
    "ship-s3": "ship-s3",
    "spark-merge": "merge",
    "snowflake-apply": "snowflake-apply",
}
# The stages that consume the change log (segments) and how far along the pipeline each is.
DOWNSTREAM = ("ship-kinesis", "ship-s3", "spark-merge", "snowflake-apply")
_TAIL_BYTES = 65536


@dataclass(frozen=True)
class SourcePosition:
    """A binlog coordinate at a transaction boundary, as a checkpoint records it."""

    file: str
    pos: int
    gtid: str | None = None

    def key(self) -> tuple[int, int]:
        return (file_seq(self.file), self.pos)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(frozen=True)
class LocalState:
    """One consistent-enough read of a state directory (each file is read once)."""

    root: Path
    checkpoints: dict[str, dict[str, Any]]
    segments: list[Path]
    batches: list[str] = field(default_factory=list)  # sealed batch ids (manifest.json present), in order

    def has(self, stage: str) -> bool:
        return stage in self.checkpoints

    def source_position(self) -> SourcePosition | None:
        """Where the pipeline's reading of the binlog stands: tail's checkpoint, else the snapshot's hand-over."""
        tail = self.checkpoints.get("tail")
        if tail is not None:
            return SourcePosition(tail["file"], tail["pos"], tail.get("gtid"))
        snapshot = self.checkpoints.get("snapshot")
        if snapshot is not None:
            h = snapshot["handover"]
            return SourcePosition(h["file"], h["pos"], h.get("gtid"))
        return None

    def last_segment(self, stage: str) -> str | None:
        """The last change-log segment `stage` has consumed (snowflake-apply: through its last applied batch)."""
        doc = self.checkpoints.get(stage) or {}
        if stage != "snowflake-apply":
            return doc.get("last_segment")
        batch = doc.get("last_batch")
        if batch is None:
            return None
        manifest = read_json(self.root / "batches" / batch / "manifest.json")
        if manifest is None or not isinstance(manifest.get("segments"), list) or len(manifest["segments"]) != 2:
            raise PositionError(
                f"snowflake-apply.json names batch {batch}, but {self.root}/batches/{batch}/manifest.json "
                "is missing or has no segments [first, last]",
                hint="restore the batch directory, or rerun spark-merge and snowflake-apply",
            )
        return str(manifest["segments"][1])

    def pending_segments(self, stage: str) -> list[Path]:
        """Sealed segments `stage` has not consumed yet."""
        last = self.last_segment(stage)
        return [p for p in self.segments if last is None or p.name > last]

    def pending_batches(self) -> list[str]:
        """Sealed batches snowflake-apply has not applied yet."""
        last = (self.checkpoints.get("snowflake-apply") or {}).get("last_batch")
        return [b for b in self.batches if last is None or b > last]


def read_local(state: StateDir) -> LocalState:
    checkpoints = {}
    for stage, stem in CHECKPOINTS.items():
        document = state.read_checkpoint(stem, CHECKPOINT_VERSIONS.get(stem, CHECKPOINT_VERSION))
        if document is not None:
            checkpoints[stage] = _validated(stage, document, state.checkpoint_path(stem))
    return LocalState(state.root, checkpoints, list_segments(state.changelog), _sealed_batches(state.root / "batches"))


def _sealed_batches(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    # A batch is sealed by its manifest, written last; a directory without one is a run in progress.
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("b") and (p / "manifest.json").is_file())


# Field -> accepted types, per stage; None in a tuple means the field may be null.
_FIELDS: dict[str, dict[str, tuple[type | None, ...]]] = {
    "tail": {"file": (str,), "pos": (int,), "gtid": (str, None), "last_segment": (str, None),
             "gtid_state": (str, None), "seq_offset": (int,)},
    "snapshot": {"status": (str,), "handover": (dict,)},
    "ship-kinesis": {"last_segment": (str, None)},
    "ship-s3": {"last_segment": (str, None)},
    "spark-merge": {"last_segment": (str, None), "last_batch": (str, None)},
    "snowflake-apply": {"last_batch": (str, None)},
}
_OPTIONAL = {"gtid", "last_segment", "last_batch", "gtid_state", "seq_offset"}


def _validated(stage: str, document: dict[str, Any], path: Path) -> dict[str, Any]:
    """Refuse a checkpoint whose fields have the wrong shape: a guessed position would skip or repeat data."""
    for name, types in _FIELDS[stage].items():
        value = document.get(name)
        if name not in document and name in _OPTIONAL:
            continue
        if not any((t is None and value is None) or (t is not None and isinstance(value, t) and not isinstance(value, bool))
                   for t in types):
            raise PositionError(
                f"checkpoint {path} is corrupt: {name} = {value!r} is not a {' or '.join(_type_name(t) for t in types)}",
                hint=f"restore {path} from a backup, or remove it and restart `cdc {stage}` from an explicit position",
            )
    if stage == "snapshot":
        _validated("tail", {"file": document["handover"].get("file"), "pos": document["handover"].get("pos")}, path)
    return document


def _type_name(t: type | None) -> str:
    return "null" if t is None else {"str": "string", "int": "integer", "dict": "object"}.get(t.__name__, t.__name__)


def segment_key(name: str) -> tuple[int, int, str]:
    """`seg-0000000003-000000001234-b000000000000.jsonl` -> (3, 1234, "b"): its first line's file_seq, pos, kind."""
    body = name.removeprefix(SEGMENT_PREFIX).removesuffix(SEGMENT_SUFFIX)
    try:
        seq, pos, rest = body.split("-", 2)
        return (int(seq), int(pos), rest[:1])
    except ValueError:
        raise PositionError(f"change-log segment name {name!r} is not seg-<file_seq>-<pos>-<kind><row>.jsonl") from None


def first_line(path: Path) -> dict[str, Any] | None:
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                return _decode(line, path)
    return None


def last_line(path: Path) -> dict[str, Any] | None:
    """The last change of a sealed segment, reading only the end of the file."""
    size = path.stat().st_size
    chunk = _TAIL_BYTES
    with open(path, "rb") as handle:
        while True:
            handle.seek(max(size - chunk, 0), os.SEEK_SET)
            lines = [line for line in handle.read().split(b"\n") if line.strip()]
            # The first piece may be a partial line unless we read from the start of the file.
            if len(lines) > 1 or chunk >= size:
                return _decode(lines[-1], path) if lines else None
            chunk *= 4


def _decode(line: bytes, path: Path) -> dict[str, Any]:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise PositionError(f"change-log segment {path} holds a line that is not JSON ({exc})",
                            hint="the segment is damaged: restore it, or rerun tail from a checkpoint before it") from exc


def change_time(change: dict[str, Any] | None) -> float | None:
    """The commit time (unix seconds) of a change line; None if it has none."""
    text = (change or {}).get("ts")
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
