"""The last error of each stage, recorded in the state directory: `<state>/errors/<stage>.json` (docs/formats.md).

A failing stage only printed its error; at night nobody reads that terminal. So the one place a CdcError
becomes an exit code (commands/main.py's CdcGroup, for the stage commands) and `cdc run`'s chain (for the
stage that failed inside it) record it here, and `cdc status` shows it: stage, when, message, fix, exit code.

- One file per stage: two stages failing at once (tail and ship run as separate processes) never race for
  one file. Written atomically and private (0600, like every file from StateDir's writer).
- Never a secret: the messages cdc writes name hosts and users, never passwords, and every value cdc knows to
  be a secret (the MySQL password, secret-looking environment variables) is replaced by *** all the same.
- A success of the stage removes its file. A run that ends otherwise (Ctrl-C) leaves it, but `cdc status`
  ignores a record once the stage's checkpoint has changed since the failure (`checkpoint_sha256`): the stage
  has committed work after it, so the error is history.
- A failure is recorded only in a state directory that exists (a mistyped --state-dir is never created for
  it), and never for exit 6: "another run holds the lock" says nothing about the stage, which is running.
- Recording is best effort: when it fails (read-only or full disk) the stage's own error still decides.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.checkpoints import STAGE_CHECKPOINTS
from cdc.config import Settings
from cdc.errors import CdcError, ExitCode, PositionError
from cdc.state import StateDir, read_json, write_json_atomic

FAILURE_VERSION = 1
_STAGE_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
# Environment variables whose values are secrets whatever cdc does with them (AWS keys, Snowflake, MySQL).
_SECRET_WORDS = ("PASSWORD", "PASSPHRASE", "SECRET", "TOKEN", "PRIVATE_KEY", "HASH_KEY")
_MIN_SECRET = 4  # shorter values would blank out ordinary words
REDACTED = "***"
_MAX_MESSAGE = 4000


@dataclass(frozen=True)
class StageFailure:
    """The last failure of a stage, as recorded."""

    stage: str
    failed_at: float  # unix seconds
    command: str  # what was run: "cdc tail", "cdc run"
    error: str  # the error's class: PositionError, TransientError...
    message: str
    hint: str | None
    exit_code: int
    failures: int  # consecutive failures of the stage (1 for the first since its last success)
    checkpoint_sha256: str | None  # the stage's checkpoint file as it was at the failure (None: it had none)

    def to_dict(self) -> dict[str, Any]:
        return {"version": FAILURE_VERSION, "stage": self.stage, "failed_at": iso_time(self.failed_at),
                "failed_at_unix": round(self.failed_at, 3), "command": self.command, "error": self.error,
                "message": self.message, "hint": self.hint, "exit_code": self.exit_code, "failures": self.failures,
                "checkpoint_sha256": self.checkpoint_sha256}

    @classmethod
    def from_dict(cls, document: Mapping[str, Any], path: Path) -> StageFailure:
        try:
            hint, digest = document.get("hint"), document.get("checkpoint_sha256")
            return cls(str(document["stage"]), float(document["failed_at_unix"]), str(document["command"]),
                       str(document["error"]), str(document["message"]), None if hint is None else str(hint),
                       int(document["exit_code"]), int(document["failures"]), None if digest is None else str(digest))
        except (KeyError, TypeError, ValueError) as exc:
            raise PositionError(f"error record {path} is corrupt ({exc!r})", hint=f"remove {path}") from None


def iso_time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def known_secrets(settings: Settings | None, env: Mapping[str, str] | None = None) -> list[str]:
    """Values that must never be written: the MySQL password and secret-looking environment variables."""
    env = os.environ if env is None else env
    found = [] if settings is None or not settings.mysql.password else [settings.mysql.password]
    found += [value for name, value in env.items()
              if (name == "MYSQL_PWD" or any(word in name.upper() for word in _SECRET_WORDS))]
    return sorted({value for value in found if len(value) >= _MIN_SECRET}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:  # longest first (known_secrets' order): a secret inside another goes with it
        text = text.replace(secret, REDACTED)
    return text


def checkpoint_digest(state: StateDir, stage: str) -> str | None:
    """sha256 of the stage's checkpoint file (None: the stage has none, or keeps none, like snowflake-bootstrap)."""
    path = checkpoint_file(state, stage)
    try:
        return None if path is None else hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def checkpoint_file(state: StateDir, stage: str) -> Path | None:
    for kind in STAGE_CHECKPOINTS:
        if kind.STAGE == stage:
            return kind.path(state)
    return None


def record_failure(state: StateDir, stage: str, error: BaseException, *, command: str,
                   secrets: Iterable[str] = (), now: float | None = None) -> StageFailure | None:
    """Record `error` as the last error of `stage`; None when not recorded (see the module's rules)."""
    exit_code = int(error.exit_code) if isinstance(error, CdcError) else int(ExitCode.FAILURE)
    if exit_code == ExitCode.LOCKED or not state.root.is_dir() or not _STAGE_NAME.match(stage):
        return None
    secrets = list(secrets)
    if isinstance(error, CdcError):
        message, hint = error.message, error.hint
    else:  # a bug or an unmapped library error: its type and text, as the traceback shows them
        message, hint = f"{type(error).__name__}: {error}", None
    digest = checkpoint_digest(state, stage)
    try:
        previous = read_failure(state, stage)
    except PositionError:
        previous = None  # replaced by this one
    repeated = previous is not None and previous.checkpoint_sha256 == digest
    failure = StageFailure(
        stage, time.time() if now is None else now, command, type(error).__name__,
        redact(message, secrets)[:_MAX_MESSAGE], None if hint is None else redact(hint, secrets)[:_MAX_MESSAGE],
        exit_code, previous.failures + 1 if repeated and previous is not None else 1, digest)
    state.errors.mkdir(mode=0o700, exist_ok=True)
    write_json_atomic(state.error_path(stage), failure.to_dict())
    return failure


def clear_failure(state: StateDir, stage: str) -> None:
    """The stage succeeded: its last error is history."""
    if _STAGE_NAME.match(stage):
        state.error_path(stage).unlink(missing_ok=True)


def read_failure(state: StateDir, stage: str) -> StageFailure | None:
    """The recorded last error of `stage` (current or not); PositionError if the file is corrupt."""
    path = state.error_path(stage)
    document = read_json(path)
    if document is None:
        return None
    version = document.get("version")
    if not isinstance(version, int) or not 1 <= version <= FAILURE_VERSION:
        raise PositionError(f"error record {path} has version {version!r}; this cdc understands up to "
                            f"{FAILURE_VERSION}", hint=f"upgrade cdc, or remove {path}")
    return StageFailure.from_dict(document, path)


def current_failures(state: StateDir, notes: list[str] | None = None) -> dict[str, StageFailure]:
    """The recorded errors that still stand, by stage: those of stages that have not committed work since.

    An unreadable record is skipped with a note: status must not fail on a file that only reports.
    """
    if not state.errors.is_dir():
        return {}
    found: dict[str, StageFailure] = {}
    for path in sorted(state.errors.glob("*.json")):
        try:
            failure = read_failure(state, path.stem)
        except PositionError as exc:
            if notes is not None:
                notes.append(f"ignored: {exc.message}")
            continue
        if failure is not None and failure.checkpoint_sha256 == checkpoint_digest(state, failure.stage):
            found[failure.stage] = failure
    return found
