"""What the re-snapshot tests share: a tail running in a thread, a write workload in another, a replay model.

The model applies the change log as spark-merge does (docs/formats.md): per key, the line with the highest
position wins; a truncate/drop line removes every row written before it; a re-snapshot end line removes every
row whose last line is older than its `cut`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

from cdc.capture import Filters, StartRequest, TailOptions, TailSummary, run_tail
from cdc.checkpoints import TailCheckpoint
from cdc.config import Settings
from cdc.state import StateDir
from tests.capture.conftest import changelog_lines, settings_for
from tests.capture.workload import expected_rows
from tests.rig import MariaDB

MARKS = "cdc_marks"  # the watermark table's database: outside the captured one, as a user would have it


def resnapshot_settings(server: MariaDB, state: Path, db: str) -> Settings:
    return settings_for(server, state, **{"mysql.databases": (db,), "mysql.watermark_table": f"{MARKS}.watermarks"})


def create_marks_table(server: MariaDB) -> None:
    server.execute(f"CREATE DATABASE IF NOT EXISTS {MARKS}")
    server.execute(f"CREATE TABLE IF NOT EXISTS {MARKS}.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, "
                   "mark TEXT NOT NULL) ENGINE=InnoDB")


@contextmanager
def tail_running(server: MariaDB, state: Path, db: str, start: str | None) -> Iterator[dict[str, Any]]:
    """`cdc tail --follow` in a thread until the block ends (then it stops at the server's end, all read)."""
    stop = threading.Event()
    box: dict[str, Any] = {}
    options = TailOptions(start=StartRequest(position=start), follow=True, filters=Filters(databases=(db,)),
                          flush_interval=0.1, decode_workers=0)

    def run() -> None:
        try:
            box["summary"] = run_tail(resnapshot_settings(server, state, db), options, should_stop=stop.is_set)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while TailCheckpoint.read(StateDir(state)) is None and "error" not in box and time.monotonic() < deadline:
            time.sleep(0.02)
        yield box
        wait_for_tail(server, state)
    finally:
        stop.set()
        thread.join(60)
    if "error" in box:
        raise box["error"]


def wait_for_tail(server: MariaDB, state: Path, timeout: float = 60.0) -> None:
    """Until tail's checkpoint is at the server's binlog end."""
    file, pos = server.binlog_position()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tail = TailCheckpoint.read(StateDir(state))
        if tail is not None and (tail.file, tail.pos) >= (file, pos):
            return
        time.sleep(0.05)
    raise AssertionError(f"tail did not reach {file}:{pos}")


def kill_tail_until_done(server: MariaDB, state: Path, db: str, reader: threading.Thread, seed: int) -> int:
    """`cdc tail --follow` processes, each killed with SIGKILL soon after it sealed a segment (0-0.4 s later; at
    most 2.5 s after its start), until `reader` ends; returns the number of kills. (Decode workers left at their
    default: the reassembly path notes keys too.)

    Killed on its progress, not after a fixed 0.8-2.5 s: on a fast machine a whole re-snapshot fitted in the first
    tail's life, and the one kill came after the end."""
    import subprocess
    import sys

    from cdc.changelog import list_segments
    from tests.capture.conftest import ROOT, env_for

    rng, kills, changelog = random.Random(seed), 0, StateDir(state).changelog
    env = env_for(server, CDC_MYSQL_DATABASES=db, CDC_MYSQL_WATERMARK_TABLE=f"{MARKS}.watermarks")
    while reader.is_alive():
        sealed = len(list_segments(changelog))
        tail = subprocess.Popen([sys.executable, "-m", "cdc", "tail", "--follow", "--flush-interval", "0.05",
                                 "--state-dir", str(state)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 2.5  # a tail process starts in about a second
        while reader.is_alive() and time.monotonic() < deadline and len(list_segments(changelog)) <= sealed:
            reader.join(0.05)
        reader.join(rng.uniform(0.0, 0.4))
        tail.kill()
        tail.wait()
        kills += 1
    return kills


def wait_for_lines(server: MariaDB, state: Path, timeout: float = 60.0) -> None:
    """Until the sealed change log has a line past the server's binlog end now (writes must go on meanwhile).

    Unlike wait_for_tail, this does not wait for tail.json, which stays before a window a killed resnapshot left open.
    """
    from cdc.changelog import list_segments, position_string

    file, pos = server.binlog_position()
    target = position_string(file, pos, 0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        segments = list_segments(state / "changelog")
        if segments and _last_position(segments[-1]) > target:
            return
        time.sleep(0.05)
    raise AssertionError(f"the change log did not pass {file}:{pos}")


def _last_position(segment: Path) -> str:
    import orjson

    return str(orjson.loads(segment.read_bytes().splitlines()[-1])["position"])


def replay(state: Path, db: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The table as spark-merge would make it from the change log (keys as tuples of sorted key names)."""
    rows: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
    positions = []
    for line in changelog_lines(state):
        positions.append(line["position"])
        if line.get("db") != db or line.get("table") != table:
            continue
        if line["op"] == "ddl":
            if line["kind"] in ("truncate", "drop"):
                rows.clear()
            elif line["kind"] == "resnapshot":
                rows = {k: v for k, v in rows.items() if v[0] >= line["cut"]}
            continue
        key = line["key"]
        if line["before"] is not None:
            old = tuple(line["before"][k] for k in sorted(key))
            if old in rows and rows[old][0] < line["position"]:
                del rows[old]
        if line["op"] == "d":
            rows.pop(tuple(key[k] for k in sorted(key)), None)
        else:
            rows[tuple(key[k] for k in sorted(key))] = (line["position"], line["after"])
    assert positions == sorted(positions) and len(set(positions)) == len(positions), "positions sort, unique"
    return {k: v[1] for k, v in rows.items()}


def source(server: MariaDB, db: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    with server.connect() as conn:
        return expected_rows(conn, db, table)


class Workload:
    """Autocommit writes on `db`.`t` (id INT PK, v VARCHAR, n INT) from a thread: updates, deletes, inserts,
    primary-key changes and rolled-back transactions, over the keys the re-snapshot reads."""

    def __init__(self, server: MariaDB, db: str, table: str, keys: int, seed: int, pause: float = 0.0,
                 first: int = 1) -> None:
        self.server, self.db, self.table, self.keys, self.pause = server, db, table, keys, pause
        self.first = first  # the lowest key written: rows below it change only with the binlog off
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.writes = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> Workload:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        table = f"`{self.db}`.`{self.table}`"
        try:
            with self.server.connect() as conn, conn.cursor() as cur:
                while not self.stop.is_set():
                    self._one(cur, table)
                    self.writes += 1
                    if self.pause:
                        time.sleep(self.pause)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def _one(self, cur: Any, table: str) -> None:
        rng, key = self.rng, self.rng.randrange(self.first, self.keys * 2)
        action = rng.random()
        try:
            if action < 0.45:
                cur.execute(f"UPDATE {table} SET v = %s, n = n + 1 WHERE id = %s", (f"w{rng.random():.6f}", key))
            elif action < 0.6:
                cur.execute(f"DELETE FROM {table} WHERE id = %s", (key,))
            elif action < 0.75:
                cur.execute(f"INSERT IGNORE INTO {table} VALUES (%s, %s, 0)", (key, f"i{key}"))
            elif action < 0.88:  # a primary-key change: the old key must disappear
                cur.execute(f"UPDATE IGNORE {table} SET id = %s WHERE id = %s",
                            (rng.randrange(self.first, self.keys * 2), key))
            else:  # a rolled-back transaction writes nothing to the binlog
                cur.execute("BEGIN")
                cur.execute(f"UPDATE {table} SET v = 'rolled back' WHERE id = %s", (key,))
                cur.execute(f"DELETE FROM {table} WHERE id = %s", (key + 1,))
                cur.execute("ROLLBACK")
        except pymysql.err.MySQLError:
            cur.execute("ROLLBACK")
