"""Rows changed with no row event: `cdc run` repairs the tables by itself (partition maintenance, statements).

Partition maintenance (`ALTER TABLE ... TRUNCATE PARTITION`, `DROP PARTITION`, `EXCHANGE PARTITION ... WITH
TABLE`, MariaDB's `CONVERT PARTITION ... TO TABLE` / `CONVERT TABLE ... TO PARTITION`) reaches the binlog as the
statement alone: the rows it deletes or moves are in no row event. Time-partitioned tables whose old partitions
are dropped (or exchanged into an archive table) are a common retention scheme, so this is not a corner. So does
a row change made in a session whose binlog_format is STATEMENT (pt-table-checksum's way, or an application's):
its SQL text is in the binlog, its rows are not.

Real MariaDB -> `cdc run --until-now` (snapshot, tail, ship, spark-merge, snowflake-apply on fakesnow) -> those
statements with row changes around them -> `cdc run --until-now` again: tail flags the tables, the run
re-snapshots them online by itself, and the lake and Snowflake equal SELECT * of every table, row for row;
`cdc status` then flags nothing and `cdc verify` says OK.
"""

from __future__ import annotations

import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.spark import read_lake_table
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import cdc_run, replicated, write_config
from tests.snowflake.stand_in import rows

DB = "parts"
# Partitioned by the first column of the primary key, as MySQL requires of a partitioned table's unique keys.
EVENTS = ("CREATE TABLE events (id INT NOT NULL, note VARCHAR(40), PRIMARY KEY (id)) "
          "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200), "
          "PARTITION p2 VALUES LESS THAN (300), PARTITION p3 VALUES LESS THAN (400), "
          "PARTITION pmax VALUES LESS THAN MAXVALUE)")
TABLES = ("events", "archive", "loose", "moved_in", "hist", "plain")
HIST = ("CREATE TABLE hist (id INT NOT NULL, note VARCHAR(40), PRIMARY KEY (id)) "
        "PARTITION BY RANGE (id) (PARTITION a VALUES LESS THAN (100))")


@pytest.fixture
def source(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,  # noqa: F811
           snowflake_env: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(EVENTS, database=DB)
    # The archive a retention job exchanges an old partition into: the same columns, not partitioned.
    server.execute("CREATE TABLE archive (id INT NOT NULL, note VARCHAR(40), PRIMARY KEY (id))", database=DB)
    server.execute("CREATE TABLE moved_in (id INT NOT NULL, note VARCHAR(40), PRIMARY KEY (id))", database=DB)
    values = ", ".join(f"({i}, 'n{i}')" for i in range(1, 500, 3))
    server.execute(f"INSERT INTO events VALUES {values}", database=DB)
    # Ids of p2's range (200-299) that events does not hold: EXCHANGE checks that every row fits the partition.
    server.execute("INSERT INTO archive VALUES (251, 'archived before'), (252, 'archived too')", database=DB)
    server.execute("INSERT INTO moved_in VALUES (450, 'belongs to pmax'), (460, 'pmax too')", database=DB)
    # MariaDB's CONVERT TABLE ... TO PARTITION: incoming's rows become hist's partition b, and incoming is gone.
    server.execute(HIST, database=DB)
    server.execute("CREATE TABLE incoming (id INT NOT NULL, note VARCHAR(40), PRIMARY KEY (id))", database=DB)
    server.execute("INSERT INTO hist VALUES (7, 'hist a')", database=DB)
    server.execute("CREATE TABLE plain (id INT NOT NULL, note VARCHAR(40), PRIMARY KEY (id))", database=DB)
    server.execute("INSERT INTO plain VALUES (1, 'one'), (2, 'two'), (3, 'three')", database=DB)
    server.execute("INSERT INTO incoming VALUES (150, 'incoming'), (160, 'incoming too')", database=DB)
    server.execute("CREATE DATABASE cdc")  # the default watermark table, cdc.watermarks
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    return {"server": server, "config": config, "state": tmp_path / "state"}


def _source(server: Any, table: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in server.execute(f"SELECT id, note FROM `{table}`", database=DB))


def _lake(state: Path, table: str) -> list[tuple[Any, ...]] | None:
    lake = read_lake_table(state / "lake", DB, table)
    return None if lake is None else sorted((r["id"], r["note"]) for r in lake.rows)


def _snowflake(sf: Any, table: str) -> list[tuple[Any, ...]]:
    return sorted(rows(sf, f'SELECT "ID", "NOTE" FROM "{table.upper()}"'))


def _status(config: Path) -> dict[str, Any]:
    done = subprocess.run(cdc_argv(config, "status", "--offline", "--json"), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_rows_changed_with_no_row_event_are_repaired_by_cdc_run(source: dict[str, Any], sf: Any) -> None:  # noqa: F811
    server, config, state = source["server"], source["config"], source["state"]
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    for table in ("events", "archive", "moved_in", "hist", "incoming", "plain"):
        assert _snowflake(sf, table) == _source(server, table), table

    run_sql = lambda sql: server.execute(sql, database=DB)  # noqa: E731
    run_sql("UPDATE events SET note = 'changed before' WHERE id IN (4, 301)")
    run_sql("ALTER TABLE events TRUNCATE PARTITION p0")  # ids 1-99: gone, no row event
    run_sql("INSERT INTO events VALUES (5, 'p0 again')")
    run_sql("ALTER TABLE events DROP PARTITION p1")  # ids 100-199: gone with the partition
    run_sql("ALTER TABLE events EXCHANGE PARTITION p2 WITH TABLE archive")  # 200-299 <-> 251, 252 (swapped)
    run_sql("DELETE FROM archive WHERE id = 202")
    run_sql("ALTER TABLE events CONVERT PARTITION p3 TO TABLE loose")  # 300-399 leave for a new table
    run_sql("ALTER TABLE events REORGANIZE PARTITION pmax INTO (PARTITION p4 VALUES LESS THAN (500), "
            "PARTITION pmax VALUES LESS THAN MAXVALUE)")  # moves rows between partitions, changes none
    run_sql("ALTER TABLE events EXCHANGE PARTITION p4 WITH TABLE moved_in")  # 400-499 <-> 450, 460
    run_sql("UPDATE events SET note = 'changed after' WHERE id = 460")
    run_sql("ALTER TABLE hist CONVERT TABLE incoming TO PARTITION b VALUES LESS THAN (200)")
    with server.connect() as conn, conn.cursor() as cursor:  # one session logging its changes as SQL text
        cursor.execute("SET SESSION binlog_format = 'STATEMENT'")
        cursor.execute(f"UPDATE `{DB}`.plain SET note = 'as text' WHERE id = 1")
        cursor.execute(f"DELETE FROM {DB}.plain WHERE id = 2")
        cursor.execute(f"USE `{DB}`")
        cursor.execute("/* app */ INSERT INTO plain (id, note) VALUES (4, 'four')")
        conn.commit()
    expected = {table: _source(server, table) for table in TABLES}
    assert expected["loose"] and (251, "archived before") in expected["events"] and len(expected["archive"]) > 30

    code, lines, err = cdc_run(config, "--until-now")
    assert code == 0, err
    for table in TABLES:
        assert _lake(state, table) == expected[table], table
        assert _snowflake(sf, table) == expected[table], table
    assert _lake(state, "incoming") in ([], None) and _snowflake(sf, "incoming") == []  # as after a DROP TABLE
    status = _status(config)
    assert status["needs_resnapshot"] == [] and status["resnapshot"]["status"] == "done", status
    assert "started by cdc run" in err
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _repaired(config: Path) -> None:
    """The next `cdc run --until-now` repairs what was flagged: nothing stays flagged, and verify says OK."""
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    assert _status(config)["needs_resnapshot"] == []
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_alter_ignore_is_repaired_by_cdc_run(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str],
                                             bucket: str, snowflake_env: dict[str, str], sf: Any) -> None:  # noqa: F811
    """MariaDB's `ALTER IGNORE TABLE`: adding a UNIQUE key deletes the rows that duplicate it (the first one kept),
    and a type change that a strict session refuses converts the values instead (as without strict mode); neither
    writes a row event. The tables are flagged and `cdc run` re-reads them."""
    server = mariadb_factory()
    config = replicated(server, "ign", [
        "CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(40), n INT)",
        "INSERT INTO people VALUES (1, 'a@x', 1), (2, 'a@x', 2), (3, 'b@x', 3), (4, 'b@x', 4), (5, NULL, 5), "
        "(6, NULL, 6)",
        "CREATE TABLE amounts (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO amounts VALUES (1, '12'), (2, 'x7'), (3, NULL)",
        "CREATE TABLE small (id INT PRIMARY KEY, n INT)", "INSERT INTO small VALUES (1, 300), (2, 5)",
    ], tmp_path, aws_env, bucket)

    server.execute("ALTER IGNORE TABLE ign.people ADD UNIQUE KEY (email)")
    server.execute("ALTER IGNORE TABLE ign.amounts MODIFY v INT")
    server.execute("ALTER IGNORE TABLE ign.small MODIFY n TINYINT")  # the strict session's refusal: a clip instead
    expected = {t: sorted(tuple(r) for r in server.execute(f"SELECT * FROM ign.{t}"))
                for t in ("people", "amounts", "small")}
    assert expected["small"] == [(1, 127), (2, 5)], expected
    assert expected["people"] == [(1, "a@x", 1), (3, "b@x", 3), (5, None, 5), (6, None, 6)], expected
    assert expected["amounts"] == [(1, 12), (2, 0), (3, None)], expected
    _repaired(config)
    assert sorted(rows(sf, 'SELECT * EXCLUDE ("_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP") FROM "PEOPLE"')) == \
        expected["people"]
    assert sorted(rows(sf, 'SELECT "ID", "V" FROM "AMOUNTS"')) == expected["amounts"]
    assert sorted(rows(sf, 'SELECT "ID", "N" FROM "SMALL"')) == expected["small"]


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_partial_row_images_of_one_session_are_repaired_by_cdc_run(
        image: str, tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,
        snowflake_env: dict[str, str], sf: Any) -> None:  # noqa: F811
    """The server logs FULL images (check-binlog and tail require it), but one session sets binlog_row_image MINIMAL
    or NOBLOB for itself: its UPDATE's after image lacks the columns it did not set (MINIMAL: even the key), its
    INSERT the ones it left to their DEFAULT, its DELETE all but the key. Taking the missing columns as NULL
    corrupted the lake and stopped snowflake-apply; now nothing of such an event is written, the table is flagged,
    and `cdc run` re-reads it."""
    server = mariadb_factory()
    config = replicated(server, "img", [
        "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10) NOT NULL DEFAULT 'dflt', b INT, c TEXT)",
        "INSERT INTO t VALUES (1, 'one', 1, 'x'), (2, 'two', 2, 'y'), (3, 'three', 3, 'z')",
    ], tmp_path, aws_env, bucket)
    with server.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"SET SESSION binlog_row_image = '{image}'")
        cursor.execute("UPDATE img.t SET b = 20 WHERE id = 2")
        cursor.execute("DELETE FROM img.t WHERE id = 3")
        cursor.execute("INSERT INTO img.t (id, b) VALUES (4, 4)")
        conn.commit()
    server.execute("UPDATE img.t SET c = 'full again' WHERE id = 1")  # another session: FULL images
    _repaired(config)
    expected = sorted(tuple(r) for r in server.execute("SELECT * FROM img.t"))
    assert expected == [(1, "one", 1, "full again"), (2, "two", 20, "y"), (4, "dflt", 4, None)]
    assert sorted(rows(sf, 'SELECT "ID", "A", "B", "C" FROM "T"')) == expected


def test_a_generated_columns_new_expression_is_repaired_by_cdc_run(
        tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,
        snowflake_env: dict[str, str], sf: Any) -> None:  # noqa: F811
    """`MODIFY` or `CHANGE` of a generated column (a new expression, STORED or VIRTUAL) makes MySQL compute it
    again in every row, with no row event: the lake and Snowflake kept the old values. The table is flagged and
    `cdc run` re-reads it."""
    server = mariadb_factory()
    config = replicated(server, "gen", [
        "CREATE TABLE orders (id INT PRIMARY KEY, price DECIMAL(10,2), qty INT, "
        "total DECIMAL(12,2) AS (price * qty) STORED, label VARCHAR(30) AS (CONCAT('#', id)) VIRTUAL)",
        "INSERT INTO orders (id, price, qty) VALUES (1, 2.50, 4), (2, 10.00, 1), (3, NULL, 2)",
        "CREATE TABLE plain (id INT PRIMARY KEY, n INT)", "INSERT INTO plain VALUES (1, 1)",
    ], tmp_path, aws_env, bucket)
    server.execute("ALTER TABLE gen.orders MODIFY total DECIMAL(12,2) AS (price * qty * 2) STORED")
    server.execute("ALTER TABLE gen.orders CHANGE label tag VARCHAR(30) AS (CONCAT('order ', id)) VIRTUAL")
    server.execute("ALTER TABLE gen.plain MODIFY n BIGINT")  # a widening: converted downstream, not re-read
    server.execute("INSERT INTO gen.orders (id, price, qty) VALUES (4, 1.25, 8)")
    _repaired(config)
    expected = sorted(tuple(r) for r in server.execute("SELECT id, price, qty, total, tag FROM gen.orders"))
    assert expected[0][3:] == (Decimal("20.00"), "order 1"), expected
    assert sorted(rows(sf, 'SELECT "ID", "PRICE", "QTY", "TOTAL", "TAG" FROM "ORDERS"')) == expected
    reread = [t["table"] for t in _status(config)["resnapshot"]["tables"]]
    assert reread == ["gen.orders"], reread
