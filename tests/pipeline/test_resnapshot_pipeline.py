"""`cdc resnapshot` end to end, with hostile names: changes made with sql_log_bin = 0 reach the lake and Snowflake.

`cdc run --until-now` replicates a table whose database, table and column names are hostile; then rows are
updated, deleted and inserted with the binlog off for the session (tail cannot see them); `cdc resnapshot`
runs while `cdc tail --follow` runs; the next `cdc run --until-now` ships, merges and applies. Snowflake then
equals SELECT * of the source, row for row, and `cdc verify` says so for the lake and Snowflake.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cdc.snowflake.names import column_names, table_names
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import cdc_run, write_config
from tests.snowflake.stand_in import rows

DB = "Shop Ü-2"
TABLE = 'wé"ird%name'  # no single quote: fakesnow breaks on one (see test_hostile_names.py)
COLUMNS = ["Mixed Case", "from", 'say "quoted"', "dot.col"]


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _snowflake_rows(sf: Any) -> list[tuple[Any, ...]]:
    name = table_names([(DB, TABLE)])[(DB, TABLE)]
    names = column_names(name, COLUMNS)
    columns = ", ".join('"' + names[c].replace('"', '""') + '"' for c in COLUMNS)
    key = '"' + names[COLUMNS[0]].replace('"', '""') + '"'
    return rows(sf, f'SELECT {columns} FROM "{name.replace(chr(34), chr(34) * 2)}" ORDER BY {key}')


@pytest.fixture
def source(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,  # noqa: F811
           snowflake_env: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {q(DB)} CHARACTER SET utf8mb4")
    server.execute(f"CREATE TABLE {q(DB)}.{q(TABLE)} ({q(COLUMNS[0])} INT PRIMARY KEY, {q(COLUMNS[1])} "
                   f"VARCHAR(40), {q(COLUMNS[2])} TEXT, {q(COLUMNS[3])} DECIMAL(10,3))")
    for key in range(1, 41):
        server.execute(f"INSERT INTO {q(DB)}.{q(TABLE).replace('%', '%%')} VALUES (%s, %s, %s, %s)",
                       (key, f"O'Brien {key}", 'say "hi" \\ 🎉', f"{key}.125"))
    # The default watermark table (mysql.watermark_table = cdc.watermarks), outside the captured database.
    server.execute("CREATE DATABASE cdc")
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    return {"server": server, "config": config}


def test_resnapshot_repairs_silent_changes_in_the_lake_and_snowflake(source: dict[str, Any], sf: Any) -> None:  # noqa: F811
    server, config = source["server"], source["config"]
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    table = f"{q(DB)}.{q(TABLE)}"
    with server.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"UPDATE {table} SET {q('from')} = 'silent', {q('dot.col')} = -1.5 "
                       f"WHERE {q('Mixed Case')} % 3 = 0")
        cursor.execute(f"DELETE FROM {table} WHERE {q('Mixed Case')} % 5 = 0")
        cursor.execute(f"INSERT INTO {table} VALUES (1000, 'silent insert', NULL, 0)")
    select = f"SELECT {', '.join(q(c) for c in COLUMNS)} FROM {table} ORDER BY {q(COLUMNS[0])}"
    expected = server.execute(select)
    assert _snowflake_rows(sf) != expected  # the binlog never carried them

    tail = subprocess.Popen(cdc_argv(config, "tail", "--follow"), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        done = subprocess.run(cdc_argv(config, "resnapshot", f"{DB}.{TABLE}", "--chunk-size", "7", "--json"),
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["tables"] == {f"{DB}.{TABLE}": {"rows": len(expected), "chunks": 5}}
    finally:
        tail.send_signal(signal.SIGTERM)
        assert tail.wait(60) == 0, tail.stderr.read() if tail.stderr else ""
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    assert _snowflake_rows(sf) == server.execute(select)
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
