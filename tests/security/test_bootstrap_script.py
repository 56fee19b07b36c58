"""`snowflake-bootstrap --dry-run` prints a script README says can be run as is: no table or column name may
leave its quoted identifier, string literal or comment line, whatever characters MySQL let it have (#26)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from snowflake.connector.util_text import split_statements
from sqlglot import exp

from tests.rig import MariaDB
from tests.security.hostile import BACKSLASHED, COLUMNS, INJECT, TABLES, q

ROOT = Path(__file__).resolve().parents[2]
# Every statement the bootstrap writes starts with one of these.
HEADS = ("CREATE TABLE IF NOT EXISTS ", "CREATE STAGE IF NOT EXISTS ", "CREATE FILE FORMAT IF NOT EXISTS ",
         "CREATE STORAGE INTEGRATION IF NOT EXISTS ", "CREATE PIPE IF NOT EXISTS ", "CREATE STREAM IF NOT EXISTS ",
         "CREATE TASK IF NOT EXISTS ", "ALTER TASK ", "CREATE DYNAMIC TABLE IF NOT EXISTS ",
         "CREATE SCHEMA IF NOT EXISTS ", "USE SCHEMA ")


@pytest.fixture
def hostile_db(mariadb: MariaDB, fresh_db: str) -> list[str]:
    for table in TABLES:
        mariadb.execute(f"CREATE TABLE {q(fresh_db)}.{q(table)} ({q(COLUMNS[0])} INT PRIMARY KEY, "
                        f"{q(COLUMNS[1])} VARCHAR(10), {q(COLUMNS[2])} TEXT)")
    return [f"{fresh_db}.{table}" for table in TABLES]


def _bootstrap(mariadb: MariaDB, tables: list[str], home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"CDC_MYSQL_HOST": mariadb.host, "CDC_MYSQL_PORT": str(mariadb.port),
                              "CDC_MYSQL_USER": "root", "HOME": str(home)}
    argv = [sys.executable, "-m", "cdc", "snowflake-bootstrap", "--from-mysql", "--state-dir", str(home / "state"),
            "--dry-run", *extra]
    for table in tables:
        argv += ["--table", table]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=120)
    # Decoded by hand: text=True would turn a lone CR (in a name) into a newline.
    return subprocess.CompletedProcess(argv, done.returncode, done.stdout.decode(), done.stderr.decode())


def _statement_text(statement: str) -> str:
    """A statement without its `-- what` head line and its semicolon."""
    lines = statement.strip().split("\n")
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "\n".join(lines).strip().removesuffix(";").strip()


VARIANTS = {
    "tables": ("--history", "--soft-delete"),
    # (no --history with tasks: a task with a BEGIN ... END body is split apart by the connector's splitter
    # whatever its names, a limit of the dry-run script noted in SECURITY.md)
    "s3-task": ("--schema", "replica", "--soft-delete", "--s3", "s3://bucket/cdc", "--warehouse", "etl"),
    "s3-dynamic": ("--history", "--s3", "s3://bucket/cdc", "--warehouse", "etl", "--apply-mode", "dynamic-table"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_hostile_names_never_leave_their_quotes_in_the_script(variant: str, mariadb: MariaDB, hostile_db: list[str],
                                                              snowflake_env: dict[str, str], tmp_path: Path) -> None:
    script = _bootstrap(mariadb, hostile_db, tmp_path, *VARIANTS[variant])
    assert script.returncode == 0, script.stderr
    planned = _bootstrap(mariadb, hostile_db, tmp_path, *VARIANTS[variant], "--json")
    assert planned.returncode == 0, planned.stderr
    plan: dict[str, Any] = json.loads(planned.stdout)
    expected = [_statement_text(s) for s in plan["admin_statements"] + plan["statements"]]
    assert len(expected) > 2 * len(TABLES)

    # The connector's splitter (what `snowsql -f` / execute_stream run) finds exactly the planned statements.
    # (Not remove_comments=True: it also strips a `--` inside a pipe's unquoted stage path, SECURITY.md.)
    raw = [s for s, _ in split_statements(io.StringIO(script.stdout, newline=""))]
    split = [_statement_text(s) for s in raw]
    assert Counter(split) == Counter(expected)
    assert all(s.startswith(HEADS) for s in split), [s[:60] for s in split if not s.startswith(HEADS)]

    # sqlglot's Snowflake parser sees as many statements, none of them a DROP, and the comment lines are
    # one line each: a name in them has every control character spelled out.
    parsed = [e for e in sqlglot.parse(script.stdout, read="snowflake") if e is not None]
    assert len(parsed) == len(expected)
    assert not [e for e in parsed for _ in e.find_all(exp.Drop)]
    assert all(not (isinstance(e, exp.Command) and e.this.upper() == "DROP") for e in parsed)
    # Each statement has one comment line, its head; a name in it has every control character spelled out.
    heads = [statement.split("\n", 1)[0] for statement in raw]
    assert all(head.startswith("-- ") and not _statement_text(head) for head in heads), heads
    assert len(heads) == len(expected)
    for head in heads:
        assert "*/" not in head[2:] and "/*" not in head and head.isprintable(), head
    if variant != "s3-dynamic":
        assert '-- create table t\\x0aDROP TABLE "PEOPLE";\\x0a--' in heads
    # The names themselves are intact inside their quotes (the script creates the tables MySQL has).
    if variant == "tables":
        for table in TABLES:
            assert f'CREATE TABLE IF NOT EXISTS "{table.replace(chr(34), chr(34) * 2)}" (' in script.stdout


@pytest.mark.parametrize("name", BACKSLASHED)
def test_a_backslash_in_a_name_refuses_the_script_but_not_the_plan(name: str, mariadb: MariaDB, fresh_db: str,
                                                                   snowflake_env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE {q(fresh_db)}.{q(name)} (id INT PRIMARY KEY, {q(COLUMNS[1])} INT)")
    script = _bootstrap(mariadb, [f"{fresh_db}.{name}"], tmp_path)
    assert (script.returncode, script.stdout) == (4, "")
    shown = name.replace("\\", "\\\\").replace("'", "\\'")
    assert f"error: create table {name}: the Snowflake name '{shown}' holds a backslash" in " ".join(
        script.stderr.split()), script.stderr
    planned = _bootstrap(mariadb, [f"{fresh_db}.{name}"], tmp_path, "--json")
    assert planned.returncode == 0, planned.stderr
    assert f'CREATE TABLE IF NOT EXISTS "{name.replace(chr(34), chr(34) * 2)}" (' in json.loads(planned.stdout)[
        "statements"][2]
