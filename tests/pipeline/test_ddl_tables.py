"""DDL that empties, replaces or creates whole tables reaches the lake and Snowflake exactly (issue #30).

Real MariaDB -> tail -> spark-merge -> snowflake-bootstrap/apply (fakesnow) -> cdc verify: TRUNCATE TABLE,
DROP TABLE then CREATE TABLE of the same name with another shape, CREATE TABLE ... LIKE and CREATE TABLE ... AS
SELECT (logged as a CREATE and row events). Rows are written before and after the DDL in the same batch and in
later batches; after every batch the lake and the Snowflake table equal a SELECT * of each MySQL table row for row
(exact types), and `cdc verify` says OK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc.source.schema_reads import read_table_schema
from cdc.spark import merge, read_lake_table
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, tail_once
from tests.capture.workload import expected_rows
from tests.pipeline.verify_rig import apply_to_snowflake, statuses, verify_json
from tests.rig import MariaDB
from tests.snowflake.test_pipeline import _lake_expected, _snowflake_rows, _snowflake_value, _typed


def _batch(mariadb: MariaDB, db: str, state: StateDir, sf: Any, spark: Any, tables: list[str], label: str,
           start: str | None = None) -> None:
    """One batch through every stage, then each table the source has compared with it (and verify)."""
    tail_once(mariadb, state.root, db, start)
    merge(state, spark=spark)
    apply_to_snowflake(sf, state.root)  # bootstrap first, as `cdc run` does: it creates tables new in the batch
    for table in tables:
        with mariadb.connect() as conn:
            schema = read_table_schema(conn, db, table)
            if schema is None:
                continue  # not created yet
            encoded = expected_rows(conn, db, table)
        lake = read_lake_table(state.root / "lake", db, table)
        assert lake is not None, f"{label}: {table} not in the lake"
        assert lake.columns[:-3] == schema.column_names, f"{label}: lake columns of {table}"
        found = {key: _typed({c: row[c] for c in schema.column_names}) for key, row in lake.by_key().items()}
        assert found == _lake_expected(schema, encoded), f"{label}: lake {table}"
        want = {key: _typed({c.name: _snowflake_value(c, row[c.name]) for c in schema.columns})
                for key, row in encoded.items()}
        assert _snowflake_rows(sf, schema) == want, f"{label}: Snowflake {table}"
    code, doc = verify_json(state.root, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, (label, doc)


def _run(mariadb: MariaDB, db: str, statements: list[str]) -> None:
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        for sql in statements:
            cur.execute(sql)
            conn.commit()


def _rounds(mariadb: MariaDB, db: str, tmp_path: Path, spark: Any, sf: Any, tables: list[str],
            rounds: dict[str, list[str]]) -> None:
    """Each round's statements (one session, each committed), then one batch through every stage, compared."""
    state = StateDir(tmp_path / "state")
    start: str | None = binlog_start(mariadb)
    for label, statements in rounds.items():
        _run(mariadb, db, statements)
        _batch(mariadb, db, state, sf, spark, tables, label, start)
        start = None


def test_truncate_table(mariadb: MariaDB, fresh_db: str, tmp_path: Path, spark: Any, sf: Any) -> None:
    _rounds(mariadb, fresh_db, tmp_path, spark, sf, ["t"], {
        "before": [
            "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(8,2))",
            "INSERT INTO t VALUES " + ", ".join(f"({i}, 'n{i}', {i}.25)" for i in range(1, 6)),
        ],
        "same batch": [  # rows before and after the TRUNCATE in one batch, a key that comes back
            "UPDATE t SET name = 'before' WHERE id = 1", "INSERT INTO t VALUES (6, 'n6', 6)", "TRUNCATE TABLE t",
            "INSERT INTO t VALUES (1, 'again', 1.5), (7, 'n7', 7)", "UPDATE t SET amount = 9.99 WHERE id = 7",
        ],
        "later batch": ["INSERT INTO t VALUES (8, 'n8', 8)", "DELETE FROM t WHERE id = 1"],
        "a TRUNCATE alone": ["TRUNCATE t"],
        "after a TRUNCATE alone": ["INSERT INTO t VALUES (8, 'n8 again', 8)"],
    })


def test_drop_table_then_create_it_with_another_shape(mariadb: MariaDB, fresh_db: str, tmp_path: Path, spark: Any,
                                                      sf: Any) -> None:
    _rounds(mariadb, fresh_db, tmp_path, spark, sf, ["t"], {
        "first life": [
            "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10) NOT NULL, b INT, c DECIMAL(6,2))",
            "INSERT INTO t VALUES " + ", ".join(f"({i}, 'a{i}', {i * 10}, {i}.5)" for i in range(1, 6)),
        ],
        "second life, same batch": [  # the second life in the same batch: other columns, types and NOT NULLs
            "UPDATE t SET b = 99 WHERE id = 1", "DELETE FROM t WHERE id = 2", "DROP TABLE t",
            "CREATE TABLE t (id BIGINT PRIMARY KEY, d DATE NOT NULL, a INT, c VARCHAR(5))",
            "INSERT INTO t VALUES (1, '2026-01-01', 7, 'x'), (9, '2026-02-02', NULL, NULL)",
            "UPDATE t SET a = 8 WHERE id = 1",
        ],
        "second life, later batch": ["INSERT INTO t VALUES (3, '2026-03-03', 3, 'y')", "DELETE FROM t WHERE id = 9"],
        "third life": [  # a third life in a batch of its own, keys of both earlier lives again
            "DROP TABLE t", "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))",
            "INSERT INTO t VALUES (1, 'third'), (4, 'four')",
        ],
    })


def test_create_table_like_and_as_select(mariadb: MariaDB, fresh_db: str, tmp_path: Path, spark: Any,
                                         sf: Any) -> None:
    _rounds(mariadb, fresh_db, tmp_path, spark, sf, ["t", "t2", "t3", "t4"], {
        "source table": [
            "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, amount DECIMAL(8,2), at DATETIME(3))",
            "INSERT INTO t VALUES " + ", ".join(f"({i}, 'n{i}', {i}.25, '2026-01-0{i} 10:00:00.123')" for i in range(1, 6)),
        ],
        "same batch": [  # both kinds in one batch, with rows changed before and after
            "UPDATE t SET name = 'before' WHERE id = 1",
            "CREATE TABLE t2 LIKE t",
            "INSERT INTO t2 VALUES (1, 'like', 1.5, NULL), (2, 'like2', NULL, '2026-05-05 05:05:05.5')",
            "CREATE TABLE t3 (PRIMARY KEY (id)) AS SELECT * FROM t",
            "UPDATE t3 SET name = 'after' WHERE id = 2", "DELETE FROM t3 WHERE id = 3",
            "INSERT INTO t VALUES (6, 'n6', 6, NULL)",
            "CREATE TABLE t4 (PRIMARY KEY (id)) SELECT id, name FROM t WHERE id > 3",
        ],
        "later batch": [
            "INSERT INTO t2 VALUES (3, 'later', 3, NULL)", "UPDATE t3 SET amount = 0 WHERE id = 1",
            "INSERT INTO t4 VALUES (9, 'nine')", "DELETE FROM t4 WHERE id = 4",
        ],
    })


def test_datetime_precision_cut_truncates_the_stored_fraction(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                              spark: Any, sf: Any) -> None:
    """MariaDB truncates the stored fractions at MODIFY DATETIME(6) -> DATETIME(0) / TIMESTAMP(6) -> (2): so do the
    lake and Snowflake (.999999 must not round up to the next second)."""
    _rounds(mariadb, fresh_db, tmp_path, spark, sf, ["t"], {
        "before": [
            "SET SESSION time_zone = '+00:00'",
            "CREATE TABLE t (id INT PRIMARY KEY, at DATETIME(6), ts TIMESTAMP(6) NULL, name VARCHAR(10))",
            "INSERT INTO t VALUES (1, '2026-01-01 10:00:59.999999', '2026-01-01 10:00:59.999999', 'a'), "
            "(2, '1960-06-30 23:59:59.123456', '2001-02-03 04:05:06.789012', 'b'), (3, NULL, NULL, 'c'), "
            "(4, '2026-12-31 23:59:59.5', '2026-12-31 23:59:59.555555', 'd')",
        ],
        "cut in the batch": [  # rows before and after the cut in one batch
            "SET SESSION time_zone = '+00:00'",
            "UPDATE t SET at = '2027-07-07 07:07:07.777777', ts = '2027-07-07 07:07:07.777777' WHERE id = 4",
            "INSERT INTO t VALUES (5, '2028-01-01 00:00:00.654321', '2028-01-01 00:00:00.654321', 'e')",
            "ALTER TABLE t MODIFY at DATETIME(0), MODIFY ts TIMESTAMP(2) NULL",
            "INSERT INTO t VALUES (6, '2029-01-01 00:00:01', '2029-01-01 00:00:01.25', 'f')",
            "UPDATE t SET name = 'b2' WHERE id = 2",
        ],
        "later batch": ["UPDATE t SET name = 'a2' WHERE id = 1", "INSERT INTO t VALUES (7, NULL, NULL, 'g')"],
    })


def test_varchar_shortened_in_a_non_strict_session_cuts_longer_values(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                                      spark: Any, sf: Any) -> None:
    """sql_mode='': MySQL cuts stored values longer than the new length (characters, not bytes), with a warning."""
    _rounds(mariadb, fresh_db, tmp_path, spark, sf, ["t"], {
        "before": [
            "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(12) CHARACTER SET utf8mb4, note VARCHAR(5))",
            "INSERT INTO t VALUES (1, 'abcdefghijkl', 'xy'), (2, 'abc', NULL), (3, 'ÄÖÜäöüß 😀xyz', 'abcde'), "
            "(4, NULL, 'ab')",
        ],
        "cut in the batch": [  # rows before and after the ALTER in one batch
            "UPDATE t SET name = 'zyxwvutsrq' WHERE id = 2",
            "SET SESSION sql_mode = ''",
            "ALTER TABLE t MODIFY name VARCHAR(4) CHARACTER SET utf8mb4, MODIFY note VARCHAR(2)",
            "INSERT INTO t VALUES (5, 'klmn', 'ok')",
            "UPDATE t SET note = 'n' WHERE id = 1",
        ],
        "later batch": ["UPDATE t SET note = 'q' WHERE id = 3", "INSERT INTO t VALUES (6, 'ab', 'cd')"],
    })
