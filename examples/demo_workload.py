"""The demo's data: the source article's REGIONS/COUNTRIES example, an ORDERS table, and a steady workload.

The workload is what a busy OLTP schema does to a CDC pipeline: inserts, updates (one in twenty moves a
row to a new primary key), deletes, multi-statement transactions and rollbacks, with values that break
naive pipelines (quotes, backslashes, the string 'None', emoji, SQL-looking text, exact decimals,
microseconds, JSON, SETs, binary).
"""

from __future__ import annotations

import random
import threading
import time
from types import TracebackType
from typing import Any

import pymysql

from tests.rig import MariaDB

REGIONS = [(1, "Europe"), (2, "Americas"), (3, "Asia"), (4, "Middle East and Africa")]
COUNTRIES = [("AR", "Argentina", 2), ("AU", "Australia", 3), ("BE", "Belgium", 1), ("BR", "Brazil", 2),
             ("CA", "Canada", 2), ("CH", "Switzerland", 1), ("CN", "China", 3), ("DE", "Germany", 1)]
HOSTILE = ["O'Brien", "trailing backslash \\", "None", "emoji \U0001F680\U0001F44D", "x'), ('99', 'injected",
           'double "quotes"', "tab\tand\nnewline", ""]
ORDERS_DDL = (
    "CREATE TABLE hr.ORDERS (ORDER_ID BIGINT UNSIGNED PRIMARY KEY, COUNTRY_ID CHAR(2), TOTAL DECIMAL(14,4), "
    "PLACED_AT DATETIME(6), NOTE VARCHAR(200) CHARACTER SET utf8mb4, DOC JSON, "
    "STATUS ENUM('new','paid','shipped'), TAGS SET('gift','express','fragile'), PAYLOAD VARBINARY(64))"
)


def load_example(server: MariaDB) -> None:
    """The source article's schema, with primary keys and a foreign key as a real OLTP schema has."""
    server.execute("CREATE DATABASE IF NOT EXISTS hr CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE hr.REGIONS (REGION_ID INT PRIMARY KEY, REGION_NAME VARCHAR(25))")
    server.execute(
        "CREATE TABLE hr.COUNTRIES (COUNTRY_ID CHAR(2) PRIMARY KEY, COUNTRY_NAME VARCHAR(40), "
        "REGION_ID INT, FOREIGN KEY (REGION_ID) REFERENCES hr.REGIONS (REGION_ID))"
    )
    server.execute(ORDERS_DDL)
    for region in REGIONS:
        server.execute("INSERT INTO hr.REGIONS VALUES (%s, %s)", region)
    for country in COUNTRIES:
        server.execute("INSERT INTO hr.COUNTRIES VALUES (%s, %s, %s)", country)
    with server.connect(autocommit=False) as conn, conn.cursor() as cursor:
        for order_id in range(1, 201):
            cursor.execute(_INSERT, _order(random.Random(order_id), order_id))
        conn.commit()


_INSERT = "INSERT INTO hr.ORDERS VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"


def _order(rng: random.Random, order_id: int) -> tuple[Any, ...]:
    micros = rng.randrange(10**6)
    placed = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} 12:{rng.randint(0, 59):02d}:07.{micros:06d}"
    coupon = rng.choice(['null', '"WELCOME"', '"10% off"'])
    doc = f'{{"items": {rng.randint(1, 9)}, "coupon": {coupon}}}'
    tags = ",".join(t for t in ("gift", "express", "fragile") if rng.random() < 0.4)
    return (order_id, rng.choice(COUNTRIES)[0], f"{rng.randint(0, 10**9)}.{rng.randrange(10**4):04d}", placed,
            rng.choice(HOSTILE), doc, rng.choice(["new", "paid", "shipped"]), tags, rng.randbytes(rng.randint(0, 16)))


class Workload:
    """Writes transactions from a background thread until the `with` block ends or `seconds` pass."""

    def __init__(self, server: MariaDB, *, seconds: float, rate: float = 20.0, seed: int = 7) -> None:
        self.server, self.seconds, self.pause = server, seconds, 1.0 / rate
        self.rng = random.Random(seed)
        self.transactions = 0
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="demo workload", daemon=True)

    def __enter__(self) -> Workload:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if self._error is not None and kind is None:
            raise RuntimeError(f"the demo workload failed: {self._error}") from self._error

    def _run(self) -> None:
        deadline = time.monotonic() + self.seconds
        try:
            with self.server.connect(autocommit=False) as conn:
                next_id = 1000
                while not self._stop.is_set() and time.monotonic() < deadline:
                    next_id = self._transaction(conn, next_id)
                    self.transactions += 1
                    time.sleep(self.pause)
        except BaseException as exc:  # noqa: BLE001 - reported by __exit__ in the main thread
            self._error = exc

    def _transaction(self, conn: pymysql.Connection, next_id: int) -> int:
        rng = self.rng
        with conn.cursor() as cursor:
            for _ in range(rng.randint(1, 4)):
                choice = rng.random()
                if choice < 0.45:
                    cursor.execute(_INSERT, _order(rng, next_id))
                    next_id += 1
                elif choice < 0.75:
                    cursor.execute("UPDATE hr.ORDERS SET TOTAL = TOTAL + 0.0001, NOTE = %s, STATUS = 'paid' "
                                   "WHERE ORDER_ID = %s", (rng.choice(HOSTILE), rng.randrange(1, next_id)))
                elif choice < 0.80:  # a primary-key change: the old key must disappear downstream
                    cursor.execute("UPDATE hr.ORDERS SET ORDER_ID = %s WHERE ORDER_ID = %s",
                                   (next_id, rng.randrange(1, next_id)))
                    next_id += 1
                elif choice < 0.92:
                    cursor.execute("DELETE FROM hr.ORDERS WHERE ORDER_ID = %s", (rng.randrange(1, next_id),))
                else:
                    cursor.execute("UPDATE hr.COUNTRIES SET COUNTRY_NAME = %s WHERE COUNTRY_ID = %s",
                                   (rng.choice(HOSTILE)[:40], rng.choice(COUNTRIES)[0]))
        if rng.random() < 0.1:
            conn.rollback()  # never reaches the binlog; must never reach the target
        else:
            conn.commit()
        return next_id
