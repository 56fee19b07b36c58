"""Hostile identifiers end to end: a database and tables whose names are mixed case, reserved words, with
spaces, quotes, dots and non-ASCII, through snapshot, tail, ship to S3, spark-merge, snowflake-bootstrap
and -apply (one `cdc run`), checked by `cdc verify` and by reading Snowflake directly.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cdc.snowflake.names import column_names, table_names
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import cdc_run, write_config
from tests.snowflake.stand_in import rows

DB = "Shop Ü-1"
# No single quote in a name here: fakesnow builds SQL of its own around table and column names and breaks on
# one (Snowflake itself takes it; the quoting of our generated SQL is pinned by tests/snowflake/test_sql.py).
TABLES = ["Order Details", "select", 'wé"ird%name', "dot.ted"]
COLUMNS = ["Mixed Case", "from", 'say "quoted"', "dot.col", "ünï code"]
ADDED = 'ädded "col".x'  # by an ALTER between the two runs
RENAMED = 'rén "sel".x `y`'  # RENAME TABLE targets in the third run
MOVED = "Ördér Détails"


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@pytest.fixture
def hostile(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,  # noqa: F811
            snowflake_env: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {q(DB)} CHARACTER SET utf8mb4")
    for number, table in enumerate(TABLES):
        server.execute(f"CREATE TABLE {q(DB)}.{q(table)} ({q(COLUMNS[0])} INT PRIMARY KEY, {q(COLUMNS[1])} "
                       f"VARCHAR(40), {q(COLUMNS[2])} TEXT, {q(COLUMNS[3])} DECIMAL(10,3), {q(COLUMNS[4])} DATE)")
        for key in range(1, 6):
            # (a % in a name is doubled: pymysql formats the statement text when it binds parameters)
            server.execute(f"INSERT INTO {q(DB)}.{q(table).replace('%', '%%')} VALUES (%s, %s, %s, %s, %s)",
                           (key, f"O'Brien {number}", 'say "hi" \\ 🎉', f"{key}.125", f"2026-0{key}-0{key}"))
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    return {"server": server, "config": config}


def _snowflake_rows(sf: Any, table: str) -> list[tuple[Any, ...]]:  # noqa: F811
    name = table_names([(DB, table)])[(DB, table)]
    names = column_names(name, COLUMNS)
    columns = ", ".join('"' + names[c].replace('"', '""') + '"' for c in COLUMNS)
    key = '"' + names[COLUMNS[0]].replace('"', '""') + '"'
    return rows(sf, f'SELECT {columns} FROM "{name.replace(chr(34), chr(34) * 2)}" ORDER BY {key}')


def test_hostile_names_replicate_and_verify(hostile: dict[str, Any], sf: Any) -> None:  # noqa: F811
    server, config = hostile["server"], hostile["config"]
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    server.execute(f"UPDATE {q(DB)}.{q('select')} SET {q('from')} = 'None', {q('Mixed Case')} = 99 "
                   f"WHERE {q('Mixed Case')} = 2")
    server.execute(f"DELETE FROM {q(DB)}.{q('dot.ted')} WHERE {q('Mixed Case')} = 3")
    # A hostile column added with a hostile DEFAULT: older rows get it in the lake and Snowflake (verify below).
    server.execute(f"ALTER TABLE {q(DB)}.{q('Order Details')} ADD COLUMN {q(ADDED)} VARCHAR(30) NOT NULL "
                   f"DEFAULT 'O''Brien \\\\ \"x\" 🎉' AFTER {q(COLUMNS[0])}")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    assert {r[0] for r in server.execute(f"SELECT {q(ADDED)} FROM {q(DB)}.{q('Order Details')}")} == {
        'O\'Brien \\ "x" 🎉'}

    _check(server, config, sf, TABLES)

    # Hostile names through RENAME TABLE (issue #30): a name renamed away and taken again in one statement, and
    # ALTER ... RENAME TO with another clause; rows under the old names before and under the new ones after.
    server.execute(f"UPDATE {q(DB)}.{q('select')} SET {q('from')} = 'before' WHERE {q('Mixed Case')} = 1")
    server.execute(f"RENAME TABLE {q(DB)}.{q('select')} TO {q(DB)}.{q(RENAMED)}, "
                   f"{q(DB)}.{q('dot.ted')} TO {q(DB)}.{q('select')}")
    server.execute(f"ALTER TABLE {q(DB)}.{q('Order Details')} ADD INDEX ({q('from')}), RENAME TO {q(DB)}.{q(MOVED)}")
    server.execute(f"UPDATE {q(DB)}.{q(RENAMED)} SET {q('from')} = 'after' WHERE {q('Mixed Case')} = 4")
    server.execute(f"DELETE FROM {q(DB)}.{q('select')} WHERE {q('Mixed Case')} = 5")
    server.execute(f"UPDATE {q(DB)}.{q(MOVED)} SET {q('from')} = 'moved' WHERE {q('Mixed Case')} = 1")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    renamed = [MOVED, "select", 'wé"ird%name', RENAMED]
    _check(server, config, sf, renamed)
    names = {r[0] for r in rows(sf, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = "
                                    "CURRENT_SCHEMA()")}
    gone = {table_names([(DB, t)])[(DB, t)] for t in ("Order Details", "dot.ted")}
    assert not names & gone and {table_names([(DB, t)])[(DB, t)] for t in renamed} <= names


def _check(server: Any, config: Path, sf: Any, tables: list[str]) -> None:  # noqa: F811
    for table in tables:
        source = server.execute(f"SELECT {', '.join(q(c) for c in COLUMNS)} FROM {q(DB)}.{q(table)} "
                                f"ORDER BY {q(COLUMNS[0])}")
        assert _snowflake_rows(sf, table) == source, table
    done = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report, "verify printed an empty report"
    assert sorted(t["table"] for t in report["tables"] if t["target"] == "snowflake") == sorted(
        f"{DB}.{t}" for t in tables)
