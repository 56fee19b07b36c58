"""The binlog tail needed was purged: tail stops with exit 5 and the position; `cdc resnapshot --all` restarts tail
at the binlog end and reads every captured table again online, while `cdc tail --follow` captures new changes.
The lake and Snowflake then equal SELECT * (rows deleted during the gap deleted too) and `cdc verify` is OK (#27).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc.errors import ExitCode
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.multiset_rig import snowflake_rows, source_rows
from tests.pipeline.run_rig import cdc_run, write_config

DB = "shop"
TABLES = ("orders", "items")


def write(server: Any, table: str, seed: int) -> None:
    """Updates, deletes and inserts: a slice of each."""
    server.execute(f"UPDATE {DB}.{table} SET note = CONCAT('u{seed} ', id) WHERE id % 7 = {seed % 7}")
    server.execute(f"DELETE FROM {DB}.{table} WHERE id % 11 = {seed % 11}")
    for key in range(1000 * seed, 1000 * seed + 15):
        server.execute(f"INSERT INTO {DB}.{table} VALUES (%s, %s)", (key, f"new {seed} {key}"))


def _recover(config: Path, state: Path, meanwhile: Callable[[], object]) -> dict[str, Any]:
    """tail refused at the purge (exit 5, the position named); `cdc resnapshot --all` moves tail's checkpoint and
    reads every captured table again while `cdc tail --follow` runs and `meanwhile` writes; its JSON summary."""
    needed = json.loads((state / "tail.json").read_text())
    stopped = subprocess.run(cdc_argv(config, "tail", "--until-now"), cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    assert stopped.returncode == ExitCode.POSITION, stopped.stderr
    assert f"{needed['file']}:{needed['pos']}" in stopped.stderr and "purged" in stopped.stderr, stopped.stderr

    recover = subprocess.Popen(cdc_argv(config, "resnapshot", "--all", "--chunk-size", "25", "--json"), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tail = None
    try:
        deadline = time.monotonic() + 120
        while json.loads((state / "tail.json").read_text())["file"] == needed["file"]:
            assert recover.poll() is None and time.monotonic() < deadline, recover.communicate()
            time.sleep(0.1)
        tail = subprocess.Popen(cdc_argv(config, "tail", "--follow"), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        meanwhile()  # capture of new changes goes on meanwhile
        out, err = recover.communicate(timeout=300)
        assert recover.returncode == 0, out + err
        summary: dict[str, Any] = json.loads(out)
        assert summary["purge_gap"]["purged_at"] == f"{needed['file']}:{needed['pos']}", summary
        return summary
    finally:
        recover.kill()
        if tail is not None:
            tail.send_signal(signal.SIGTERM)
            assert tail.wait(60) == 0, tail.stderr.read() if tail.stderr else ""


def test_resnapshot_all_recovers_a_purged_binlog_online(tmp_path: Path, mariadb_factory: Any,
                                                        aws_env: dict[str, str], bucket: str,
                                                        snowflake_env: dict[str, str], sf: Any) -> None:
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {DB}")
    for table in TABLES:
        server.execute(f"CREATE TABLE {DB}.{table} (id INT PRIMARY KEY, note VARCHAR(60))")
        for key in range(1, 121):
            server.execute(f"INSERT INTO {DB}.{table} VALUES (%s, %s)", (key, f"{table} {key}"))
    server.execute("CREATE DATABASE cdc")
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    # tail stopped; the server goes on, rotates and purges the files tail needs; more writes, deletes among them.
    for seed, table in enumerate(TABLES, start=1):
        write(server, table, seed)
    server.execute("FLUSH BINARY LOGS")
    server.purge_binlogs_to(server.binlog_position()[0])
    for seed, table in enumerate(TABLES, start=3):
        write(server, table, seed)
    summary = _recover(config, tmp_path / "state", lambda: [write(server, t, seed) for seed, t in enumerate(TABLES, 5)])
    assert sorted(summary["tables"]) == [f"{DB}.{t}" for t in sorted(TABLES)], summary
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    for table in TABLES:
        schema, expected = source_rows(server, DB, table)
        assert snowflake_rows(sf, schema) == expected, table
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_ddl_and_a_new_table_during_the_purged_gap(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str],
                                                  bucket: str, snowflake_env: dict[str, str], sf: Any) -> None:
    """The schema changed while tail was down and the binlog holding the DDL was purged: a column added with a
    DEFAULT, a column renamed and widened, a column dropped, a table created with rows. The recovery reads every
    table in its shape of now; the lake, Snowflake and verify follow it."""
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {DB}")
    for table in TABLES:
        server.execute(f"CREATE TABLE {DB}.{table} (id INT PRIMARY KEY, note VARCHAR(60), gone INT)")
        for key in range(1, 61):
            server.execute(f"INSERT INTO {DB}.{table} VALUES (%s, %s, %s)", (key, f"{table} {key}", key))
    server.execute("CREATE DATABASE cdc")
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    server.execute(f"UPDATE {DB}.orders SET note = 'before the ALTER' WHERE id < 5")
    server.execute("FLUSH BINARY LOGS")
    server.execute(f"ALTER TABLE {DB}.orders ADD COLUMN qty INT NOT NULL DEFAULT 7, DROP COLUMN gone")
    server.execute(f"ALTER TABLE {DB}.items CHANGE note label VARCHAR(200)")
    server.execute(f"CREATE TABLE {DB}.fresh (id INT PRIMARY KEY, v VARCHAR(10))")
    server.execute(f"INSERT INTO {DB}.fresh VALUES (1, 'one'), (2, 'two')")
    server.execute(f"UPDATE {DB}.orders SET qty = id WHERE id % 3 = 0")
    server.execute(f"DELETE FROM {DB}.items WHERE id % 4 = 0")
    server.execute(f"INSERT INTO {DB}.items VALUES (500, '{'x' * 150}', 5)")
    server.execute("FLUSH BINARY LOGS")
    server.purge_binlogs_to(server.binlog_position()[0])

    def meanwhile() -> None:
        server.execute(f"INSERT INTO {DB}.orders VALUES (900, 'after', 9)")
        server.execute(f"UPDATE {DB}.items SET label = 'after' WHERE id = 1")
        server.execute(f"INSERT INTO {DB}.fresh VALUES (3, 'three')")

    summary = _recover(config, tmp_path / "state", meanwhile)
    assert sorted(summary["tables"]) == [f"{DB}.fresh", f"{DB}.items", f"{DB}.orders"], summary
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    for table in ("orders", "items", "fresh"):
        schema, expected = source_rows(server, DB, table)
        assert snowflake_rows(sf, schema) == expected, table
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    tables = {t["table"]: t["status"] for t in json.loads(verified.stdout)["tables"]}
    assert set(tables) >= {f"{DB}.fresh", f"{DB}.items", f"{DB}.orders"}, tables
