"""The binlog tail needed was purged: tail stops with exit 5 and the position; `cdc resnapshot --all` restarts tail
at the binlog end and reads every captured table again online, while `cdc tail --follow` captures new changes.
The lake and Snowflake then equal SELECT * (rows deleted during the gap deleted too) and `cdc verify` is OK (#27).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from cdc.errors import ExitCode
from cdc.snowflake.names import column_names, table_names
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import cdc_run, write_config
from tests.snowflake.stand_in import rows

DB = "shop"
TABLES = ("orders", "items")


def snowflake_rows(sf: Any, table: str) -> list[tuple[Any, ...]]:
    name = table_names([(DB, table)])[(DB, table)]
    names = column_names(name, ["id", "note"])
    return rows(sf, f'SELECT "{names["id"]}", "{names["note"]}" FROM "{name}" ORDER BY "{names["id"]}"')


def source_rows(server: Any, table: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in server.execute(f"SELECT id, note FROM {DB}.{table} ORDER BY id")]


def write(server: Any, table: str, seed: int) -> None:
    """Updates, deletes and inserts: a slice of each."""
    server.execute(f"UPDATE {DB}.{table} SET note = CONCAT('u{seed} ', id) WHERE id % 7 = {seed % 7}")
    server.execute(f"DELETE FROM {DB}.{table} WHERE id % 11 = {seed % 11}")
    for key in range(1000 * seed, 1000 * seed + 15):
        server.execute(f"INSERT INTO {DB}.{table} VALUES (%s, %s)", (key, f"new {seed} {key}"))


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
    needed = json.loads((tmp_path / "state" / "tail.json").read_text())
    stopped = subprocess.run(cdc_argv(config, "tail", "--until-now"), cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    assert stopped.returncode == ExitCode.POSITION, stopped.stderr
    assert f"{needed['file']}:{needed['pos']}" in stopped.stderr and "purged" in stopped.stderr, stopped.stderr

    recover = subprocess.Popen(cdc_argv(config, "resnapshot", "--all", "--chunk-size", "25", "--json"), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tail = None
    try:
        deadline = time.monotonic() + 120
        while json.loads((tmp_path / "state" / "tail.json").read_text())["file"] == needed["file"]:
            assert recover.poll() is None and time.monotonic() < deadline, recover.communicate()
            time.sleep(0.1)
        tail = subprocess.Popen(cdc_argv(config, "tail", "--follow"), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        for seed, table in enumerate(TABLES, start=5):  # capture of new changes goes on meanwhile
            write(server, table, seed)
        out, err = recover.communicate(timeout=300)
        assert recover.returncode == 0, out + err
        summary = json.loads(out)
        assert summary["purge_gap"]["purged_at"] == f"{needed['file']}:{needed['pos']}", summary
        assert sorted(summary["tables"]) == [f"{DB}.{t}" for t in sorted(TABLES)], summary
    finally:
        recover.kill()
        if tail is not None:
            tail.send_signal(signal.SIGTERM)
            assert tail.wait(60) == 0, tail.stderr.read() if tail.stderr else ""
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    for table in TABLES:
        assert snowflake_rows(sf, table) == source_rows(server, table), table
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
