"""The Snowflake stand-in for tests: one fakesnow server per session, a fresh database per test.

Registered for the whole suite by tests/conftest.py (pytest_plugins).

fakesnow runs Snowflake SQL on DuckDB behind the real connector's HTTP protocol, so the code
under test (and `cdc` run as a subprocess) connects exactly as it would to Snowflake, through
SNOWFLAKE_* variables.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.config import SnowflakeSettings
from cdc.snowflake.connect import connect

_databases = itertools.count()


@pytest.fixture(scope="session")
def fakesnow_server() -> Iterator[dict[str, Any]]:
    try:
        import fakesnow
        import uvicorn  # noqa: F401  fakesnow[server]
    except ImportError as exc:  # fail, never skip: the test rig is part of the project
        pytest.fail(f"fakesnow server mode needs {exc.name}: pip install 'fakesnow[server]==0.12.1'")
    faithful_not_null()
    try:
        with fakesnow.server() as params:
            yield params
    finally:
        from fakesnow.transforms import stage

        # fakesnow stages PUT files in a /tmp folder it makes at import and never removes: staged rows.
        shutil.rmtree(stage.LOCAL_BUCKET_PATH, ignore_errors=True)


def faithful_not_null() -> None:
    """Make the stand-in answer a NOT NULL violation as Snowflake does (idempotent; this process's fakesnow only).

    Snowflake refuses it as a SQL error: ProgrammingError 100072 (22000) "NULL result in a non-nullable column",
    in an HTTP 200 answer. fakesnow lets DuckDB's ConstraintException through, which its server answers with
    HTTP 500, its code for "a bug or an unsupported feature". cdc takes a 500 for what it means on Snowflake, the
    service failing (transient, retried), so without this a refused MERGE would look like an outage here.
    """
    import duckdb
    import snowflake.connector
    from fakesnow.cursor import FakeSnowflakeCursor

    if getattr(FakeSnowflakeCursor._execute, "faithful_not_null", False):
        return
    original = FakeSnowflakeCursor._execute

    def _execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except duckdb.ConstraintException as exc:
            if "NOT NULL constraint failed" not in str(exc):
                raise
            raise snowflake.connector.errors.ProgrammingError(msg="NULL result in a non-nullable column",
                                                              errno=100072, sqlstate="22000") from exc

    _execute.faithful_not_null = True  # type: ignore[attr-defined]
    FakeSnowflakeCursor._execute = _execute  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def snowflake_home(fakesnow_server: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A connections.toml with a [fake] connection, as the Snowflake CLI would keep it.

    network_timeout = 1: fakesnow answers an unsupported statement with HTTP 500, which the
    connector would otherwise retry for minutes.
    """
    home = tmp_path_factory.mktemp("snowflake-home")
    (home / "connections.toml").write_text(
        '[fake]\naccount = "fakesnow"\nuser = "fake"\npassword = "snow"\n'
        f'host = "{fakesnow_server["host"]}"\nport = {fakesnow_server["port"]}\nprotocol = "http"\n'
        "network_timeout = 1\n", encoding="utf-8")
    return home


@pytest.fixture
def snowflake_env(snowflake_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Connection [fake] of SNOWFLAKE_HOME/connections.toml, with a database and schema of this test's own."""
    database = f"CDC_TEST_{os.getpid()}_{next(_databases)}"
    env = {"SNOWFLAKE_HOME": str(snowflake_home), "SNOWFLAKE_DEFAULT_CONNECTION_NAME": "fake",
           "SNOWFLAKE_DATABASE": database, "SNOWFLAKE_SCHEMA": "REPLICA"}
    for name in [n for n in os.environ if n.startswith(("SNOWFLAKE_", "CDC_SNOWFLAKE_"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    conn = connect(SnowflakeSettings(), env | {"SNOWFLAKE_SCHEMA": ""})
    conn.cursor().execute(f'CREATE DATABASE IF NOT EXISTS "{database}"')
    conn.cursor().execute(f'CREATE SCHEMA IF NOT EXISTS "{database}"."REPLICA"')
    conn.close()
    return env


@pytest.fixture
def sf(snowflake_env: dict[str, str]) -> Iterator[Any]:
    """A connection to the test's database and schema (qmark bind parameters, autocommit)."""
    conn = connect(SnowflakeSettings(), snowflake_env)
    try:
        yield conn
    finally:
        conn.close()


def rows(conn: Any, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    cursor = conn.cursor()
    cursor.execute(statement, params)
    return list(cursor.fetchall())
