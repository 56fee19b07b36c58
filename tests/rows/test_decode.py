"""Each value the library decodes wrongly, through the real binlog of the session server, against the contract."""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import pytest

from cdc.masking import hash_value
from tests.capture.conftest import binlog_start, changelog_lines, tail_once
from tests.capture.workload import expected_rows
from tests.hash_key import KEY, hmac_hex
from tests.rig import MariaDB

# (column type, SQL literal, the change log's JSON value). Each row is one library pitfall or edge.
CASES: list[tuple[str, str, Any]] = [
    ("BLOB", "''", ""),  # library: '' instead of b''
    ("BLOB", "0x00FF80", "AP+A"),  # invalid UTF-8 stays bytes
    ("SET('x','y')", "''", []),  # library: None
    ("SET('x','y')", "'y,x'", ["x", "y"]),
    ("DATE", "'0000-00-00'", "0000-00-00"),  # library: None
    ("DATE", "'2026-00-00'", "2026-00-00"),  # partial zero date: library None
    ("DATETIME", "'0000-00-00 00:00:00'", "0000-00-00 00:00:00"),
    ("DATETIME(6)", "'2026-05-00 01:02:03.000004'", "2026-05-00 01:02:03.000004"),
    ("DATETIME", "'0005-01-02 03:04:05'", "0005-01-02 03:04:05"),  # strftime would print '5-01-02'
    ("DECIMAL(65,30)", "-12345678901234567890123456789012345.000000000000000000000000000001",
     "-12345678901234567890123456789012345.000000000000000000000000000001"),
    ("DECIMAL(5,5)", "-0.00001", "-0.00001"),
    ("TIMESTAMP NULL", "'0000-00-00 00:00:00'", "0000-00-00T00:00:00Z"),  # library: 1970-01-01
    ("TIMESTAMP(3) NULL", "'2026-03-29 01:30:00.125'", "2026-03-29T01:30:00.125000Z"),
    ("YEAR", "0", 0),  # library: 1900
    ("YEAR", "2155", 2155),
    ("TIME(2)", "'-01:30:00.25'", "-01:30:00.250000"),  # library: -01:30:00.75
    ("TIME(6)", "'-00:00:00.000001'", "-00:00:00.000001"),
    ("TIME", "'-838:59:59'", "-838:59:59"),
    ("TIME(1)", "'-12:00:00.5'", "-12:00:00.500000"),
    ("BIGINT UNSIGNED", "18446744073709551615", 18446744073709551615),
    ("BINARY(4)", "'ab'", "YWIAAA=="),  # padded like a SELECT shows it
    ("VARCHAR(20) CHARACTER SET latin1", "'€uro café'", "€uro café"),  # MySQL latin1 is cp1252
    ("VARCHAR(20)", "'nul\\0🎉'", "nul\x00🎉"),
    ("DECIMAL(10,4)", "-12.34", "-12.3400"),
    ("FLOAT", "1.1", 1.1),
    ("BIT(10)", "b'1000000001'", 513),
    ("ENUM('a','b')", "'b'", "b"),
    ("JSON", "'{\"k\": [1, \"O''Brien\"]}'", '{"k": [1, "O\'Brien"]}'),
]


@pytest.fixture(scope="module")
def decoded(mariadb: MariaDB, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    """One table with a column per case, one row, captured once (time zone of the session not UTC)."""
    db = mariadb.create_database("decode")
    columns = ", ".join(f"c{i} {sql_type}" for i, (sql_type, _, _) in enumerate(CASES))
    values = ", ".join(literal for _, literal, _ in CASES)
    start = binlog_start(mariadb)
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION', time_zone = '+05:30'")
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, {columns})")
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"INSERT INTO `{db}`.t VALUES (1, {values})")
        cur.execute(f"UPDATE `{db}`.t SET id = 2")
        oracle = expected_rows(conn, db, "t")
    state = tmp_path_factory.mktemp("decode")
    # TIMESTAMP must come out in UTC whatever the local time zone of the process reading the binlog.
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        tail_once(mariadb, state, db, start)
    finally:
        if previous is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = previous
        time.tzset()
    return changelog_lines(state), oracle


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{t}={v}" for t, v, _ in CASES])
def test_value_matches_the_contract_and_a_select(decoded: tuple[list[dict[str, Any]], Any], index: int) -> None:
    lines, oracle = decoded
    insert, update = lines[1], lines[2]
    name = f"c{index}"
    assert insert["after"][name] == CASES[index][2]
    assert update["before"][name] == CASES[index][2] and update["after"][name] == CASES[index][2]
    assert oracle[(2,)][name] == CASES[index][2]


def test_hash_value_is_hmac_sha256_of_the_encoded_value() -> None:
    assert hash_value("O'Brien", KEY) == hmac_hex(b"O'Brien")
    assert hash_value(12, KEY) == hmac_hex(b"12")
    assert hash_value(["x", "y"], KEY) == hmac_hex(b'["x","y"]')
    assert hash_value(None, KEY) is None
    # keyed: the plain SHA-256 anyone can compute (and reverse by brute force for e-mails and ids) is not it (#26)
    assert hash_value("O'Brien", KEY) != hashlib.sha256(b"O'Brien").hexdigest()
