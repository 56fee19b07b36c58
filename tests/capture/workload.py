"""A table with every column type of docs/formats.md and a seeded, hostile, randomized workload.

Shared by the tail and snapshot tests: create_all_types_table() + run_workload() produce the
changes, expected_rows() is the oracle (what a SELECT of the table encodes to, keyed by primary key).

    conn = mariadb.connect()
    create_all_types_table(conn, db)
    run_workload(conn, db, seed=7, transactions=60)
    assert replay(changelog_lines, db, "all_types") == expected_rows(conn, db, "all_types")
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pymysql

from cdc.source.schema_reads import read_table_schema
from cdc.values import encode_row

TABLE = "all_types"

# Column -> SQL type. Every row of the value table in docs/formats.md is covered at least once.
COLUMNS: dict[str, str] = {
    "c_tinyint": "TINYINT",
    "c_tinyint_u": "TINYINT UNSIGNED",
    "c_smallint": "SMALLINT",
    "c_mediumint": "MEDIUMINT",
    "c_mediumint_u": "MEDIUMINT UNSIGNED",
    "c_int": "INT",
    "c_int_u": "INT UNSIGNED",
    "c_bigint": "BIGINT",
    "c_bigint_u": "BIGINT UNSIGNED",
    "c_decimal": "DECIMAL(20,4)",
    "c_decimal_big": "DECIMAL(65,30)",
    "c_float": "FLOAT",
    "c_double": "DOUBLE",
    "c_date": "DATE",
    "c_datetime": "DATETIME",
    "c_datetime6": "DATETIME(6)",
    "c_timestamp": "TIMESTAMP NULL DEFAULT NULL",
    "c_timestamp3": "TIMESTAMP(3) NULL DEFAULT NULL",
    "c_time": "TIME",
    "c_time2": "TIME(2)",
    "c_time6": "TIME(6)",
    "c_year": "YEAR",
    "c_char": "CHAR(10)",
    "c_varchar": "VARCHAR(300)",
    "c_text": "TEXT",
    "c_latin1": "VARCHAR(40) CHARACTER SET latin1",
    "c_binary": "BINARY(4)",
    "c_varbinary": "VARBINARY(64)",
    "c_blob": "BLOB",
    "c_bit": "BIT(10)",
    "c_bit64": "BIT(64)",
    "c_enum": "ENUM('a','b','c''d')",
    "c_set": "SET('x','y','z')",
    "c_json": "JSON",
    "c_point": "POINT",
}

HOSTILE_TEXT = [
    "O'Brien", 'say "hi"', "back\\slash", "nul\x00byte", "emoji 🎉🐍", "", " ", "trailing  ",
    "None", "null", "NULL", "\n\r\t", "ünïcödé", "'; DROP TABLE x; --", "a" * 300,
]
HOSTILE_BYTES = [b"", b"\x00", b"\xff\xfe\x00\x80", b"\x00\x00\x00\x00", b"'\\\"", "🎉".encode(), b"\xc3\x28"]


def create_all_types_table(conn: pymysql.Connection, db: str, table: str = TABLE) -> None:
    """Create `db`.`table` with an INT primary key `id` and one column per type in COLUMNS."""
    columns = ",\n  ".join(f"`{name}` {sql}" for name, sql in COLUMNS.items())
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.`{table}` (\n  `id` INT NOT NULL PRIMARY KEY,\n  {columns}\n)")


def _value(rng: random.Random, name: str) -> Any:
    """A random value for one column: often an edge case, sometimes NULL."""
    if rng.random() < 0.12:
        return None
    pick = rng.choice
    generators: dict[str, Any] = {
        "c_tinyint": lambda: pick([-128, 127, 0, rng.randint(-128, 127)]),
        "c_tinyint_u": lambda: pick([0, 255, rng.randint(0, 255)]),
        "c_smallint": lambda: pick([-32768, 32767, rng.randint(-32768, 32767)]),
        "c_mediumint": lambda: pick([-8388608, 8388607, rng.randint(-8388608, 8388607)]),
        "c_mediumint_u": lambda: pick([0, 16777215, rng.randint(0, 16777215)]),
        "c_int": lambda: pick([-2147483648, 2147483647, rng.randint(-2147483648, 2147483647)]),
        "c_int_u": lambda: pick([0, 4294967295, rng.randint(0, 4294967295)]),
        "c_bigint": lambda: pick([-(2**63), 2**63 - 1, rng.randint(-(2**63), 2**63 - 1)]),
        "c_bigint_u": lambda: pick([0, 2**64 - 1, 2**63, rng.randint(0, 2**64 - 1)]),
        "c_decimal": lambda: pick([Decimal("-12.3400"), Decimal("0"), Decimal("9999999999999999.9999"),
                                   Decimal(rng.randint(-10**19, 10**19)) / 10000]),
        "c_decimal_big": lambda: pick([Decimal("-0.000000000000000000000000000001"),
                                       Decimal("12345678901234567890123456789012345.123456789012345678901234567890")]),
        "c_float": lambda: pick([1.1, -0.0, 3.4e38, 1e-30, 0.1, rng.uniform(-1e6, 1e6)]),
        "c_double": lambda: pick([0.1, 1.7976931348623157e308, -2.2250738585072014e-308, rng.uniform(-1e12, 1e12)]),
        "c_date": lambda: pick(["0000-00-00", "1000-01-01", "9999-12-31", "2026-11-22", "2026-00-00", "2026-05-00"]),
        "c_datetime": lambda: pick(["0000-00-00 00:00:00", "1000-01-01 00:00:00", "9999-12-31 23:59:59",
                                    "2026-11-22 07:00:01", "2026-00-00 00:00:00"]),
        "c_datetime6": lambda: pick(["0000-00-00 00:00:00.000000", "2026-11-22 07:00:01.123456",
                                     "1999-12-31 23:59:59.999999", "2026-01-01 00:00:00.000001"]),
        "c_timestamp": lambda: pick(["0000-00-00 00:00:00", "1970-01-01 00:00:01", "2038-01-19 03:14:07",
                                     "2026-03-29 01:30:00"]),
        "c_timestamp3": lambda: pick(["0000-00-00 00:00:00", "2026-11-22 07:00:01.123", "1970-01-01 00:00:01.001"]),
        "c_time": lambda: pick(["-838:59:59", "838:59:59", "00:00:00", "-00:00:01", "25:00:00"]),
        "c_time2": lambda: pick(["-01:30:00.25", "-00:00:00.01", "01:30:00.25", "-838:59:58.99"]),
        "c_time6": lambda: pick(["-01:30:00.250000", "-00:00:00.000001", "12:34:56.789012", "-838:59:58.999999"]),
        "c_year": lambda: pick([0, 1901, 2155, 2026]),
        "c_char": lambda: pick(["", "x", "O'Brien", "🎉", "abcdefghij"]),
        "c_varchar": lambda: pick(HOSTILE_TEXT),
        "c_text": lambda: pick(HOSTILE_TEXT + ["long " * 2000]),
        "c_latin1": lambda: pick(["café", "€uro", "plain", "", "O'Brien"]),
        "c_binary": lambda: pick([b"\x00\x00\x00\x00", b"ab", b"\xff", b"abcd", b"\x00a\x00\x00"]),
        "c_varbinary": lambda: pick(HOSTILE_BYTES),
        "c_blob": lambda: pick(HOSTILE_BYTES + [bytes(rng.randrange(256) for _ in range(300))]),
        "c_bit": lambda: pick([0, 1, 1023, 512]),
        "c_bit64": lambda: pick([0, 2**64 - 1, 2**63]),
        "c_enum": lambda: pick(["a", "b", "c'd"]),
        "c_set": lambda: pick(["", "x", "z,x", "x,y,z", "y"]),
        "c_json": lambda: pick(['{"a": 1}', "null", '"str"', "[1, 2.5, true]", '{"k": "O\'Brien", "e": "🎉"}',
                                "{}", "12345678901234567890"]),
        "c_point": lambda: pick([(1.5, -2.25), (0.0, 0.0)]),
    }
    return generators[name]()


def _row_sql(row: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """Placeholders and parameters for one row (POINT needs a function around its values)."""
    placeholders, params = [], []
    for name, value in row.items():
        if name == "c_point" and value is not None:
            placeholders.append("POINT(%s, %s)")
            params.extend(value)
        else:
            placeholders.append("%s")
            params.append(value)
    return placeholders, params


def random_row(rng: random.Random, key: int) -> dict[str, Any]:
    return {"id": key, **{name: _value(rng, name) for name in COLUMNS}}


def insert_row(cur: Any, db: str, table: str, row: dict[str, Any]) -> None:
    placeholders, params = _row_sql(row)
    names = ", ".join(f"`{n}`" for n in row)
    cur.execute(f"INSERT INTO `{db}`.`{table}` ({names}) VALUES ({', '.join(placeholders)})", params)


def update_row(cur: Any, db: str, table: str, key: int, changes: dict[str, Any]) -> None:
    placeholders, params = _row_sql(changes)
    assignments = ", ".join(f"`{n}` = {p}" for n, p in zip(changes, placeholders))
    cur.execute(f"UPDATE `{db}`.`{table}` SET {assignments} WHERE id = %s", [*params, key])


def prepare_session(conn: pymysql.Connection) -> None:
    """Permissive SQL mode (zero and partial-zero dates), UTC, full utf8mb4."""
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
        cur.execute("SET SESSION time_zone = '+00:00'")


def run_workload(
    conn: pymysql.Connection, db: str, table: str = TABLE, *, seed: int = 1, transactions: int = 50,
    first_key: int = 1,
) -> dict[str, int]:
    """Run a seeded randomized workload; return counts of what was committed and rolled back."""
    rng = random.Random(seed)
    prepare_session(conn)
    keys: list[int] = []
    next_key = first_key
    counts = {"commits": 0, "rollbacks": 0, "statements": 0}
    with conn.cursor() as cur:
        for _ in range(transactions):
            cur.execute("BEGIN")
            live = list(keys)
            for _ in range(rng.randint(1, 6)):
                op = rng.random()
                if op < 0.45 or not live:
                    insert_row(cur, db, table, random_row(rng, next_key))
                    live.append(next_key)
                    next_key += 1
                elif op < 0.70:
                    key = rng.choice(live)
                    names = rng.sample(list(COLUMNS), rng.randint(1, 6))
                    update_row(cur, db, table, key, {n: _value(rng, n) for n in names})
                elif op < 0.80:  # primary-key change
                    key = rng.choice(live)
                    cur.execute(f"UPDATE `{db}`.`{table}` SET id = %s WHERE id = %s", (next_key, key))
                    live[live.index(key)] = next_key
                    next_key += 1
                elif op < 0.90:
                    key = rng.choice(live)
                    cur.execute(f"DELETE FROM `{db}`.`{table}` WHERE id = %s", (key,))
                    live.remove(key)
                else:  # a multi-row statement: one rows event with several rows
                    cur.execute(f"UPDATE `{db}`.`{table}` SET c_int = c_int DIV 2 WHERE id %% 3 = %s",
                                (rng.randint(0, 2),))
                counts["statements"] += 1
            if rng.random() < 0.15:
                cur.execute("ROLLBACK")
                counts["rollbacks"] += 1
            else:
                cur.execute("COMMIT")
                keys = live
                counts["commits"] += 1
    return counts


def expected_rows(conn: pymysql.Connection, db: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The oracle: every row as the change log must encode it, keyed by primary-key values (names sorted)."""
    schema = read_table_schema(conn, db, table)
    assert schema is not None, f"table {db}.{table} does not exist"
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        # A SELECT shows FLOAT with 6 significant digits (-399064 for -399063.8125f); widened to DOUBLE it is
        # exact, and cdc.values turns it into the shortest decimal that round-trips the float (-399063.8).
        select = ", ".join(f"`{c.name}` + 0E0 AS `{c.name}`" if c.data_type == "float" else f"`{c.name}`"
                           for c in schema.columns)
        cur.execute(f"SELECT {select} FROM `{db}`.`{table}`")
        rows = cur.fetchall()
    found = {}
    for row in rows:
        encoded = encode_row(schema.columns, row)
        found[tuple(encoded[k] for k in sorted(schema.primary_key))] = encoded
    return found


def replay(lines: list[dict[str, Any]], db: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Apply change-log lines in order to a dict keyed by primary key (what a merge would do)."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for line in lines:
        if line.get("db") != db or line.get("table") != table:
            continue
        op = line["op"]
        if op == "ddl":
            if line["kind"] in ("truncate", "drop"):
                state.clear()
            continue
        if line["before"] is not None:
            state.pop(tuple(line["before"][k] for k in sorted(line["key"])), None)
        if op in ("c", "u", "r"):
            state[tuple(line["key"][k] for k in sorted(line["key"]))] = line["after"]
    return state
