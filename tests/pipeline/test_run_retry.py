"""`cdc run --follow` retries a cycle after a transient stage failure, with backoff, up to a limit (issue #27)."""

from __future__ import annotations

import pytest

from cdc.errors import ConnectError, TransientError
from cdc.pipeline.run import StageError, _Retry


def test_a_transient_failure_is_retried_until_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("cdc.pipeline.run.time.monotonic", lambda: clock[0])
    retry = _Retry(limit=60.0)
    lost = StageError("tail", TransientError("lost the binlog connection"))
    pauses = [retry.after(lost) for _ in range(8)]
    assert all(0 <= p <= 30.0 for p in pauses) and retry.failures == 8
    clock[0] += 61
    with pytest.raises(StageError):
        retry.after(lost)  # failing for longer than the limit: the run ends with the stage's own error
    retry.succeeded()  # a cycle that completes starts the count again
    assert retry.after(lost) <= 2.0


def test_other_failures_and_until_now_are_not_retried() -> None:
    with pytest.raises(StageError):
        _Retry(limit=300.0).after(StageError("tail", ConnectError("access denied")))
    with pytest.raises(StageError):
        _Retry(limit=0.0).after(StageError("ship-s3", TransientError("throttled")))  # --until-now: limit 0
