"""-p/--password: a hidden questionary prompt at a terminal only; without one it refuses (exit 3) and waits for nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import Result

from cdc.commands import ui
from tests.commands.conftest import flat, server_args
from tests.rig import MariaDB


class FakePassword:
    """questionary.password stand-in (the prompt is the one edge we fake)."""

    def __init__(self, answer: str | None) -> None:
        self.answer, self.questions = answer, []  # type: ignore[var-annotated]

    def __call__(self, question: str, **_: Any) -> FakePassword:
        self.questions.append(question)
        return self

    def ask(self) -> str | None:
        return self.answer


def test_prompt_at_a_terminal_is_hidden_and_used(mariadb: MariaDB, cli: Callable[..., Result],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    mariadb.create_user("cdc_prompted", "pr0mpt-Pa55")
    monkeypatch.setattr(ui, "is_tty", lambda: True)
    fake = FakePassword("pr0mpt-Pa55")
    monkeypatch.setattr("questionary.password", fake)  # questionary.password masks what is typed
    result = cli("check-binlog", "--json", "-p", "--server-id", "777011", *server_args(mariadb, user="cdc_prompted"))
    assert fake.questions == [f"Password for cdc_prompted@{mariadb.host}:{mariadb.port}:"]
    assert json.loads(result.stdout)["server"]["user"] == "cdc_prompted@%"
    assert "pr0mpt-Pa55" not in result.output


def test_no_terminal_refuses_without_waiting(mariadb: MariaDB, cli: Callable[..., Result]) -> None:
    result = cli("check-binlog", "--password", *server_args(mariadb))  # CliRunner has no TTY
    assert result.exit_code == 3
    assert "--password asks for the password at a terminal, but there is none" in flat(result.stderr)


def test_ctrl_c_at_the_prompt_aborts(mariadb: MariaDB, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui, "is_tty", lambda: True)
    monkeypatch.setattr("questionary.password", FakePassword(None))
    result = cli("check-binlog", "-p", *server_args(mariadb))
    assert result.exit_code == 1 and result.stdout == ""
