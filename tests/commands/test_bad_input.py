"""Bad input at every entry point that reaches MySQL: one clear message, a documented exit code, no secret
printed, nothing written to the state directory.

Each command below is run as a user would type it, with a wrong password, an unresolvable host, a port
nobody listens on, and a malformed cdc.toml.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from cdc.errors import ExitCode
from tests.commands.conftest import flat, server_args
from tests.rig import MariaDB
from tests.rig._process import free_port

# Every command that opens a MySQL connection, with the arguments that make it want one.
CONNECTING = {
    "check-binlog": ("check-binlog",),
    "set-retention": ("set-retention", "--hours", "24", "--dry-run"),
    "snapshot": ("snapshot", "--databases", "shop"),
    "tail": ("tail", "--until-now", "--from-now"),
    "status": ("status",),
    "run": ("run", "--until-now", "--stages", "tail", "--from-now"),
    "init": ("init", "--no-input", "--tables", "shop.*", "--output", "out.toml"),
}
PASSWORD = "s3cret-'\"-Pa55"


def _state_is_untouched(root: Path) -> bool:
    """No checkpoint, segment or server record was written (a lock file may be created and released, and the
    failure recorded in errors/ for `cdc status`)."""
    state = root / ".cdc"
    written = [p for p in state.rglob("*") if p.is_file() and not {"locks", "errors"} & set(p.parts)] \
        if state.exists() else []
    return not written and not (root / "out.toml").exists()


def _with_server(args: tuple[str, ...], host: str, port: int, user: str = "root") -> list[str]:
    # `cdc init` takes the connection as answers, the other commands as MySQL options: both spell them alike.
    return [*args, "--host", host, "--port", str(port), "--user", user]


@pytest.mark.parametrize("command", CONNECTING)
def test_wrong_password_exits_1_names_user_and_server_and_hides_the_password(
        command: str, mariadb: MariaDB, cli: Callable[..., Result], isolated: Path) -> None:
    mariadb.create_user("cdc_bad_input", "the-right-one")
    result = cli(*_with_server(CONNECTING[command], mariadb.host, mariadb.port, "cdc_bad_input"),
                 env={"CDC_MYSQL_PASSWORD": PASSWORD})
    assert result.exit_code == ExitCode.FAILURE, result.output
    assert f"MySQL at {mariadb.host}:{mariadb.port} as user 'cdc_bad_input': access denied" in flat(result.output)
    assert PASSWORD not in result.output and "the-right-one" not in result.output
    assert "Traceback" not in result.output
    assert _state_is_untouched(isolated)


@pytest.mark.parametrize("command", CONNECTING)
@pytest.mark.parametrize("where", ["closed port", "unknown host"])
def test_unreachable_server_exits_10_naming_it(command: str, where: str, cli: Callable[..., Result],
                                               isolated: Path) -> None:
    host, port = ("127.0.0.1", free_port()) if where == "closed port" else ("no-such-host.invalid", 3306)
    result = cli(*_with_server(CONNECTING[command], host, port))
    assert result.exit_code == ExitCode.TRANSIENT, result.output  # worth retrying: the server may be restarting
    assert f"cannot reach MySQL at {host}:{port}" in flat(result.output)
    assert "Traceback" not in result.output
    assert _state_is_untouched(isolated)


# Every command that reads cdc.toml (`init` writes it instead).
READING_CONFIG = {**{k: v for k, v in CONNECTING.items() if k != "init"}, "ship": ("ship", "--to", "s3"),
                  "spark-merge": ("spark-merge",), "snowflake-apply": ("snowflake-apply",), "verify": ("verify",),
                  "wait": ("wait", "--lag-below", "5s", "--timeout", "1s")}


@pytest.mark.parametrize("command", READING_CONFIG)
def test_malformed_cdc_toml_exits_3_naming_the_file(command: str, cli: Callable[..., Result], isolated: Path) -> None:
    (isolated / "cdc.toml").write_text('[mysql]\nhost = "db.example.com\nport = 3306\n', encoding="utf-8")
    result = cli(*READING_CONFIG[command])
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "cdc.toml" in flat(result.output) and "Traceback" not in result.output


def test_unknown_table_is_refused_before_anything_is_copied(mariadb: MariaDB, fresh_db: str,
                                                            cli: Callable[..., Result], isolated: Path) -> None:
    result = cli("snapshot", "--tables", f"{fresh_db}.no_such_table", *server_args(mariadb))
    assert result.exit_code in (ExitCode.USAGE, ExitCode.PRECONDITION), result.output
    assert f"{fresh_db}.no_such_table" in flat(result.output)
    assert not (isolated / ".cdc" / "snapshot.json").exists()
