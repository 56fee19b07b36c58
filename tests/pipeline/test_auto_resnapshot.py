"""`cdc run --follow` re-snapshots a table by itself after DDL the binlog cannot carry (issue #30).

Writes go on the whole time; meanwhile `ALTER TABLE ... ADD COLUMN created DATETIME DEFAULT CURRENT_TIMESTAMP`
(MySQL evaluates it at ALTER time: the older rows' value is in no binlog event) and then an AUTO_INCREMENT
primary key added in place of the old one (its values, assigned by the ALTER, are not in the binlog either).
With no manual step, the run starts the online re-snapshot itself while its cycles keep tailing: at the end the
lake and Snowflake equal SELECT * of the table row for row, `cdc verify` says OK, and `cdc status` flags nothing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cdc.spark import read_lake_table
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import Background, write_config
from tests.rig._process import wait_until
from tests.snowflake.stand_in import rows

DB = "auto_rs"
TABLE = "items"


class _Writes:
    """Inserts, updates, id changes and deletes of the table in a thread, until stopped (autocommit); inserted ids
    start after `first_key`, so that two writers of one test never collide. A write that fails fails the test."""

    def __init__(self, server: Any, first_key: int) -> None:
        self.server, self.stop, self.count, self.first_key = server, threading.Event(), 0, first_key
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> _Writes:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        assert self.error is None, f"the writes stopped after {self.count} rounds: {self.error!r}"
        assert self.count > 10, self.count  # they ran while the ALTER did

    def _run(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # noqa: BLE001 - raised by __exit__, in the test's thread
            self.error = exc

    def _write(self) -> None:
        key = self.first_key
        while not self.stop.is_set():
            key += 1
            table = f"`{DB}`.`{TABLE}`"
            self.server.execute(f"INSERT INTO {table} (id, name) VALUES (%s, %s)", (key, f"w{key}"))
            self.server.execute(f"UPDATE {table} SET name = CONCAT(name, '+') WHERE id = %s", (key % 40 + 1,))
            if key % 7 == 0:
                self.server.execute(f"DELETE FROM {table} WHERE id = %s", (key - 3,))
            if key % 5 == 0:  # an id changed (the primary key until the second ALTER, then a UNIQUE column)
                self.server.execute(f"UPDATE {table} SET id = id + 100000 WHERE id = %s", (key - 2,))
            self.count += 1
            time.sleep(0.05)


@pytest.fixture
def source(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,  # noqa: F811
           snowflake_env: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE `{DB}`")
    server.execute(f"CREATE TABLE `{DB}`.`{TABLE}` (id INT PRIMARY KEY, name VARCHAR(200))")
    for key in range(1, 41):
        server.execute(f"INSERT INTO `{DB}`.`{TABLE}` VALUES (%s, %s)", (key, f"n{key}"))
    server.execute("CREATE DATABASE cdc")  # the default watermark table, cdc.watermarks
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    return {"server": server, "config": config, "state": tmp_path / "state"}


def _status(config: Path) -> dict[str, Any]:
    done = subprocess.run(cdc_argv(config, "status", "--offline", "--json"), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _snowflake(sf: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(rows(sf, f'SELECT {", ".join(chr(34) + c.upper() + chr(34) for c in columns)} FROM "{TABLE.upper()}"'))


def _lake(state: Path, columns: list[str]) -> list[tuple[Any, ...]]:
    lake = read_lake_table(state / "lake", DB, TABLE)
    assert lake is not None
    return sorted(tuple(r[c] for c in columns) for r in lake.rows)


def _wait_until_equal(server: Any, sf: Any, state: Path, columns: list[str], timeout: float = 300) -> None:
    select = f"SELECT {', '.join(columns)} FROM `{DB}`.`{TABLE}`"
    deadline = time.monotonic() + timeout
    while True:
        expected = sorted(tuple(r) for r in server.execute(select))
        try:  # the column may not have reached the lake or Snowflake yet
            lake, snowflake = _lake(state, columns), _snowflake(sf, columns)
        except Exception as exc:  # noqa: BLE001
            lake = snowflake = [("not yet", repr(exc))]
        if lake == expected and snowflake == expected:
            return
        assert time.monotonic() < deadline, (f"not equal after {timeout}s", len(expected), len(lake), len(snowflake),
                                             [r for r in snowflake if r not in expected][:5])
        time.sleep(2)


@pytest.mark.slow  # 154 s on a slow 2-core machine; CI keeps test_resnapshot_pipeline (a repair end to end)
def test_run_follow_resnapshots_flagged_tables_by_itself(source: dict[str, Any], sf: Any) -> None:  # noqa: F811
    server, config, state = source["server"], source["config"], source["state"]
    run = Background(config, "--follow", "--poll-interval", "0.5")
    try:
        # The first cycle snapshots and replicates the table (a `cdc run --until-now` before it cost a JVM start).
        assert wait_until(lambda: run.has(stage="snowflake-apply", status="done"), timeout=300), run.lines
        with _Writes(server, first_key=1000):
            time.sleep(3)
            server.execute(f"ALTER TABLE `{DB}`.`{TABLE}` ADD COLUMN created DATETIME DEFAULT CURRENT_TIMESTAMP")
            time.sleep(3)
        _wait_until_equal(server, sf, state, ["id", "name", "created"])
        with _Writes(server, first_key=50_000):  # the first writer's ids moved to 101,00x
            time.sleep(2)
            server.execute(f"ALTER TABLE `{DB}`.`{TABLE}` DROP PRIMARY KEY, "
                           "ADD COLUMN seq INT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, ADD UNIQUE (id)")
            time.sleep(3)
        _wait_until_equal(server, sf, state, ["seq", "id", "name", "created"])
        status = _status(config)
        assert status["needs_resnapshot"] == [] and status["resnapshot"]["status"] == "done", status
    finally:
        run.process.send_signal(signal.SIGTERM)
        code, err = run.finish(300)
    assert code in (0, 143), err
    assert "re-snapshot of auto_rs.items started by cdc run" in err
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
