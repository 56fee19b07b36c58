"""Foreign-key cascades (issue #24): InnoDB changes child rows without row events; the lake and Snowflake still
equal the source.

Real MariaDB with InnoDB foreign keys -> tail -> spark-merge -> snowflake-apply (fakesnow) -> cdc verify, in two
merge runs so that cascades meet child rows changed in the same batch and rows merged by an earlier one:
ON DELETE CASCADE two levels deep (dept -> emp -> task), ON UPDATE CASCADE, SET NULL on a composite key
(badge), a self-referencing SET NULL (emp.boss), a self-referencing CASCADE tree (node), RESTRICT (audit).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from cdc.schema import SchemaHistory
from cdc.snowflake import bootstrap
from cdc.snowflake.names import snowflake_name
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, tail_once
from tests.pipeline.verify_rig import apply_to_snowflake, statuses, verify_json
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows
from tests.spark.test_cli import ROOT, run_cli

TABLES = {  # name -> (columns, primary key)
    "dept": (["id", "code", "region", "name"], ["id"]),
    "emp": (["id", "dept_id", "boss", "name"], ["id"]),
    "task": (["id", "emp_id", "note"], ["id"]),
    "badge": (["id", "code", "region", "label"], ["id"]),
    "audit": (["id", "dept_id"], ["id"]),
    "node": (["id", "parent", "label"], ["id"]),
}

SCHEMA = [
    "CREATE TABLE dept (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL, region INT NOT NULL, name VARCHAR(20), "
    "UNIQUE KEY (code, region))",
    "CREATE TABLE emp (id INT PRIMARY KEY, dept_id INT, boss INT, name VARCHAR(20), "
    "CONSTRAINT emp_dept FOREIGN KEY (dept_id) REFERENCES dept (id) ON DELETE CASCADE ON UPDATE CASCADE, "
    "CONSTRAINT emp_boss FOREIGN KEY (boss) REFERENCES emp (id) ON DELETE SET NULL)",
    "CREATE TABLE task (id INT PRIMARY KEY, emp_id INT NOT NULL, note VARCHAR(20), "
    "CONSTRAINT task_emp FOREIGN KEY (emp_id) REFERENCES emp (id) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE badge (id INT PRIMARY KEY, code VARCHAR(10), region INT, label VARCHAR(20), "
    "CONSTRAINT badge_dept FOREIGN KEY (code, region) REFERENCES dept (code, region) "
    "ON DELETE SET NULL ON UPDATE CASCADE)",
    "CREATE TABLE audit (id INT PRIMARY KEY, dept_id INT, "
    "CONSTRAINT audit_dept FOREIGN KEY (dept_id) REFERENCES dept (id) ON DELETE RESTRICT)",
    "CREATE TABLE node (id INT PRIMARY KEY, parent INT, label VARCHAR(20), "
    "CONSTRAINT node_parent FOREIGN KEY (parent) REFERENCES node (id) ON DELETE CASCADE)",
]

FIRST = [  # rows, then cascades in the same batch as the rows they reach (and rows changed before and after)
    "INSERT INTO dept VALUES (1, 'A', 1, 'one'), (2, 'B', 1, 'two'), (3, 'C', 2, 'three'), (4, 'D', 2, 'four'), "
    "(5, 'E', 3, 'five')",
    "INSERT INTO emp VALUES (10, 1, NULL, 'ann'), (11, 1, 10, 'bob'), (12, 2, 10, 'cy'), (13, 3, 12, 'di'), "
    "(14, 3, 13, 'ed'), (15, 4, 11, 'fi'), (16, 5, 13, 'gus')",
    "INSERT INTO task VALUES (100, 10, 'a'), (101, 11, 'b'), (102, 13, 'c'), (103, 14, 'd'), (104, 14, 'e'), "
    "(105, 15, 'f'), (106, 16, 'g')",
    "INSERT INTO badge VALUES (200, 'A', 1, 'x'), (201, 'C', 2, 'y'), (202, 'C', 2, 'z'), (203, 'B', 1, 'w'), "
    "(204, NULL, NULL, 'v')",
    "INSERT INTO audit VALUES (300, 5)",
    "INSERT INTO node VALUES (1, NULL, 'root'), (2, 1, 'a'), (3, 1, 'b'), (4, 2, 'aa'), (5, 4, 'aaa'), "
    "(6, NULL, 'other'), (7, 6, 'o1')",
    "UPDATE emp SET name = 'di2' WHERE id = 13",  # the child changes itself, then its parent goes
    "DELETE FROM dept WHERE id = 3",  # emp 13, 14 -> task 102-104; badge 201/202 SET NULL; emp 16.boss, 14 SET NULL
    "INSERT INTO emp VALUES (13, 5, NULL, 'di again')",  # a cascaded-away key comes back in the same batch
    "DELETE FROM node WHERE id = 2",  # 4, 5 through the self-reference
]

SECOND = [  # cascades into rows an earlier merge wrote to the lake
    "UPDATE dept SET id = 20 WHERE id = 2",  # ON UPDATE CASCADE: emp 12.dept_id = 20
    "UPDATE dept SET code = 'BB' WHERE id = 20",  # composite ON UPDATE CASCADE: badge 203.code = 'BB'
    "UPDATE dept SET region = 9 WHERE id = 1",  # badge 200 -> (A, 9)
    "DELETE FROM emp WHERE id = 10",  # task 100; emp 11/12.boss SET NULL
    "DELETE FROM dept WHERE id = 1",  # emp 11 -> task 101; emp 15.boss SET NULL; badge 200 SET NULL
    "DELETE FROM node WHERE id = 1",  # the rest of the tree: 3 (and 2's subtree is gone already)
    "BEGIN",
    "UPDATE task SET note = 'f2' WHERE id = 105",
    "DELETE FROM dept WHERE id = 4",  # emp 15 -> task 105 (changed just before, same transaction)
    "INSERT INTO emp VALUES (15, 5, NULL, 'fi again')",
    "INSERT INTO task VALUES (105, 15, 'f3')",
    "COMMIT",
]


def _execute(conn: Any, db: str, statements: list[str]) -> None:
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        for sql in statements:
            cur.execute(sql)
    conn.commit()


def source_rows(conn: Any, db: str, table: str) -> list[tuple[Any, ...]]:
    columns, key = TABLES[table]
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(columns)} FROM `{db}`.`{table}` ORDER BY {', '.join(key)}")
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cur.fetchall()]


def lake_rows(state: Path, db: str, table: str) -> list[tuple[Any, ...]]:
    lake = read_lake_table(state / "lake", db, table)
    if lake is None:  # never merged: no row ever reached it
        return []
    columns, key = TABLES[table]
    return sorted(tuple(r[c] for c in columns) for r in lake.rows)


def snowflake_rows(sf: Any, table: str) -> list[tuple[Any, ...]]:
    columns, key = TABLES[table]
    select = ", ".join(f'"{c.upper()}"' for c in columns)
    return sorted(tuple(r) for r in rows(sf, f'SELECT {select} FROM "{snowflake_name(table)}"'))


def _assert_lake_equals_source(mariadb: MariaDB, state: Path, db: str) -> None:
    with mariadb.connect() as conn:
        for table in TABLES:
            assert lake_rows(state, db, table) == source_rows(conn, db, table), table


def test_cascades_in_the_lake_and_snowflake_equal_the_source(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                              spark: Any, sf: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SCHEMA + FIRST)
    tail_once(mariadb, state, fresh_db, start)
    first = merge(StateDir(state), spark=spark)
    derived = {t.table.split(".", 1)[1]: t.cascaded for t in first.tables}
    # dept 3: emp 13, 14; task 102, 103, 104; badge 201, 202; emp 16.boss (13 gone), emp 14 (13's report, then
    # deleted: 2 changes); node 2: 4, 5.
    assert derived == {"dept": 0, "emp": 4, "task": 3, "badge": 2, "audit": 0, "node": 2}
    assert first.warnings == []
    _assert_lake_equals_source(mariadb, state, fresh_db)

    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SECOND)
        with pytest.raises(pymysql.err.IntegrityError):  # RESTRICT: the parent's delete is refused, nothing cascades
            _execute(conn, fresh_db, ["DELETE FROM dept WHERE id = 5"])
        conn.rollback()
    tail_once(mariadb, state, fresh_db)
    merge(StateDir(state), spark=spark)
    _assert_lake_equals_source(mariadb, state, fresh_db)

    apply_to_snowflake(sf, state)
    with mariadb.connect() as conn:
        for table in TABLES:
            assert snowflake_rows(sf, table) == source_rows(conn, fresh_db, table), table
    code, doc = verify_json(state, mariadb)
    assert code == 0, doc
    assert set(statuses(doc).values()) == {"OK"} and len(doc["tables"]) == 2 * len(TABLES)


def test_many_parent_deletes_in_a_run_cost_a_few_spark_jobs_not_some_per_delete(mariadb: MariaDB, fresh_db: str,
                                                                                  tmp_path: Path, spark: Any) -> None:
    """Each round of the replay looks up all the values it needs of a foreign key at once: a run deleting 4 or 40
    parents (each cascading two levels down) starts the same Spark jobs, its small tables merge together as in a run
    without cascades, and the lake equals the source."""
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SCHEMA[:3] + [
            "INSERT INTO dept VALUES " + ", ".join(f"({i}, 'd{i}', {i}, 'n')" for i in range(1, 61)),
            "INSERT INTO emp VALUES " + ", ".join(f"({100 + i}, {i}, NULL, 'e')" for i in range(1, 61)),
            "INSERT INTO task VALUES " + ", ".join(f"({1000 + i}, {100 + i}, 't')" for i in range(1, 61))])
    tail_once(mariadb, state, fresh_db, start)
    merge(StateDir(state), spark=spark)
    jobs = []
    for first, count in ((1, 4), (11, 40)):
        with mariadb.connect() as conn:
            _execute(conn, fresh_db, [f"DELETE FROM dept WHERE id = {i}" for i in range(first, first + count)])
        tail_once(mariadb, state, fresh_db)
        summary = merge(StateDir(state), spark=spark)
        assert {t.table.split(".", 1)[1]: t.cascaded for t in summary.tables} == {"dept": 0, "emp": count, "task": count}
        jobs.append(summary.spark_jobs)
        # One lookup for the parents' deletes, then one per child table and foreign key: emp by dept_id, then emp by
        # boss and task by emp_id. The children's lake rows come whole with the first lookup (none changed in the run).
        assert summary.cascade_lookups == 4
        # The three small tables, derived changes and all, are merged by one Spark query (cdc.spark.small_tables),
        # written on the driver: not table by table.
        assert "write" in summary.phases and "lake" not in summary.phases, summary.phases
    assert jobs[1] <= jobs[0] + 3, jobs  # not a few Spark jobs more per delete and level
    with mariadb.connect() as conn:
        for table in ("dept", "emp", "task"):
            assert lake_rows(state, fresh_db, table) == source_rows(conn, fresh_db, table), table


def _parent_and_child(mariadb: MariaDB, parent_db: str, child_db: str) -> None:
    mariadb.execute(f"CREATE TABLE `{parent_db}`.p (id INT PRIMARY KEY, name VARCHAR(10))")
    mariadb.execute(f"CREATE TABLE `{child_db}`.c (id INT PRIMARY KEY, pid INT, CONSTRAINT c_p FOREIGN KEY (pid) "
                    f"REFERENCES `{parent_db}`.p (id) ON DELETE CASCADE)")
    mariadb.execute(f"INSERT INTO `{parent_db}`.p VALUES (1, 'a'), (2, 'b')")
    mariadb.execute(f"INSERT INTO `{child_db}`.c VALUES (10, 1), (11, 1), (12, 2)")


def test_a_cascade_into_a_table_that_is_not_captured_is_reported_not_guessed(
        mariadb: MariaDB, fresh_db: str, tmp_path: Path, spark: Any) -> None:  # noqa: F811
    other = f"{fresh_db}_other"
    mariadb.execute(f"CREATE DATABASE `{other}`")
    try:
        state = tmp_path / "state"
        start = binlog_start(mariadb)
        _parent_and_child(mariadb, fresh_db, other)
        mariadb.execute(f"DELETE FROM `{fresh_db}`.p WHERE id = 1")
        tail_once(mariadb, state, fresh_db, start)  # captures fresh_db only
        summary = merge(StateDir(state), spark=spark)
        assert [(t.table, t.cascaded) for t in summary.tables] == [(f"{fresh_db}.p", 0)]
        assert summary.warnings == [f"1 parent change(s) cascade through foreign key {other}.c.c_p, whose table is "
                                    "not captured: its rows there are not changed (capture that table to reproduce "
                                    "them)"]
        lake = read_lake_table(state / "lake", fresh_db, "p")
        assert lake is not None and [r["id"] for r in lake.rows] == [2]
    finally:
        mariadb.execute(f"DROP DATABASE `{other}`")


def test_a_server_that_logs_its_cascades_gets_none_derived(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                           spark: Any) -> None:  # noqa: F811
    """MySQL 8.4+ writes the cascaded child rows itself: deriving them as well would apply them twice.

    The change log comes from MariaDB (which omits them), labelled as MySQL 8.4's: nothing is derived, so the
    child rows stay as the binlog says (on a real MySQL 8.4 the binlog's own deletes of c 10 and 11 remove them).
    """
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    _parent_and_child(mariadb, fresh_db, fresh_db)
    mariadb.execute(f"DELETE FROM `{fresh_db}`.p WHERE id = 1")
    tail_once(mariadb, state, fresh_db, start)
    recorded = json.loads((state / "server.json").read_text())
    (state / "server.json").write_text(json.dumps({**recorded, "flavour": "mysql", "server_version": "8.4.3"}))
    summary = merge(StateDir(state), spark=spark)
    assert {t.table: t.cascaded for t in summary.tables} == {f"{fresh_db}.c": 0, f"{fresh_db}.p": 0}
    _lake = {t: read_lake_table(state / "lake", fresh_db, t) for t in ("p", "c")}
    assert {t: sorted(r["id"] for r in lake.rows) for t, lake in _lake.items() if lake} == {"p": [2], "c": [10, 11, 12]}


# 156 s on a slow 2-core machine: with the fault campaign (-m slow); CI keeps the kill -9 merge tests of
# tests/spark/test_cli.py and the cascade tests here.
@pytest.mark.slow
@pytest.mark.spark  # cdc spark-merge in a subprocess starts its own JVM
def test_kill_9_during_merge_and_apply_with_cascades_then_rerun_is_exact(
        mariadb: MariaDB, fresh_db: str, tmp_path: Path, sf: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SCHEMA + FIRST + SECOND)
    tail_once(mariadb, state, fresh_db, start)
    proc = run_cli(state, "--json")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not (state / "lake").exists():
        time.sleep(0.05)  # the lake appears once the cascades are derived and the first table is written
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (state / "merge.json").exists()  # killed mid-merge
    rerun = run_cli(state, "--json")
    out, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err.decode()
    assert {t["table"].split(".", 1)[1]: t["cascaded"] for t in json.loads(out)["tables"]}["task"] == 6
    _assert_lake_equals_source(mariadb, state, fresh_db)

    options = bootstrap.Options()
    bootstrap.run(sf, bootstrap.targets_for(bootstrap.schemas_from_history(SchemaHistory(state / "schema"), []),
                                            options), options)
    kills = 0
    for delay in (1.5, 2.5, 3.5, 4.5):
        process = subprocess.Popen([sys.executable, "-m", "cdc", "snowflake-apply", "--state-dir", str(state)],
                                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:  # killed at `delay` if still running; one that finishes sooner is not waited for
            process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
            process.wait()
    assert kills >= 1
    final = subprocess.run([sys.executable, "-m", "cdc", "snowflake-apply", "--state-dir", str(state)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    with mariadb.connect() as conn:
        for table in TABLES:
            assert snowflake_rows(sf, table) == source_rows(conn, fresh_db, table), table
    code, doc = verify_json(state, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, doc


SEED_ROWS = [  # parents for the random statements to reach: a department of 3 employees with 2 tasks each, a tree
    "INSERT INTO dept VALUES (1, 'A', 1, 'd1'), (2, 'B', 1, 'd2'), (3, 'C', 2, 'd3'), (4, 'A', 2, 'd4')",
    "INSERT INTO emp VALUES " + ", ".join(f"({e}, {1 + e % 4}, {e - 1 if e % 3 != 1 else 'NULL'}, 'e{e}')"
                                          for e in range(1, 13)),
    "INSERT INTO task VALUES " + ", ".join(f"({t}, {1 + t % 12}, 't{t}')" for t in range(1, 25)),
    "INSERT INTO badge VALUES " + ", ".join(f"({b}, '{'ABCA'[b % 4]}', {(1, 1, 2, 2)[b % 4]}, 'b{b}')"
                                            for b in range(1, 9)),
    "INSERT INTO node VALUES (1, NULL, 'r'), " + ", ".join(f"({n}, {n // 2}, 'n{n}')" for n in range(2, 12)),
]


def _random_statement(rng: random.Random) -> str:
    """One statement of the randomized workload: small value ranges, so that keys collide and cascades chain."""
    d, e, t, n = rng.randrange(1, 7), rng.randrange(1, 16), rng.randrange(1, 30), rng.randrange(1, 12)
    code, region = rng.choice("ABC"), rng.randrange(1, 3)
    maybe_emp = rng.choice(["NULL", str(rng.randrange(1, 16))])
    return rng.choice([
        f"INSERT INTO dept VALUES ({d}, '{code}', {region}, 'd{d}')",
        f"DELETE FROM dept WHERE id = {d}",
        f"UPDATE dept SET id = {rng.randrange(1, 7)} WHERE id = {d}",
        f"UPDATE dept SET code = '{code}', region = {region} WHERE id = {d}",
        f"INSERT INTO emp VALUES ({e}, {rng.choice(['NULL', str(d)])}, {maybe_emp}, 'e{e}')",
        f"INSERT INTO emp VALUES ({e}, {d}, NULL, 'e{e}')",
        f"DELETE FROM emp WHERE id = {e}",
        f"UPDATE emp SET boss = {maybe_emp}, name = 'e{e}{rng.randrange(9)}' WHERE id = {e}",
        f"UPDATE emp SET id = {rng.randrange(1, 16)} WHERE id = {e}",
        f"INSERT INTO task VALUES ({t}, {e}, 't{t}')",
        f"UPDATE task SET note = 'n{rng.randrange(99)}' WHERE id = {t}",
        f"DELETE FROM task WHERE id = {t}",
        f"INSERT INTO badge VALUES ({t}, '{code}', {region}, 'b{t}')",
        f"UPDATE badge SET code = '{code}', region = {region} WHERE id = {t}",
        f"INSERT INTO node VALUES ({n}, {rng.choice(['NULL', str(rng.randrange(1, 12))])}, 'n{n}')",
        f"DELETE FROM node WHERE id = {n}",
        f"INSERT INTO audit VALUES ({t}, {d})",
    ])


def _random_round(conn: Any, db: str, rng: random.Random, transactions: int) -> int:
    """Random transactions of 1-4 statements; one a foreign key (or a key) refuses is rolled back whole."""
    committed = 0
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        for _ in range(transactions):
            try:
                for _ in range(rng.randrange(1, 5)):
                    cur.execute(_random_statement(rng))
                conn.commit()
                committed += 1
            except pymysql.err.IntegrityError:
                conn.rollback()
    return committed


# CI runs one seed (each costs ~2 minutes of a 2-core run); the second runs with -m slow.
# Both seeds with -m slow (~2 minutes each on a slow 2-core machine): CI keeps the cascade tests above.
@pytest.mark.parametrize("seed", [pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_randomized_cascades_equal_the_source_after_every_merge(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                                 spark: Any, seed: int) -> None:  # noqa: F811
    state = tmp_path / "state"
    start = binlog_start(mariadb)
    rng = random.Random(seed)
    derived: dict[str, int] = {}
    with mariadb.connect() as conn:
        _execute(conn, fresh_db, SCHEMA + SEED_ROWS)
        for number in range(3):
            assert _random_round(conn, fresh_db, rng, transactions=60) > 10
            tail_once(mariadb, state, fresh_db, start if number == 0 else None)
            for result in merge(StateDir(state), spark=spark).tables:
                derived[result.table] = derived.get(result.table, 0) + result.cascaded
            for table in TABLES:
                assert lake_rows(state, fresh_db, table) == source_rows(conn, fresh_db, table), (number, table)
    assert sum(derived.values()) > 10, derived  # the workload did cascade
