"""`cdc init`: flags without a terminal, and the wizard with a tiny fake questionary (scripted answers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import questionary

from cdc.commands import ui
from cdc.config import load_settings
from cdc.pipeline.init import Answers, render_toml
from tests.conftest import REPLICATION_PASSWORD
from tests.pipeline.cli import run
from tests.rig import DbUser, MariaDB


class FakeQuestionary:
    """Stands in for questionary.text/password/confirm: scripted answers, validation as questionary does it."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers: Iterator[Any] = iter(answers)
        self.asked: list[str] = []
        self.rejected: list[str] = []

    def _question(self, message: str, validate: Any = None, **_: Any) -> Any:
        fake = self

        class Question:
            def ask(self) -> Any:
                fake.asked.append(message)
                while True:
                    answer = next(fake.answers)
                    verdict = True if validate is None or answer is None else validate(answer)
                    if verdict is True:
                        return answer
                    fake.rejected.append(f"{answer}: {verdict}")  # questionary re-asks on a failed validation

        return Question()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ui, "is_tty", lambda: True)
        for name in ("text", "password", "confirm"):
            monkeypatch.setattr(questionary, name, lambda message, fake=self, **kw: fake._question(message, **kw))


def connection_flags(server: MariaDB, user: DbUser) -> list[str]:
    return ["--host", server.host, "--port", str(server.port), "--user", user.name]


def test_no_input_writes_a_loadable_config_without_the_password(
        mariadb: MariaDB, fresh_db: str, replication_user: DbUser, monkeypatch: pytest.MonkeyPatch) -> None:
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY)", database=fresh_db)
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", REPLICATION_PASSWORD)
    result = run("init", "--no-input", *connection_flags(mariadb, replication_user), "--tables", f"{fresh_db}.*",
                 "--snowflake-database", "RAW", "--state-dir", "/var/lib/cdc")
    assert result.exit_code == 0, result.output
    text = Path("cdc.toml").read_text()
    settings_lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert REPLICATION_PASSWORD not in text and not [line for line in settings_lines if "password" in line]
    monkeypatch.delenv("CDC_MYSQL_PASSWORD")
    settings = load_settings(config_path="cdc.toml", env={})
    assert (settings.mysql.host, settings.mysql.port, settings.mysql.user) == (mariadb.host, mariadb.port, "cdc_repl")
    assert settings.mysql.tables == (f"{fresh_db}.*",) and settings.mysql.password is None
    assert (settings.state_dir, settings.snowflake.database, settings.aws.bucket) == ("/var/lib/cdc", "RAW", None)
    assert "1 table(s) selected" in result.stderr


def test_live_test_failures_stop_without_writing(mariadb: MariaDB, fresh_db: str, replication_user: DbUser,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", "wrong")
    result = run("init", "--no-input", *connection_flags(mariadb, replication_user), "--tables", f"{fresh_db}.x")
    assert result.exit_code == 1 and "access denied" in result.stderr and not Path("cdc.toml").exists()
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", REPLICATION_PASSWORD)
    result = run("init", "--no-input", *connection_flags(mariadb, replication_user), "--tables", f"{fresh_db}.nothing")
    assert result.exit_code != 0 and not Path("cdc.toml").exists()
    result = run("init", "--no-input", "--skip-test", *connection_flags(mariadb, replication_user),
                 "--tables", f"{fresh_db}.nothing")
    assert result.exit_code == 0 and Path("cdc.toml").exists()


@pytest.mark.parametrize(("args", "needle"), [
    ([], "missing --host"),
    (["--host", "db"], "missing --user"),
    (["--host", "db", "--user", "u"], "missing --tables"),
    (["--host", "db", "--user", "u", "--tables", "nodot"], "--tables 'nodot': not db.table"),
    (["--host", "db", "--user", "u", "--tables", "a.b", "--port", "99999"], "--port '99999': not a TCP port"),
    (["--host", "db", "--user", "u", "--tables", "a.b", "--bucket", "Bad_Bucket"], "--bucket 'Bad_Bucket'"),
])
def test_without_a_terminal_missing_or_bad_answers_exit_2(args: list[str], needle: str) -> None:
    result = run("init", "--skip-test", *args)  # CliRunner's stdin is no TTY: nothing waits
    assert result.exit_code == 2 and needle in result.stderr.replace("\n", " ")
    assert not Path("cdc.toml").exists()


def test_refuses_to_overwrite_without_force() -> None:
    Path("cdc.toml").write_text("# mine\n")
    args = ["init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.b"]
    result = run(*args)
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert Path("cdc.toml").read_text() == "# mine\n"
    assert run(*args, "--force").exit_code == 0
    assert load_settings(config_path="cdc.toml", env={}).mysql.host == "db"


def test_wizard_asks_tests_and_re_asks_after_a_failed_connection(
        mariadb: MariaDB, fresh_db: str, replication_user: DbUser, monkeypatch: pytest.MonkeyPatch) -> None:
    mariadb.execute("CREATE TABLE a (id INT PRIMARY KEY)", database=fresh_db)
    fake = FakeQuestionary([
        # mysql: a wrong port first (nothing listens on port 1), the password, the test fails
        mariadb.host, "http://x", "1", replication_user.name, "", REPLICATION_PASSWORD, True,
        # ... asked again, with the previous answers as defaults
        mariadb.host, str(mariadb.port), replication_user.name, "",
        # tables (one invalid answer first), state dir
        "just-a-name", f"{fresh_db}.a", "",
        # aws and snowflake: nothing
        "", "", "", "", "", "", "",
    ])
    fake.install(monkeypatch)
    result = run("init")
    assert result.exit_code == 0, result.output
    assert fake.rejected == ["http://x: not a TCP port (1-65535)", "just-a-name: not db.table: 'just-a-name' "
                             "(globs allowed: shop.*)"]
    assert sum("Password" in m for m in fake.asked) == 1 and "Change these answers?" in fake.asked
    settings = load_settings(config_path="cdc.toml", env={})
    assert (settings.mysql.port, settings.mysql.tables, settings.aws.stream) == (mariadb.port, (f"{fresh_db}.a",), None)
    assert REPLICATION_PASSWORD not in Path("cdc.toml").read_text()


def test_wizard_ctrl_c_aborts_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeQuestionary(["db", None]).install(monkeypatch)
    result = run("init", "--skip-test")
    assert result.exit_code == 1 and not Path("cdc.toml").exists()


def test_flags_are_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeQuestionary(["", "", "", "", "", "", "", "", "", "", ""])
    fake.install(monkeypatch)
    result = run("init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.b")
    assert result.exit_code == 0, result.output
    assert not any(m.startswith(("MySQL host", "MySQL user", "Tables")) for m in fake.asked)


@pytest.mark.parametrize("hostile", ['sh"op', "sh'op", "s\\hop", "shöp🐬", "a#b"])
def test_hostile_values_survive_the_toml(hostile: str, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(render_toml(Answers(host="db", user="u", tables=f"{hostile}.t", snowflake_schema="S")))
    assert load_settings(config_path=path, env={}).mysql.tables == (f"{hostile}.t",)
