"""Shell completion of option values, through click's real mechanism (the _CDC_COMPLETE environment protocol
that `cdc --install-completion` wires into the shell), with the exact candidates a user sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cdc.commands.main import app
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.state import StateDir

ALL_MODES = ["DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"]


def complete(line: str, *, env: dict[str, str] | None = None) -> list[str]:
    """What bash offers for the last word of `line` (a trailing space: a new, empty word)."""
    words = line.split(" ")
    result = CliRunner().invoke(app, [], prog_name="cdc", catch_exceptions=False, env={
        "_CDC_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1), **(env or {})})
    assert result.exit_code == 0 and result.stderr == "", result.output
    return [word for word in result.stdout.splitlines() if word]  # nothing to offer: one empty line


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory without a cdc.toml, and no CDC_* setting from the caller."""
    for name in [n for n in os.environ if n.startswith("CDC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def record(root: Path, *names: str) -> None:
    """Schema history for db.table names, as tail and snapshot record it."""
    history = SchemaHistory(StateDir(root).ensure().schema)
    for name in names:
        db, table = name.split(".")
        history.record(TableSchema(db, table, (Column("id", "int(11)", "int"),), ("id",), "mariadb-bin.000001:4"))


@pytest.mark.parametrize(("line", "expected"), [
    ("cdc ship --to ", ["kinesis", "s3"]),
    ("cdc ship --to k", ["kinesis"]),
    ("cdc check-binlog --ssl-mode ", ALL_MODES),
    ("cdc tail --ssl-mode VERIFY", ["VERIFY_CA", "VERIFY_IDENTITY"]),
    ("cdc init --ssl-mode ", ALL_MODES),
    ("cdc init --ssl-mode ve", ["verify_ca", "verify_identity"]),  # typed in lower case: offered in lower case
    ("cdc snapshot --lock ", ["auto", "mariadb", "global", "tables", "none"]),
    ("cdc wait --stage ", ["tail", "ship-s3", "ship-kinesis", "spark-merge", "snowflake-apply"]),
    ("cdc wait --stage s", ["ship-s3", "ship-kinesis", "spark-merge", "snowflake-apply"]),
])
def test_fixed_option_values(here: Path, line: str, expected: list[str]) -> None:
    assert complete(line) == expected


def test_table_names_come_from_the_state_directory(here: Path) -> None:
    record(here / "state", "shop.orders", "shop.customers", "hr.staff")
    assert complete("cdc tail --state-dir state --tables ") == ["hr.*", "shop.*", "hr.staff", "shop.customers",
                                                                 "shop.orders"]
    assert complete("cdc snapshot --state-dir state --exclude-tables shop.c") == ["shop.customers"]
    assert complete("cdc verify --state-dir state --tables sh") == ["shop.*", "shop.customers", "shop.orders"]
    assert complete("cdc init --state-dir state --exclude-tables hr.") == ["hr.*", "hr.staff"]
    # A comma-separated list completes its last item and does not offer what it already holds.
    assert complete("cdc tail --state-dir state --tables shop.orders,shop.") == [
        "shop.orders,shop.*", "shop.orders,shop.customers"]


def test_table_names_follow_cdc_toml_and_the_default_state_directory(here: Path) -> None:
    record(here / ".cdc", "shop.orders")
    assert complete("cdc snapshot --tables ") == ["shop.*", "shop.orders"]
    record(here / "elsewhere", "hr.staff")
    (here / "cdc.toml").write_text('state_dir = "elsewhere"\n')
    assert complete("cdc snapshot --tables ") == ["hr.*", "hr.staff"]
    assert complete("cdc snapshot --config cdc.toml --tables ") == ["hr.*", "hr.staff"]


def test_table_completion_fails_silent(here: Path) -> None:
    assert complete("cdc tail --state-dir nowhere --tables ") == []
    record(here / "state", "shop.orders")
    (StateDir(here / "state").schema / "shop.broken.json").write_text("{not json")
    assert complete("cdc tail --state-dir state --tables ") == []  # no traceback into the shell either
    (here / "cdc.toml").write_text("this is not toml [\n")
    assert complete("cdc tail --tables ") == []


def test_the_installed_cdc_completes_in_a_shell_protocol_subprocess(tmp_path: Path) -> None:
    """The console script itself, as bash calls it after `cdc --install-completion`."""
    cdc = Path(sys.executable).with_name("cdc")
    env = {**os.environ, "_CDC_COMPLETE": "complete_bash", "COMP_WORDS": "cdc ship --to ", "COMP_CWORD": "3"}
    done = subprocess.run([str(cdc)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.splitlines(), done.stderr) == (0, ["kinesis", "s3"], "")


def test_completion_can_be_installed_and_shown() -> None:
    result = CliRunner().invoke(app, ["--help"], prog_name="cdc", env={"COLUMNS": "200"})
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout
