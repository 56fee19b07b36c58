"""A column's type changed by MODIFY/CHANGE: MySQL converts every stored value with no row event.

spark-merge and snowflake-apply convert the older values with a cast where the cast does what MySQL did (a
DECIMAL's scale, wider integers, ENUM members added, a VARCHAR cut, MariaDB's fraction cut: test_ddl_effects.py,
test_ddl_tables.py). The conversions no cast reproduces flag the table for a re-snapshot, and `cdc run` repairs
it by itself: a DECIMAL made an INT (MySQL rounds half away from zero), a CHAR shortened or a text made a number
or a column made NOT NULL or a SET's member dropped in a non-strict session, a TIME's fraction cut.

A key column's type change (an INT id made a BIGINT, as when the ids run out) is converted too: Snowflake's
declared primary key is dropped around the conversion and declared again (the column it holds cannot be dropped).

Real MariaDB -> `cdc run --until-now` -> the MODIFYs, with row changes around them -> `cdc run --until-now`
again: the lake and Snowflake equal SELECT * of every table; the tables whose conversions a cast reproduces are
not re-read; `cdc status` flags nothing and `cdc verify` says OK.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cdc.spark import read_lake_table
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import cdc_run, write_config
from tests.snowflake.stand_in import rows

DB = "retypes"
# table -> (its column, CREATE's column type, rows (id, value), the MODIFY, whether it runs in a non-strict session)
CASES: dict[str, tuple[str, str, list[tuple[int, Any]], str, bool]] = {
    "money": ("price", "DECIMAL(10,2)", [(1, "2.50"), (2, "-2.50"), (3, "1.49")], "MODIFY price INT", False),
    "codes": ("code", "CHAR(10)", [(1, "abcdef"), (2, "xy")], "MODIFY code CHAR(3)", True),
    "counts": ("qty", "VARCHAR(10)", [(1, "12abc"), (2, "7")], "MODIFY qty INT", True),
    "notes": ("note", "VARCHAR(20)", [(1, None), (2, "x")], "MODIFY note VARCHAR(20) NOT NULL", True),
    "times": ("t", "TIME(6)", [(1, "10:00:00.700000"), (2, "-01:02:03.999999")], "MODIFY t TIME(0)", False),
    "tags": ("tags", "SET('a','b','c')", [(1, "a,c"), (2, "b")], "MODIFY tags SET('b','a')", True),
    # Conversions the casts reproduce: no re-snapshot.
    "wide": ("amount", "DECIMAL(8,2)", [(1, "1.25"), (2, "-3.75")], "MODIFY amount DECIMAL(12,4)", False),
    "strict": ("code", "CHAR(10)", [(1, "abc"), (2, "de")], "MODIFY code CHAR(5)", False),  # refused if one were longer
    # The key column made wider, as when an INT id runs out: Snowflake's declared key is dropped and declared again.
    "ids": ("n", "INT", [(1, 5), (2, 6)], "MODIFY id BIGINT UNSIGNED NOT NULL, MODIFY n BIGINT", False),
}
FLAGGED = sorted(set(CASES) - {"wide", "strict", "ids"})


@pytest.fixture
def source(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,  # noqa: F811
           snowflake_env: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {DB}")
    for table, (column, kind, values, _, _) in CASES.items():
        server.execute(f"CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, `{column}` {kind} NULL)", database=DB)
        for key, value in values:
            server.execute(f"INSERT INTO {table} VALUES (%s, %s)", (key, value), database=DB)
    server.execute("CREATE DATABASE cdc")  # the default watermark table, cdc.watermarks
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    return {"server": server, "config": config, "state": tmp_path / "state"}


def _text(value: Any) -> Any:
    """One spelling for a value as MySQL, the lake and Snowflake return it."""
    if isinstance(value, datetime.timedelta):  # MySQL's TIME
        sign, seconds = ("-", -value) if value < datetime.timedelta(0) else ("", value)
        whole = int(seconds.total_seconds())
        return f"{sign}{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}" + \
            (f".{seconds.microseconds:06d}".rstrip("0") if seconds.microseconds else "")
    if isinstance(value, str) and value.startswith("["):  # Snowflake's ARRAY, as JSON text
        value = json.loads(value)
    if isinstance(value, (list, tuple)):  # a SET's members (the targets keep it as an array)
        return ",".join(sorted(value))
    if isinstance(value, str) and "," in value and re.fullmatch(r"[a-z,]+", value):  # MySQL's SET
        return ",".join(sorted(value.split(",")))
    if isinstance(value, str) and re.fullmatch(r"-?\d+:\d\d:\d\d\.\d+", value):  # a TIME as text
        return value.rstrip("0").rstrip(".")
    if isinstance(value, datetime.time):
        return value.isoformat().rstrip("0").rstrip(".")
    if isinstance(value, (decimal.Decimal, float)):
        return str(decimal.Decimal(str(value)).normalize())
    return None if value is None else str(value)


def _source(server: Any, table: str) -> list[tuple[Any, Any]]:
    column = CASES[table][0]
    return sorted((key, _text(value)) for key, value in server.execute(f"SELECT id, `{column}` FROM {table}",
                                                                        database=DB))


def _lake(state: Path, table: str) -> list[tuple[Any, Any]]:
    lake = read_lake_table(state / "lake", DB, table)
    assert lake is not None, table
    return sorted((row["id"], _text(row[CASES[table][0]])) for row in lake.rows)


def _snowflake(sf: Any, table: str) -> list[tuple[Any, Any]]:
    return sorted((key, _text(value)) for key, value in rows(sf, f'SELECT "ID", "{CASES[table][0].upper()}" '
                                                                 f'FROM "{table.upper()}"'))


def test_conversions_no_cast_reproduces_are_repaired_by_cdc_run(source: dict[str, Any], sf: Any) -> None:  # noqa: F811
    server, config, state = source["server"], source["config"], source["state"]
    boot = subprocess.run(cdc_argv(config, "snowflake-bootstrap", "--from-mysql", "--history"), cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # SCD2 tables too: their columns follow
    assert boot.returncode == 0, boot.stdout + boot.stderr
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    for table in CASES:
        assert _lake(state, table) == _source(server, table), table

    for table, (_, _, _, modify, loose) in CASES.items():
        with server.connect() as conn, conn.cursor() as cursor:
            if loose:  # an application's session without strict mode: MySQL cuts and coerces instead of failing
                cursor.execute("SET SESSION sql_mode = ''")
            cursor.execute(f"UPDATE `{DB}`.{table} SET id = id + 10 WHERE id = 2")  # a row change before
            cursor.execute(f"ALTER TABLE `{DB}`.{table} {modify}")
            cursor.execute(f"INSERT INTO `{DB}`.{table} (id) VALUES (30)" if table != "notes" else
                           f"INSERT INTO `{DB}`.{table} VALUES (30, 'after')")
            if table == "ids":  # an id only the wider type holds
                cursor.execute(f"INSERT INTO `{DB}`.{table} VALUES (18446744073709551615, 7)")
            conn.commit()
    expected = {table: _source(server, table) for table in CASES}
    assert expected["money"][:2] == [(1, "3"), (3, "1")] and expected["notes"][0] == (1, "")  # what MySQL did

    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    wrong = {(where, table): (found, expected[table]) for table in CASES
             for where, found in (("lake", _lake(state, table)), ("snowflake", _snowflake(sf, table)))
             if found != expected[table]}
    assert wrong == {}
    assert [str(r[4]) for r in rows(sf, 'SHOW PRIMARY KEYS IN TABLE "IDS"')] == ["ID"]  # declared again
    # SCD2: the current versions equal the table; the key column took the wider type in every version.
    for table in CASES:
        current = sorted((k, _text(v)) for k, v in rows(sf, f'SELECT "ID", "{CASES[table][0].upper()}" FROM '
                                                            f'"{table.upper()}_HISTORY" WHERE "_CDC_IS_CURRENT"'))
        assert current == expected[table], table
    assert sorted(str(r[4]) for r in rows(sf, 'SHOW PRIMARY KEYS IN TABLE "IDS_HISTORY"')) == ["ID", "_CDC_POSITION"]
    status = json.loads(subprocess.run(cdc_argv(config, "status", "--offline", "--json"), cwd=ROOT,
                                       capture_output=True, text=True, timeout=120).stdout)
    assert status["needs_resnapshot"] == [] and status["resnapshot"]["status"] == "done", status
    reread = sorted(t["table"].split(".")[-1] for t in status["resnapshot"]["tables"])
    assert reread == FLAGGED, status["resnapshot"]
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
