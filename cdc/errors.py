"""One error hierarchy; every error carries the exit code a command should end with."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented process exit codes (docs/exit-codes.md). Never reuse a number."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    CONFIG = 3
    PRECONDITION = 4
    POSITION = 5
    LOCKED = 6
    DIFFERENCE = 7
    RUNWAY = 8
    TIMEOUT = 9
    TRANSIENT = 10  # worth retrying as it is: a lost connection, throttling, a 5xx after cdc's own retries
    INTERRUPTED = 130  # Ctrl-C (SIGINT) before the work was complete
    TERMINATED = 143  # SIGTERM before the work was complete (128 + 15, as a shell reports a process it killed)


class CdcError(Exception):
    """Base of every error cdc raises on purpose: what happened, where, and what to do."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  fix: {self.hint}"


class ConfigError(CdcError):
    """A setting is missing, malformed or contradicts another one."""

    exit_code = ExitCode.CONFIG


class UsageError(CdcError):
    """The command line asks for something impossible (bad combination of flags)."""

    exit_code = ExitCode.USAGE


class PreconditionError(CdcError):
    """The server or the environment is not ready (binlog off, wrong format, missing grant...)."""

    exit_code = ExitCode.PRECONDITION


class PositionError(CdcError):
    """A checkpoint or a start position cannot be used: corrupt, foreign, purged or missing."""

    exit_code = ExitCode.POSITION


class LockedError(CdcError):
    """Another run of the same stage holds the state directory's lock."""

    exit_code = ExitCode.LOCKED


class ConnectError(CdcError):
    """A server (MySQL, AWS, Snowflake) could not be reached or refused our credentials."""

    exit_code = ExitCode.FAILURE


class TransientError(CdcError):
    """A fault worth retrying (lost connection, throttling, 5xx): its own exit code, so a script can retry."""

    exit_code = ExitCode.TRANSIENT


class DataError(CdcError):
    """A value or event cannot be represented exactly; we stop rather than write a wrong value."""

    exit_code = ExitCode.FAILURE


class TimeoutExpired(CdcError):
    """A wait gate ran out of time."""

    exit_code = ExitCode.TIMEOUT
