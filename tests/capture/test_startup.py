"""Tail's start-up retried in --follow after a transient failure, never after a permanent one (issue #27)."""

from __future__ import annotations

import pymysql
import pytest

from cdc.capture.startup import start_up
from cdc.config import MySQLSettings
from cdc.errors import ConnectError, PositionError, TransientError

MYSQL = MySQLSettings(host="db.example", port=3306, user="cdc")


def _attempts(*outcomes: BaseException | str) -> tuple[list[int], object]:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return calls, attempt


def _start(attempt: object, *, retry: bool = True, timeout: float = 60.0, stop: bool = False) -> str | None:
    return start_up(attempt, MYSQL, retry=retry, read_timeout=0.04, reconnect_timeout=timeout,  # type: ignore[arg-type]
                    should_stop=lambda: stop)


def test_a_lost_connection_is_retried_until_the_start_up_succeeds() -> None:
    lost = pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
    calls, attempt = _attempts(TransientError("cannot reach"), lost, pymysql.err.InterfaceError(0, ""), "started")
    assert _start(attempt) == "started" and len(calls) == 4


@pytest.mark.parametrize("error", [ConnectError("access denied"), PositionError("purged"),
                                   pymysql.err.OperationalError(1045, "Access denied for user 'cdc'")])
def test_a_permanent_error_ends_the_start_up_at_once(error: BaseException) -> None:
    calls, attempt = _attempts(error, "started")
    with pytest.raises(ConnectError if not isinstance(error, PositionError) else PositionError):
        _start(attempt)
    assert len(calls) == 1


def test_until_now_and_a_long_outage_end_with_exit_10() -> None:
    calls, attempt = _attempts(pymysql.err.OperationalError(2013, "Lost connection"), "started")
    with pytest.raises(TransientError, match="cannot reach MySQL at db.example:3306"):
        _start(attempt, retry=False)
    assert len(calls) == 1
    calls, attempt = _attempts(*[TransientError("cannot reach")] * 50)
    with pytest.raises(TransientError, match="gave up after 0s of retries while tail started"):
        _start(attempt, timeout=0.0)


def test_a_signal_while_waiting_to_retry_ends_the_start_up() -> None:
    calls, attempt = _attempts(TransientError("cannot reach"), "started")
    assert _start(attempt, stop=True) is None and len(calls) == 1
