"""Tables whose rows go whole with one statement and no row event of theirs, end to end.

`DROP DATABASE` removes every table in it; reloading a database from a dump (`DROP DATABASE shop; CREATE DATABASE
shop;` then the dump) is the everyday case. MariaDB's `CREATE OR REPLACE TABLE` drops the table it replaces. Each
such table must end as after its own `DROP TABLE`: the lake and Snowflake lose the old rows, and a table created
again under the same name holds only its new ones.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.multiset_rig import snowflake_rows, source_rows
from tests.pipeline.run_rig import cdc_run, write_config
from tests.snowflake.stand_in import rows

DB = "shop"


def test_a_database_dropped_and_reloaded_ends_exact(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str],
                                                    bucket: str, snowflake_env: dict[str, str], sf: Any) -> None:
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {DB}")
    server.execute("CREATE DATABASE other")
    for db in (DB, "other"):
        server.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, note VARCHAR(20))")
        server.execute(f"INSERT INTO {db}.orders VALUES (1, 'old one'), (2, 'old two'), (3, 'old three')")
    server.execute(f"CREATE TABLE {DB}.gone (id INT PRIMARY KEY)")
    server.execute(f"INSERT INTO {DB}.gone VALUES (1), (2)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    server.execute(f"INSERT INTO {DB}.orders VALUES (4, 'tailed')")  # a table tail has seen too
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    server.execute(f"DROP DATABASE {DB}")  # the reload: orders comes back with other rows, gone does not
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    server.execute(f"INSERT INTO {DB}.orders VALUES (2, 'reloaded'), (5, 'new')")
    server.execute("DROP DATABASE IF EXISTS `other`")  # not captured: nothing of it is touched
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    schema, expected = source_rows(server, DB, "orders")
    assert snowflake_rows(sf, schema) == expected
    assert rows(sf, 'SELECT COUNT(*) FROM "GONE"') == [(0,)]
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_create_or_replace_table_replaces_the_rows(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str],
                                                   bucket: str, snowflake_env: dict[str, str], sf: Any) -> None:
    """MariaDB's `CREATE OR REPLACE TABLE` drops the table it replaces, rows and all, with no row event (an ETL
    script's way to rebuild a table), also as `CREATE OR REPLACE TABLE ... SELECT`."""
    server = mariadb_factory()
    server.execute(f"CREATE DATABASE {DB}")
    for table in ("stats", "report"):
        server.execute(f"CREATE TABLE {DB}.{table} (id INT PRIMARY KEY, n INT)")
        server.execute(f"INSERT INTO {DB}.{table} VALUES (1, 10), (2, 20), (3, 30)")
    config = write_config(tmp_path / "cdc.toml", server, DB, aws_env, bucket, tmp_path / "state")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    server.execute(f"UPDATE {DB}.stats SET n = 11 WHERE id = 1")  # in the same merge input as the replace
    server.execute(f"CREATE OR REPLACE TABLE {DB}.stats (id INT PRIMARY KEY, n INT, note VARCHAR(10))")
    server.execute(f"INSERT INTO {DB}.stats VALUES (2, 200, 'rebuilt')")
    server.execute(f"CREATE OR REPLACE TABLE {DB}.report (id INT PRIMARY KEY, n INT) "
                   f"SELECT id, n * 2 AS n FROM {DB}.stats")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    for table in ("stats", "report"):
        schema, expected = source_rows(server, DB, table)
        assert snowflake_rows(sf, schema) == expected, table
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr

