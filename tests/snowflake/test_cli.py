"""The commands as a user runs them: subprocesses against fakesnow's server and the rig's MariaDB."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.rig import MariaDB
from tests.sinks.test_ship_cli import _wait_for
from tests.snowflake.batches import position, record_schema, row, value, write_batch
from tests.snowflake.stand_in import rows

ROOT = Path(__file__).resolve().parents[2]


def cdc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cdc", *args], cwd=ROOT, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=120)


def test_kill_9_during_apply_never_doubles_or_skips(sf: Any, tmp_path: Path) -> None:
    state = str(tmp_path)
    record_schema(tmp_path, "shop", "items")
    assert cdc("snowflake-bootstrap", "--state-dir", state, "--history").returncode == 0
    batches = 8
    for b in range(1, batches + 1):  # every batch updates keys 1..4 and inserts key 10+b
        write_batch(tmp_path, b, {"shop.items": [row(k, b * 10 + k, "u", **value(b * 10 + k)) for k in range(1, 5)]
                                  + [row(10 + b, b * 10 + 5, "c", **value(b))]})
    kills = 0
    for delay in (1.0, 1.6, 2.2, 2.8, 3.4, 4.0):
        process = subprocess.Popen([sys.executable, "-m", "cdc", "snowflake-apply", "--state-dir", state],
                                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
        process.wait()
    final = cdc("snowflake-apply", "--state-dir", state, "--json")
    assert final.returncode == 0, final.stderr
    assert kills >= 1
    applied = rows(sf, 'SELECT "BATCH_ID" FROM "_CDC_APPLIED_BATCHES" ORDER BY 1')
    assert applied == [(f"b{b:012d}",) for b in range(1, batches + 1)]
    got = rows(sf, 'SELECT "ID", "NAME", "_CDC_POSITION" FROM "ITEMS" ORDER BY "ID"')
    assert got == [(k, value(batches * 10 + k)["name"], position(batches * 10 + k)) for k in range(1, 5)] + [
        (10 + b, value(b)["name"], position(b * 10 + 5)) for b in range(1, batches + 1)]
    # History: one version per key per batch, none doubled by a replay.
    versions = rows(sf, 'SELECT "ID", COUNT(*), COUNT(DISTINCT "_CDC_POSITION") FROM "ITEMS_HISTORY" GROUP BY 1 '
                    "ORDER BY 1")
    assert versions == [(k, batches, batches) for k in range(1, 5)] + [(10 + b, 1, 1) for b in range(1, batches + 1)]


def test_bootstrap_from_mysql_adds_new_columns(sf: Any, mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.orders (id INT PRIMARY KEY, `Total Due` DECIMAL(12,2), "
                    "placed DATETIME(6), doc JSON)")
    env = dict(os.environ) | {"CDC_MYSQL_HOST": mariadb.host, "CDC_MYSQL_PORT": str(mariadb.port),
                              "CDC_MYSQL_USER": "root", "HOME": str(tmp_path)}
    args = ("snowflake-bootstrap", "--from-mysql", "--table", f"{fresh_db}.orders", "--state-dir", str(tmp_path))
    dry = cdc(*args, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("-- internal stage for Parquet batches\nCREATE STAGE IF NOT EXISTS")  # plain
    assert 'CREATE TABLE IF NOT EXISTS "ORDERS"' in dry.stdout
    assert rows(sf, "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_NAME = 'ORDERS'") == [(0,)]
    first = cdc(*args, "--json", env=env)
    assert json.loads(first.stdout)["created"] == ["ORDERS"], first.stderr
    again = json.loads(cdc(*args, "--json", env=env).stdout)
    assert (again["created"], again["added_columns"]) == ([], [])
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.orders ADD COLUMN note VARCHAR(20), ADD COLUMN qty BIGINT UNSIGNED")
    grown = json.loads(cdc(*args, "--json", env=env).stdout)
    assert (grown["created"], grown["added_columns"]) == ([], ["ORDERS.NOTE", "ORDERS.QTY"])
    assert 'ALTER TABLE "ORDERS" ADD COLUMN "QTY" NUMBER(20,0)' in grown["statements"]
    columns = rows(sf, "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'ORDERS' "
                   "ORDER BY ORDINAL_POSITION")
    assert [c[0] for c in columns] == ["ID", "Total Due", "PLACED", "DOC", "_CDC_POSITION", "_CDC_COMMIT_TS",
                                       "_CDC_OP", "NOTE", "QTY"]


def test_a_refused_statement_exits_1_with_the_statement_not_a_traceback(sf: Any, tmp_path: Path) -> None:
    """fakesnow cannot run CREATE PIPE (the S3 path): the error names the statement and Snowflake's codes."""
    record_schema(tmp_path, "shop", "items")
    result = cdc("snowflake-bootstrap", "--state-dir", str(tmp_path), "--s3", "s3://bucket/cdc", "--warehouse", "WH",
                 "--role-arn", "arn:aws:iam::123456789012:role/sf")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "Snowflake refused `CREATE" in result.stderr and "sqlstate" in result.stderr and "fix:" in result.stderr


def test_follow_applies_new_batches_and_stops_cleanly_on_sigterm(sf: Any, tmp_path: Path) -> None:
    state = str(tmp_path)
    record_schema(tmp_path, "shop", "items")
    assert cdc("snowflake-bootstrap", "--state-dir", state).returncode == 0
    write_batch(tmp_path, 1, {"shop.items": [row(1, 1, "c", **value(1))]})
    process = subprocess.Popen([sys.executable, "-m", "cdc", "snowflake-apply", "--state-dir", state, "--follow",
                                "--poll-interval", "0.2", "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (tmp_path / "snowflake-apply.json").exists())
        write_batch(tmp_path, 2, {"shop.items": [row(2, 2, "c", **value(2))]})  # sealed while it polls
        _wait_for(lambda: json.loads((tmp_path / "snowflake-apply.json").read_text())["last_batch"] == "b000000000002")
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    summary = json.loads(out)
    assert summary["applied"] == ["b000000000001", "b000000000002"]
    assert summary["tables"] == {"shop.items": {"inserted": 2, "updated": 0, "deleted": 0}}
    assert rows(sf, 'SELECT "ID", "NAME" FROM "ITEMS" ORDER BY "ID"') == [(1, value(1)["name"]), (2, value(2)["name"])]



def test_load_sessions_out_of_range_is_refused_before_any_login(tmp_path: Path) -> None:
    result = cdc("snowflake-apply", "--state-dir", str(tmp_path), "--load-sessions", "0")
    assert result.returncode == 3, result.stderr  # a configuration error
    assert "snowflake.load_sessions = 0 (from flag --load-sessions) is outside 1..16" in result.stderr
