"""`cdc set-retention` on a throwaway server of its own: dry run, refusal without a TTY, --yes, the prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import Result

from cdc.commands import ui
from tests.commands.conftest import flat, server_args
from tests.rig import MariaDB


class FakeConfirm:
    """questionary.confirm stand-in: the prompt is the one edge we fake (no terminal in tests)."""

    def __init__(self, answer: bool | None) -> None:
        self.answer = answer
        self.questions: list[str] = []

    def __call__(self, question: str, **_: Any) -> FakeConfirm:
        self.questions.append(question)
        return self

    def ask(self) -> bool | None:
        return self.answer


def test_set_retention_end_to_end(
    mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = mariadb_factory()  # not the session server: its retention must not change under other tests
    args = ["set-retention", *server_args(db)]

    dry = cli(*args, "--hours", "72", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "SET GLOBAL binlog_expire_logs_seconds = 259200" in dry.stdout
    assert "dry run: nothing changed" in flat(dry.stderr)
    assert db.variable("binlog_expire_logs_seconds") == 0

    refused = cli(*args, "--hours", "72")  # CliRunner has no TTY
    assert refused.exit_code == 2
    assert "there is no terminal to confirm at; nothing was changed" in flat(refused.stderr)
    assert db.variable("binlog_expire_logs_seconds") == 0

    out_of_range = cli(*args, "--hours", "5000", "--yes")
    assert out_of_range.exit_code == 2
    message = flat(out_of_range.stderr)
    assert "--hours 5000 is outside what mariadb" in message and "(1..2376 hours)" in message

    done = cli(*args, "--hours", "72", "--yes", "--json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert (result["applied"], result["statement"]) == (True, "SET GLOBAL binlog_expire_logs_seconds = 259200")
    assert result["current"] == {"hours": None, "raw": "0", "setting": "binlog_expire_logs_seconds"}
    assert result["after"] == {"hours": 72.0, "raw": "259200", "setting": "binlog_expire_logs_seconds"}
    assert db.variable("binlog_expire_logs_seconds") == 259200

    # At a terminal the question is asked; "no" and Ctrl-C change nothing.
    monkeypatch.setattr(ui, "is_tty", lambda: True)
    for answer in (False, None):
        fake = FakeConfirm(answer)
        monkeypatch.setattr("questionary.confirm", fake)
        declined = cli(*args, "--hours", "96")
        assert declined.exit_code == 1
        assert fake.questions == ["Run `SET GLOBAL binlog_expire_logs_seconds = 345600`?"]
        assert db.variable("binlog_expire_logs_seconds") == 259200
    monkeypatch.setattr("questionary.confirm", FakeConfirm(True))
    accepted = cli(*args, "--hours", "96")
    assert accepted.exit_code == 0
    assert "binlog retention is now 96h (binlog_expire_logs_seconds=345600)" in flat(accepted.stderr)
    assert db.variable("binlog_expire_logs_seconds") == 345600


def test_user_without_the_privilege_gets_a_precondition_error(
    mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result]
) -> None:
    db = mariadb_factory()
    db.create_user("reader", "pw-reader", ("SELECT",))
    result = cli("set-retention", *server_args(db, user="reader"), "--hours", "48", "--yes",
                 env={"CDC_MYSQL_PASSWORD": "pw-reader"})
    assert result.exit_code == 4
    assert "`SET GLOBAL binlog_expire_logs_seconds = 172800` failed on" in flat(result.stderr)
    assert db.variable("binlog_expire_logs_seconds") == 0
