"""What the `cdc run` tests share: a source database with awkward values, a cdc.toml, `cdc run` as a user runs it.

The source has two tables with the values most often broken on the way (quotes, the text 'None', '',
NULL, emoji, DECIMAL digits, DATETIME(6) microseconds, BIGINT UNSIGNED past 2^63), so "Snowflake
equals SELECT *" is a statement about exact values, not only about row counts.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "customers": ("ID", "NAME", "BALANCE", "SEEN"),
    "orders": ("ID", "CUSTOMER_ID", "NOTE"),
}
NAMES = ["O'Brien", 'say "hi"', "None", "", None, "emoji 🎉", "back\\slash", "line\nbreak"]


def create_source(mariadb: MariaDB, db: str, customers: int = 12) -> None:
    mariadb.execute("CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(100), balance DECIMAL(18,4), "
                    "seen DATETIME(6))", database=db)
    mariadb.execute("CREATE TABLE orders (id BIGINT UNSIGNED PRIMARY KEY, customer_id INT, note TEXT)", database=db)
    for key in range(1, customers + 1):
        insert_customer(mariadb, db, key)
        mariadb.execute("INSERT INTO orders VALUES (%s, %s, %s)", (18446744073709551615 - key, key, f"order {key}"),
                        database=db)


def insert_customer(mariadb: MariaDB, db: str, key: int) -> None:
    mariadb.execute("INSERT INTO customers VALUES (%s, %s, %s, %s)",
                    (key, NAMES[key % len(NAMES)], f"{key * 1000 + 1}.{key:04d}", f"2026-01-{key % 28 + 1:02d} "
                     f"07:00:01.{key:06d}"), database=db)


def more_writes(mariadb: MariaDB, db: str) -> None:
    """Inserts, updates, deletes, a primary-key change, and a key deleted then re-inserted, over both tables."""
    insert_customer(mariadb, db, 50)
    insert_customer(mariadb, db, 51)
    mariadb.execute("UPDATE customers SET name = 'Ünïcødé ''q''', balance = -0.0001 WHERE id = 2", database=db)
    mariadb.execute("UPDATE customers SET id = 100 WHERE id = 3", database=db)  # the old key must disappear
    mariadb.execute("DELETE FROM customers WHERE id IN (4, 5)", database=db)
    mariadb.execute("DELETE FROM customers WHERE id = 6", database=db)
    insert_customer(mariadb, db, 6)
    mariadb.execute("UPDATE orders SET note = NULL WHERE customer_id < 4", database=db)
    mariadb.execute("DELETE FROM orders WHERE customer_id = 7", database=db)


def source_rows(mariadb: MariaDB, db: str, table: str) -> list[tuple[Any, ...]]:
    columns = ", ".join(f"`{c.lower()}`" for c in TABLES[table])
    return mariadb.execute(f"SELECT {columns} FROM `{table}` ORDER BY id", database=db)


def target_rows(sf: Any, table: str) -> list[tuple[Any, ...]]:
    cursor = sf.cursor()
    columns = ", ".join(f'"{c}"' for c in TABLES[table])
    cursor.execute(f'SELECT {columns} FROM "{table.upper()}" ORDER BY "ID"')
    return list(cursor.fetchall())


def assert_replicated(mariadb: MariaDB, db: str, sf: Any) -> None:
    """Snowflake equals SELECT * of MySQL, row for row, value for value (Decimal == Decimal, datetime == datetime)."""
    for table in TABLES:
        source = source_rows(mariadb, db, table)
        assert source, f"{db}.{table} is empty: the test would prove nothing"
        assert target_rows(sf, table) == source, table


def write_config(path: Path, mariadb: MariaDB, db: str, moto_env: dict[str, str], bucket: str, state: Path) -> Path:
    path.write_text(f"""\
state_dir = "{state}"

[mysql]
host = "{mariadb.host}"
port = {mariadb.port}
user = "root"
databases = ["{db}"]

[aws]
region = "{moto_env['AWS_REGION']}"
endpoint_url = "{moto_env['AWS_ENDPOINT_URL']}"
bucket = "{bucket}"
prefix = "lake"

[spark]
master = "local[2]"
driver_memory = "1g"

[snowflake]
connection = "fake"
""", encoding="utf-8")
    return path


def cdc_run(config: Path, *args: str, timeout: float = 300,
            umask: int | None = None) -> tuple[int, list[dict[str, Any]], str]:
    """`cdc run --json` as a subprocess: exit code, the JSON lines of stdout, stderr. With `umask`, started under
    it (its JVM too), as a user's shell with a permissive umask starts it."""
    done = subprocess.run([sys.executable, "-m", "cdc", "run", "--config", str(config), "--json", *args], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=timeout,
                          preexec_fn=None if umask is None else functools.partial(os.umask, umask))
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def replicated(server: Any, db: str, setup: list[str], tmp_path: Path, aws_env: dict[str, str],
                bucket: str) -> Path:
    """`db` made by `setup` beside the watermark table, run once through `cdc run --until-now`; the config."""
    server.execute(f"CREATE DATABASE {db}")
    for statement in setup:
        server.execute(statement, database=db)
    server.execute("CREATE DATABASE cdc")
    server.execute("CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL)")
    config = write_config(tmp_path / "cdc.toml", server, db, aws_env, bucket, tmp_path / "state")
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    return config


class Background:
    """`cdc run --json ...` running in the background; its stdout JSON lines collected as they come."""

    def __init__(self, config: Path, *args: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "cdc", "run", "--config", str(config), "--json", *args],
                                        cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def has(self, **fields: Any) -> bool:
        return any(all(line.get(k) == v for k, v in fields.items()) for line in list(self.lines))

    def children(self) -> list[int]:
        """Pids whose parent is the run (the Spark JVM once a SparkSession starts)."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                found.append(int(stat.parent.name))
        return found

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        code = self.process.wait(timeout)
        self._reader.join(10)
        assert self.process.stderr is not None
        return code, self.process.stderr.read()
