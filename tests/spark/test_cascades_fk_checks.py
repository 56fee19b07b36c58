"""A parent changed in a session with `foreign_key_checks=0` cascades nothing in InnoDB (issue #24).

The rows event carries NO_FOREIGN_KEY_CHECKS; tail writes it into the change line (`"fk_checks": false`) and the
cascade replay skips such parent changes: the child rows keep their (now dangling) values in the lake and in
Snowflake, as in MySQL. Real MariaDB -> tail (in-process decode and decode workers) -> spark-merge ->
snowflake-apply (fakesnow) -> cdc verify, with parents changed with checks off and on in the same batch, in one
transaction that switches in between, and a later batch whose cascade reaches a child row left dangling earlier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc.snowflake import apply
from cdc.snowflake.names import snowflake_name
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, changelog_lines, tail_once
from tests.pipeline.verify_rig import apply_to_snowflake, statuses, verify_json
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows

TABLES = {"p": ("id", "name"), "cc": ("id", "pid", "note"), "cn": ("id", "pid", "note")}

SCHEMA = [
    "CREATE TABLE p (id INT PRIMARY KEY, name VARCHAR(10))",
    "CREATE TABLE cc (id INT PRIMARY KEY, pid INT, note VARCHAR(10), CONSTRAINT cc_p FOREIGN KEY (pid) "
    "REFERENCES p (id) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE cn (id INT PRIMARY KEY, pid INT, note VARCHAR(10), CONSTRAINT cn_p FOREIGN KEY (pid) "
    "REFERENCES p (id) ON DELETE SET NULL ON UPDATE SET NULL)",
    "INSERT INTO p VALUES " + ", ".join(f"({i}, 'p{i}')" for i in range(1, 9)),
    "INSERT INTO cc VALUES " + ", ".join(f"({10 + i}, {i}, 'c{i}')" for i in range(1, 9)),
    "INSERT INTO cn VALUES " + ", ".join(f"({20 + i}, {i}, 'n{i}')" for i in range(1, 9)),
]

FIRST = [  # checks off and on in one batch; deletes and key updates; one transaction switching in between
    "SET SESSION foreign_key_checks = 0",
    "DELETE FROM p WHERE id = 1",  # cc 11 and cn 21 keep pid 1
    "UPDATE p SET id = 20 WHERE id = 2",  # cc 12 and cn 22 keep pid 2
    "UPDATE cc SET note = 'after' WHERE id = 11",  # a dangling child changed afterwards
    "SET SESSION foreign_key_checks = 1",
    "DELETE FROM p WHERE id = 3",  # cc 13 deleted, cn 23.pid NULL
    "UPDATE p SET id = 40 WHERE id = 4",  # cc 14.pid 40, cn 24.pid NULL
    "BEGIN",
    "SET SESSION foreign_key_checks = 0",
    "DELETE FROM p WHERE id = 5",  # nothing cascades
    "SET SESSION foreign_key_checks = 1",
    "DELETE FROM p WHERE id = 6",  # cc 16 deleted, cn 26.pid NULL
    "COMMIT",
]

SECOND = [  # a later batch: a dangling child meets a parent of its value again, deleted with checks on
    "INSERT INTO p VALUES (1, 'again')",
    "DELETE FROM p WHERE id = 1",  # now cc 11 goes and cn 21.pid becomes NULL
    "SET SESSION foreign_key_checks = 0",
    "DELETE FROM p WHERE id = 7",
    "SET SESSION foreign_key_checks = 1",
    "UPDATE p SET id = 80 WHERE id = 8",  # cc 18.pid 80, cn 28.pid NULL
]


def _execute(conn: Any, db: str, statements: list[str]) -> None:
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        in_transaction = False
        for sql in statements:  # one transaction each, but BEGIN ... COMMIT
            if sql in ("BEGIN", "COMMIT"):
                in_transaction = sql == "BEGIN"
            else:
                cur.execute(sql)
            if not in_transaction:
                conn.commit()


def _source(conn: Any, db: str, table: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(TABLES[table])} FROM `{db}`.`{table}` ORDER BY id")
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cur.fetchall()]


def _lake(state: Path, db: str, table: str) -> list[tuple[Any, ...]]:
    lake = read_lake_table(state / "lake", db, table)
    assert lake is not None
    return sorted(tuple(r[c] for c in TABLES[table]) for r in lake.rows)


def _snowflake(sf: Any, table: str) -> list[tuple[Any, ...]]:
    select = ", ".join(f'"{c.upper()}"' for c in TABLES[table])
    return sorted(tuple(r) for r in rows(sf, f'SELECT {select} FROM "{snowflake_name(table)}"'))


def _assert_exact(mariadb: MariaDB, state: Path, db: str, sf: Any) -> None:
    with mariadb.connect() as conn:
        for table in TABLES:
            want = _source(conn, db, table)
            assert _lake(state, db, table) == want, f"lake {table}"
            assert _snowflake(sf, table) == want, f"Snowflake {table}"
    code, doc = verify_json(state, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, doc


@pytest.mark.parametrize("workers", [0, 1], ids=["in-process", "decode-worker"])
def test_parent_changes_with_foreign_key_checks_off_cascade_nothing(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                                    spark: Any, sf: Any, workers: int) -> None:
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SCHEMA + FIRST)
        assert _source(conn, fresh_db, "cc")[:2] == [(11, 1, "after"), (12, 2, "c2")]  # InnoDB cascaded nothing
    tail_once(mariadb, state, fresh_db, start, decode_workers=workers)
    flagged = {(line["table"], line["op"], (line["before"] or {}).get("id")) for line in changelog_lines(state)
               if line.get("fk_checks") is False}
    assert flagged == {("p", "d", 1), ("p", "u", 2), ("cc", "u", 11), ("p", "d", 5)}
    first = merge(StateDir(state), spark=spark)
    assert {t.table.split(".", 1)[1]: t.cascaded for t in first.tables} == {"p": 0, "cc": 3, "cn": 3}
    apply_to_snowflake(sf, state)
    _assert_exact(mariadb, state, fresh_db, sf)

    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SECOND)
    tail_once(mariadb, state, fresh_db, decode_workers=workers)
    second = merge(StateDir(state), spark=spark)
    assert {t.table.split(".", 1)[1]: t.cascaded for t in second.tables} == {"p": 0, "cc": 2, "cn": 2}
    assert apply.run(sf, StateDir(state)).applied
    _assert_exact(mariadb, state, fresh_db, sf)


@pytest.mark.spark  # `cdc spark-merge` in a fresh process: its own JVM
def test_a_fresh_process_discards_the_pass_it_made_ahead_when_the_run_cascades(mariadb: MariaDB, fresh_db: str,
                                                                             tmp_path: Path) -> None:
    """The superseded-lines pass is made beside the JVM's start (thresholds lowered: any size, any share), before a
    cascade can be known; the run cascades, so its files are not read, and the lake equals the source."""
    from tests.spark.test_cli import ANY_SIZE, ROOT

    state = tmp_path / "state"
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SCHEMA + FIRST + SECOND)
    tail_once(mariadb, state, fresh_db, start)
    done = subprocess.run([sys.executable, "-c", ANY_SIZE, "spark-merge", "--state-dir", str(state), "--master",
                           "local[2]", "--driver-memory", "1g", "--json"], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert "latest" in summary["phases"] and summary["superseded"] == 0, summary  # made, then not read
    assert sum(t["cascaded"] for t in summary["tables"]) > 0, summary
    with mariadb.connect() as conn:
        for table in TABLES:
            assert _lake(state, fresh_db, table) == _source(conn, fresh_db, table), table
    assert not list(state.rglob("latest-*")), "the discarded pass's files outlived the run"
