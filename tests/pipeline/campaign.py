"""The fault campaign's moving parts: a writer that survives server faults, and stages killed with kill -9.

A campaign runs a randomized workload against its own MariaDB while it starts `cdc` stages as a user
would (subprocesses, each in its own process group so the Spark JVM dies with its driver) and kills them
at random moments; between kills it rotates the binlog, restarts or freezes the server, or KILLs the
replication connection. Whatever happened, `cdc run --until-now` afterwards must leave every target
equal to the source, which `cdc verify` and the test's own comparison check.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from tests.capture.workload import COLUMNS, _value, insert_row, prepare_session, random_row, update_row
from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]
# Transient faults a writer sees while the campaign restarts, freezes or kills things on the server.
_LOST = (pymysql.err.OperationalError, pymysql.err.InterfaceError, ConnectionError, OSError)


class Writer:
    """Random transactions on `all_types` (every column type, hostile values) until stopped.

    A transaction cut by a server restart is lost or committed, as the server decides; the oracle is a
    SELECT at the end, never a model of what the writer meant to do.
    """

    def __init__(self, server: MariaDB, db: str, table: str, *, seed: int, pause: float = 0.02) -> None:
        self.server, self.db, self.table, self.pause = server, db, table, pause
        self.rng = random.Random(seed)
        self.commits = self.rollbacks = self.faults = 0
        self._next_key = 1_000_000 + seed * 100_000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="campaign writer", daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self.server.connect(autocommit=False, read_timeout=10, write_timeout=10) as conn:
                    prepare_session(conn)
                    while not self._stop.is_set():
                        self._transaction(conn)
                        time.sleep(self.pause)
            except _LOST:
                self.faults += 1
                time.sleep(0.3)  # the server is restarting or frozen: try again shortly

    def _transaction(self, conn: pymysql.Connection) -> None:
        rng, db, table = self.rng, self.db, self.table
        with conn.cursor() as cur:
            for _ in range(rng.randint(1, 5)):
                op = rng.random()
                if op < 0.5:
                    insert_row(cur, db, table, random_row(rng, self._next_key))
                    self._next_key += 1
                elif op < 0.75:
                    names = rng.sample(list(COLUMNS), rng.randint(1, 5))
                    update_row(cur, db, table, self._some_key(cur), {n: _value(rng, n) for n in names})
                elif op < 0.85:  # a primary-key change
                    cur.execute(f"UPDATE `{db}`.`{table}` SET id = %s WHERE id = %s", (self._next_key, self._some_key(cur)))
                    self._next_key += 1
                else:
                    cur.execute(f"DELETE FROM `{db}`.`{table}` WHERE id = %s", (self._some_key(cur),))
        if rng.random() < 0.1:
            conn.rollback()
            self.rollbacks += 1
        else:
            conn.commit()
            self.commits += 1

    def _some_key(self, cur: Any) -> int:
        cur.execute(f"SELECT id FROM `{self.db}`.`{self.table}` ORDER BY RAND() LIMIT 1")
        row = cur.fetchone()
        return int(row[0]) if row else -1


@dataclass
class Tally:
    """What the campaign did, for the test's assertions and the figures in docs/fault-campaign.md."""

    kills: dict[str, int] = field(default_factory=dict)
    finished: int = 0  # stage runs that ended before their kill time
    faults: dict[str, int] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)  # the workload's commits, rollbacks, lost connections

    def count(self, bucket: dict[str, int], name: str) -> None:
        bucket[name] = bucket.get(name, 0) + 1

    @property
    def total_kills(self) -> int:
        return sum(self.kills.values())


def cdc_argv(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cdc", *args, "--config", str(config)]


def run_and_kill(config: Path, args: tuple[str, ...], after: float, tally: Tally) -> None:
    """Start `cdc ARGS` and kill -9 its whole process group `after` seconds later, unless it ended first."""
    process = subprocess.Popen(cdc_argv(config, *args), cwd=ROOT, env=dict(os.environ), start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        process.wait(after)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        tally.count(tally.kills, " ".join(args))
        return
    finally:
        assert process.stderr is not None
        err = process.stderr.read().decode("utf-8", "replace")
        process.stderr.close()
    # A stage that ended by itself may fail only with what the campaign does to it (a frozen or restarting
    # server, a lock held by a stage killed a moment ago is released by the kernel at once).
    assert process.returncode in (0, 1, 6, 130), f"cdc {' '.join(args)} exited {process.returncode}: {err}"
    tally.finished += 1


def kill_binlog_readers(server: MariaDB) -> int:
    """KILL every binlog dump connection (what an admin or a failover proxy does to replicas)."""
    killed = 0
    for row in server.execute("SHOW PROCESSLIST"):
        if row[4] == "Binlog Dump":
            try:
                server.execute(f"KILL {int(row[0])}")
                killed += 1
            except pymysql.err.OperationalError:
                pass  # it ended by itself meanwhile
    return killed


FAULTS = ("rotate", "restart", "freeze", "kill-connection")


def server_fault(server: MariaDB, rng: random.Random, tally: Tally, fault: str | None = None) -> None:
    """One fault on the server: `fault`, or one chosen at random."""
    fault = fault or rng.choice(FAULTS)
    if fault == "rotate":
        server.execute("FLUSH BINARY LOGS")
    elif fault == "restart":
        server.restart()
    elif fault == "freeze":
        server.freeze()
        time.sleep(rng.uniform(1.0, 3.0))
        server.thaw()
    else:
        kill_binlog_readers(server)
    tally.count(tally.faults, fault)
