"""Rows a statement logged as SQL text changed without naming them (triggers, stored functions), and tables it only
read, end to end.

One session with binlog_format STATEMENT (pt-table-checksum's way, or an application's): an UPDATE whose AFTER
UPDATE trigger writes an audit table, an INSERT whose stored function writes a ledger, and pt-table-checksum's
REPLACE INTO percona.checksums ... SELECT ... FROM a captured table. Their rows are in no row event. tail must flag
the tables written, directly or through the trigger and the function, and not the table only read (a checksum run
would otherwise re-read every table it checks); `cdc run` then re-snapshots them and the lake and Snowflake equal
SELECT * of every table, and `cdc verify` says OK.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.multiset_rig import snowflake_rows, source_rows
from tests.pipeline.run_rig import cdc_run, write_config

DB = "shop"
TABLES = ("stock", "audit", "ledger", "plain", "src")
SETUP = [
    "CREATE TABLE stock (id INT PRIMARY KEY, qty INT NOT NULL)",
    "CREATE TABLE audit (id INT AUTO_INCREMENT PRIMARY KEY, stock_id INT, qty INT)",
    "CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, n INT)",
    "CREATE TABLE plain (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE src (id INT PRIMARY KEY, v VARCHAR(10))",
    "CREATE TRIGGER stock_audit AFTER UPDATE ON stock FOR EACH ROW "
    "INSERT INTO audit (stock_id, qty) VALUES (NEW.id, NEW.qty)",
    "CREATE FUNCTION bump(k INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
    "BEGIN INSERT INTO ledger (n) VALUES (k); RETURN k * 2; END",
    "INSERT INTO stock VALUES (1, 10), (2, 20)",
    "INSERT INTO src VALUES (1, 'a'), (2, 'b')",
]


def _status(config: Path) -> dict[str, Any]:
    done = subprocess.run(cdc_argv(config, "status", "--offline", "--json"), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_tables_a_text_statement_writes_through_triggers_and_functions_are_repaired(
        tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,
        snowflake_env: dict[str, str], sf: Any) -> None:  # noqa: F811
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {DB}")
    for statement in SETUP:
        server.execute(statement, database=DB)
    server.execute("CREATE DATABASE percona")  # pt-table-checksum's table, not captured
    server.execute("CREATE TABLE percona.checksums (db VARCHAR(64), tbl VARCHAR(64), cnt INT, PRIMARY KEY (db, tbl))")
    server.execute("CREATE DATABASE cdc")
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    with server.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION binlog_format = 'STATEMENT'")
        cursor.execute(f"USE `{DB}`")
        cursor.execute("UPDATE stock SET qty = qty - 1 WHERE id = 1")  # the trigger adds an audit row
        cursor.execute("INSERT INTO plain VALUES (10, bump(21))")  # the function adds a ledger row
        cursor.execute("REPLACE INTO percona.checksums (db, tbl, cnt) "
                       "SELECT 'shop', 'src', COUNT(*) FROM `shop`.`src` FORCE INDEX (`PRIMARY`) WHERE id > 0")
        conn.commit()
    server.execute("UPDATE src SET v = 'row' WHERE id = 2", database=DB)  # as row events

    tailed = subprocess.run(cdc_argv(config, "tail", "--until-now"), cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert tailed.returncode == 0, tailed.stderr
    flagged = {f["table"]: f["reason"] for f in _status(config)["needs_resnapshot"]}
    assert sorted(flagged) == [f"{DB}.audit", f"{DB}.ledger", f"{DB}.plain", f"{DB}.stock"], flagged
    assert "trigger or stored function" in flagged[f"{DB}.audit"] and "trigger" not in flagged[f"{DB}.stock"]

    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    assert _status(config)["needs_resnapshot"] == []
    for table in TABLES:
        schema, expected = source_rows(server, DB, table)
        assert snowflake_rows(sf, schema) == expected, table
    assert sum(expected.values()) == 2 and source_rows(server, DB, "audit")[1] and source_rows(server, DB, "ledger")[1]
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
