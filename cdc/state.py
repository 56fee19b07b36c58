"""The state directory: atomic versioned JSON checkpoints, per-stage locks, the server identity.

Layout (all paths relative to the state directory, default ./.cdc):
    server.json          which MySQL server this state belongs to (uuid, id, flavour, version)
    <stage>.json         a stage's checkpoint (tail.json, ship-s3.json, merge.json, ...)
    locks/<stage>.lock   flock held while a stage runs
    errors/<stage>.json  the stage's last error, until it succeeds again (cdc.pipeline.failures; private, 0600)
    changelog/           sealed change-log segments (written by tail and snapshot)
    schema/              per-table schema history
    lake/                spark-merge's current-state tables (its default --target)
    batches/<id>/        spark-merge's Snowflake-ready batches, each sealed by its manifest.json (written last)

What each checkpoint holds is cdc.checkpoints' business; this module knows where things are and how to
write them so that a crash leaves the old file or the new one.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cdc.errors import CdcError, LockedError, PositionError

DEFAULT_STATE_DIR = ".cdc"
# Files cdc writes hold replicated rows (often personal data) and positions: owner only, whatever the
# caller's umask (#26). Applied to the process, so it covers every writer — Python's, pyarrow's, the C
# snapshot reader's, the Spark JVM started from here — not only the ones that pass a mode.
PRIVATE_UMASK = 0o077
BATCH_PREFIX = "b"  # batch ids are b<run, zero-padded>; spark-merge's staging folders start with "."
# batches/pruned.json: {"version": 1, "through": batch id, "done": batch id | null} (cdc.pipeline.prune_batches).
BATCHES_PRUNED = "pruned.json"
SERVER_RECORD_VERSION = 1


def keep_files_private() -> None:
    """Make every file and directory this process creates from now on owner-only (0600 files, 0700 directories)."""
    os.umask(PRIVATE_UMASK)


def fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable (POSIX needs the directory itself fsynced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_file_range() -> Any:
    """libc's sync_file_range (Linux), or None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2  # <fcntl.h>: start writing the range's dirty pages, do not wait for them


def start_writeback(fd: int, offset: int) -> None:
    """Have the kernel start writing `fd`'s dirty pages from `offset` to the end to disk, without waiting.

    Only a head start for the fsync that makes the file durable later (which then has less left to write,
    and which reports any I/O error): where the call does not exist or fails, nothing else changes.
    """
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, offset, 0, _SYNC_FILE_RANGE_WRITE)  # 0: to the end of the file


def write_bytes_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the new one, never half.

    The file is private (0600, from mkstemp) unless `mode` says otherwise, set before the rename, so that
    no reader ever sees the new file with other permissions.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(Path(tmp))
        raise
    fsync_dir(path.parent)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full_error(exc: OSError, path: Path) -> CdcError | None:
    """The error to raise instead of `exc` when it means "no space left" while writing `path`, else None.

    Every writer here writes data before it advances a checkpoint, so a full disk leaves the last
    checkpoint where it was: freeing space and rerunning resumes without loss.
    """
    if not is_disk_full(exc):
        return None
    return CdcError(f"no space left on device writing {path}; the checkpoint was not advanced",
                    hint=f"free space on the filesystem of {path.parent} (df -h; `cdc prune` deletes what every stage has "
                         "read), then rerun the same command")


@contextmanager
def disk_full_as_error(path: Path) -> Iterator[None]:
    """Raise disk_full_error for a full disk inside the block (for writes off the per-line hot path)."""
    try:
        yield
    except OSError as exc:
        raise (disk_full_error(exc, path) or exc) from exc


def write_json_atomic(path: Path, document: dict[str, Any]) -> None:
    """Write a JSON document atomically, pretty enough for `cat` and stable for diffs."""
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    with disk_full_as_error(path):
        write_bytes_atomic(path, text.encode("utf-8"))


def read_json(path: Path) -> dict[str, Any] | None:
    """Read a JSON document; None if the file does not exist; PositionError naming the file if corrupt."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PositionError(
            f"checkpoint {path} is corrupt ({exc}); refusing to guess a position",
            hint=f"restore {path} from a backup, or remove it and restart the stage from an explicit position",
        ) from exc
    if not isinstance(document, dict):
        raise PositionError(f"checkpoint {path} is corrupt (not a JSON object)", hint=f"restore or remove {path}")
    return document


# What a run leaves in a state directory before it has written anything of value: its lock files, the column
# rules and the server it bound the directory to, and the record of the error it failed with (for `cdc status`).
_BOOKKEEPING = ("locks", "server.json", "column-rules.json", "errors")


def discard_if_unused(root: Path) -> bool:
    """Remove a state directory that holds nothing but bookkeeping (a first run that failed before writing data).

    A new user's first command often fails (binlog off, a wrong password); a directory it leaves behind would
    bind a retry to the wrong server or look like a started pipeline. Anything else in it (a checkpoint, a
    segment, a chunk of a snapshot) is kept: that is progress a rerun resumes from.
    """
    if not root.is_dir():
        return False
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if relative.parts[0] not in _BOOKKEEPING:
            return False
        if path.is_file() and relative.parts[0] == "locks" and path.suffix != ".lock":
            return False
    shutil.rmtree(root, ignore_errors=True)
    return not root.exists()


class StateDir:
    """Paths and primitives of one state directory."""

    def __init__(self, root: Path | str = DEFAULT_STATE_DIR) -> None:
        self.root = Path(root)

    def ensure(self) -> StateDir:
        self.root.mkdir(parents=True, exist_ok=True)
        # A directory made by an older cdc (or by hand) under umask 022 is 0755: narrowing the root closes
        # everything below it to other users at once.
        if self.root.stat().st_mode & 0o077 and self.root.stat().st_uid == os.getuid():
            self.root.chmod(0o700)
        return self

    @property
    def changelog(self) -> Path:
        return self.root / "changelog"

    @property
    def schema(self) -> Path:
        return self.root / "schema"

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    @property
    def batches(self) -> Path:
        return self.root / "batches"

    def batch_dir(self, batch_id: str) -> Path:
        return self.batches / batch_id

    def manifest_path(self, batch_id: str) -> Path:
        return self.batch_dir(batch_id) / "manifest.json"

    def batch_ids(self) -> list[str]:
        """Ids of every batch folder, sealed or not, in id (= time) order: names only, nothing read or stat'ed."""
        if not self.batches.is_dir():
            return []
        return sorted(name for name in os.listdir(self.batches) if name.startswith(BATCH_PREFIX))

    def sealed_batches(self, after: str | None = None) -> list[str]:
        """Ids of the batches whose manifest is written, in id (= time) order (only those after `after`: a long
        --follow run seals one every few seconds, and looks only at the new ones); a folder without one is a run
        in progress (the manifest is written last) and is not a batch yet."""
        base = str(self.batches)  # strings, not Paths: a long run's folder holds a day of batches
        return [batch for batch in self.batch_ids()
                if (after is None or batch > after) and os.path.isfile(f"{base}/{batch}/manifest.json")]

    def batches_pruned(self) -> tuple[str | None, str | None]:
        """(through, done): the data files of the batches up to `through` may be gone, of those up to `done` are (their
        manifests stay). (None, None): never pruned."""
        path = self.batches / BATCHES_PRUNED
        document = read_json(path)
        if document is None:
            return None, None
        through, done = document.get("through"), document.get("done")
        if not isinstance(through, str) or not (done is None or isinstance(done, str)):
            raise PositionError(f"{path} is corrupt (\"through\" and \"done\" must be batch ids)",
                                hint="restore it from a backup; cdc prune writes it before it deletes anything")
        return through, done

    def mark_batches_pruned(self, through: str, done: str | None) -> None:
        write_json_atomic(self.batches / BATCHES_PRUNED, {"version": 1, "through": through, "done": done})

    def checkpoint_path(self, stage: str) -> Path:
        return self.root / f"{stage}.json"

    @property
    def errors(self) -> Path:
        return self.root / "errors"

    def error_path(self, stage: str) -> Path:
        """Where the last error of `stage` is recorded (cdc.pipeline.failures) until the stage succeeds again."""
        return self.errors / f"{stage}.json"

    def read_checkpoint(self, stage: str, expected_version: int) -> dict[str, Any] | None:
        """Read a stage's checkpoint, refusing versions this build does not understand."""
        path = self.checkpoint_path(stage)
        document = read_json(path)
        if document is None:
            return None
        version = document.get("version")
        if not isinstance(version, int) or version > expected_version or version < 1:
            raise PositionError(
                f"checkpoint {path} has version {version!r}; this cdc understands up to {expected_version}",
                hint="upgrade cdc, or restore the checkpoint written by this version",
            )
        return document

    def write_checkpoint(self, stage: str, document: dict[str, Any]) -> None:
        if "version" not in document:
            raise ValueError("a checkpoint needs a version")
        write_json_atomic(self.checkpoint_path(stage), document)

    @contextmanager
    def lock(self, stage: str) -> Iterator[None]:
        """Hold the stage's lock; a second run of the same stage on this directory fails at once."""
        lock_dir = self.root / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        path = lock_dir / f"{stage}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(path)
                raise LockedError(
                    f"another `cdc {stage}` is running on state directory {self.root} ({holder})",
                    hint="wait for it to finish or stop it; two runs of one stage would interleave their output",
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}\n".encode())
            yield
        finally:
            os.close(fd)  # closing releases the flock; the file stays, harmlessly

    def read_server(self) -> ServerIdentity | None:
        document = read_json(self.root / "server.json")
        return None if document is None else ServerIdentity.from_dict(document)

    def bind_server(self, found: ServerIdentity, *, rebase: bool = False, hint: str | None = None) -> None:
        """Record the server this state belongs to, or refuse a different one.

        Positions are only meaningful on the server that wrote the binlog: a checkpoint
        from another server would silently skip or replay arbitrary changes.
        """
        known = self.read_server()
        if known is not None and not rebase and not known.is_same_server(found):
            raise PositionError(
                f"state directory {self.root} belongs to server {known.describe()}, "
                f"but this connection reached {found.describe()}",
                hint=hint or "point --state-dir at the right directory, or, after a failover to a replica of that "
                "server, run `cdc tail --until-now --rebase` once: it continues from the GTIDs cdc has captured",
            )
        if known != found:
            write_json_atomic(self.root / "server.json", found.to_dict())


def _read_holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "holder unknown"
    except OSError:
        return "holder unknown"


@dataclass(frozen=True)
class ServerIdentity:
    """Which server a state directory's positions refer to."""

    server_uuid: str
    server_id: int
    flavour: str
    server_version: str

    def is_same_server(self, other: ServerIdentity) -> bool:
        # MariaDB has no @@server_uuid; cdc.source derives a stable one (see identify_server).
        return self.server_uuid == other.server_uuid

    def describe(self) -> str:
        return f"{self.flavour} {self.server_version} uuid={self.server_uuid} server_id={self.server_id}"

    def to_dict(self) -> dict[str, Any]:
        return {"version": SERVER_RECORD_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> ServerIdentity:
        try:
            return cls(
                server_uuid=str(document["server_uuid"]),
                server_id=int(document["server_id"]),
                flavour=str(document["flavour"]),
                server_version=str(document["server_version"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PositionError(f"server.json is corrupt ({exc})", hint="restore or remove server.json") from exc
