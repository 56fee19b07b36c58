"""MariaDB sequences, invisible columns and INET4/INET6/UUID columns in a captured database, end to end.

A sequence (`CREATE SEQUENCE`, an id generator behind `DEFAULT (NEXT VALUE FOR s)`) is a one-row object that
information_schema lists as TABLE_TYPE 'SEQUENCE' and the binlog writes to like a table: every NEXTVAL that
passes its cache, SETVAL and ALTER SEQUENCE is a rows event on it. It is not data to replicate. An INVISIBLE
column is left out of `SELECT *` but is a column of the table, of its rows events and of information_schema.
INET4, INET6 and UUID columns are bytes in the binlog and text in a SELECT: both ways give the text
(cdc.rows.addresses; every shape against the server: tests/capture/test_addresses.py).

Real MariaDB -> `cdc run --until-now` -> sequence use, DDL and row changes -> `cdc run --until-now` again: the
run succeeds, the lake and Snowflake equal the table (invisible and address columns included) row for row, no sequence
reaches the lake or Snowflake, and `cdc verify` says OK.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from cdc.spark import read_lake_table
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import cdc_run, replicated
from tests.snowflake.stand_in import rows

DB = "seqs"
COLUMNS = ("id", "note", "version", "shelf", "ip", "ip4", "ref")


def test_sequences_stay_out_and_invisible_columns_arrive(tmp_path: Path, mariadb_factory: Any,
                                                         aws_env: dict[str, str], bucket: str,  # noqa: F811
                                                         snowflake_env: dict[str, str], sf: Any) -> None:  # noqa: F811
    server = mariadb_factory()
    config = replicated(server, DB, [
        "CREATE SEQUENCE ids START WITH 100 CACHE 2",
        "CREATE TABLE orders (id BIGINT PRIMARY KEY DEFAULT (NEXT VALUE FOR ids), note VARCHAR(20), "
        "version INT INVISIBLE DEFAULT 1, ip INET6, ip4 INET4, ref UUID DEFAULT UUID())",
        "INSERT INTO orders (note, ip, ip4) VALUES ('a', '::ffff:10.1.2.3', '10.1.2.3'), ('b', 'fe80::1', NULL)",
        # Keyed by a UUID and an INET6 (device inventories, sessions): merged and verified by their text.
        "CREATE TABLE devices (ref UUID NOT NULL DEFAULT UUID(), ip INET6 NOT NULL, n INT, PRIMARY KEY (ref, ip))",
        "INSERT INTO devices (ip, n) SELECT CONCAT('2001:db8::', HEX(seq)), seq FROM seq_1_to_40",
    ], tmp_path, aws_env, bucket)

    for statement in (
        "INSERT INTO orders (note) VALUES ('c'), ('d'), ('e')",  # past the cache: rows events on the sequence
        "SELECT NEXTVAL(ids)", "SELECT SETVAL(ids, 1000)",
        "UPDATE orders SET version = 2, ip = '2001:db8::8:800:200c:417a', ip4 = '0.0.0.0' WHERE note = 'a'",
        "ALTER TABLE orders ADD COLUMN shelf INT INVISIBLE DEFAULT 9",
        "ALTER SEQUENCE ids RESTART WITH 5000",
        "INSERT INTO orders (note, version, shelf, ip, ref) VALUES ('f', 3, 4, '::', '00000000-0000-0000-0000-000000000000')",
        "CREATE SEQUENCE spare", "SELECT NEXTVAL(spare)", "DROP SEQUENCE spare",
        "DELETE FROM orders WHERE note = 'b'",
        "UPDATE devices SET n = -n WHERE n % 3 = 0", "DELETE FROM devices WHERE n % 5 = 0",
        "UPDATE devices SET ip = '::1' WHERE n = 7",  # a key change
    ):
        server.execute(statement, database=DB)
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err

    listed = ", ".join(COLUMNS)
    expected = sorted(tuple(r) for r in server.execute(f"SELECT {listed} FROM orders", database=DB))
    assert [r[:2] for r in expected] == [(100, "a"), (102, "c"), (103, "d"), (104, "e"), (5000, "f")], expected
    lake = read_lake_table(tmp_path / "state" / "lake", DB, "orders")
    assert lake is not None and sorted(tuple(r[c] for c in COLUMNS) for r in lake.rows) == expected
    assert sorted(rows(sf, f'SELECT {", ".join(c.upper() for c in COLUMNS)} FROM "ORDERS"')) == expected
    devices = sorted(tuple(r) for r in server.execute("SELECT ref, ip, n FROM devices", database=DB))
    lake = read_lake_table(tmp_path / "state" / "lake", DB, "devices")
    assert len(devices) == 32 and lake is not None
    assert sorted((r["ref"], r["ip"], r["n"]) for r in lake.rows) == devices
    assert sorted(rows(sf, 'SELECT "REF", "IP", "N" FROM "DEVICES"')) == devices
    for sequence in ("ids", "spare"):
        assert read_lake_table(tmp_path / "state" / "lake", DB, sequence) is None
        assert rows(sf, f"SELECT COUNT(*) FROM information_schema.tables WHERE table_name = '{sequence.upper()}'") \
            == [(0,)]
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
