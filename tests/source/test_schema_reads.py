"""A table's current schema from information_schema: what the snapshot, bootstrap and tail's hints start from."""

from __future__ import annotations

from collections.abc import Callable

from cdc.schema import Column
from cdc.source.facts import gather
from cdc.source.schema_reads import read_table_schema
from tests.rig import MariaDB


def test_columns_keys_and_mariadb_json(mariadb: MariaDB, fresh_db: str) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.`t``x` (a INT UNSIGNED NOT NULL, b DECIMAL(18,4), c DATETIME(6), "
                    "d ENUM('x','it''s'), e SET('p','q'), f VARCHAR(10) CHARACTER SET latin1, g JSON, "
                    "PRIMARY KEY (b, a))")
    with mariadb.connect() as conn:
        schema = read_table_schema(conn, fresh_db, "t`x", position="p1")
        missing = read_table_schema(conn, fresh_db, "nope")
    assert missing is None
    assert schema is not None and (schema.db, schema.table, schema.position) == (fresh_db, "t`x", "p1")
    assert schema.primary_key == ("b", "a")  # key order, not column order
    columns = {c.name: c for c in schema.columns}
    assert columns["a"] == Column("a", "int(10) unsigned", "int", unsigned=True, nullable=False)
    assert (columns["b"].precision, columns["b"].scale, columns["c"].fsp) == (18, 4, 6)
    assert columns["d"].enum_values == ("x", "it's") and columns["e"].set_values == ("p", "q")
    assert columns["f"].charset == "latin1"
    # MariaDB's JSON is LONGTEXT with a json_valid() check: read as json, as MySQL's own type is.
    assert (columns["g"].data_type, columns["g"].type) == ("json", "json")


def test_foreign_key_reads_open_one_database_at_a_time(mariadb_factory: Callable[..., MariaDB]) -> None:
    """Every information_schema read of a table's schema (tail's at each DDL) and of check-binlog's foreign keys
    is pinned to one database: MariaDB otherwise opens every table of the server for it, and 10.11 crashed in
    that path (ha_maria::drop_table <- create_tmp_table_for_schema) under concurrent DDL, dropping tail's link.
    The server's own EXPLAIN of each statement we sent, read back from its general log, is the judge."""
    server = mariadb_factory({"general-log": 1, "log-output": "TABLE"})
    for statement in ("CREATE DATABASE a", "CREATE DATABASE b", "CREATE DATABASE c",
                      "CREATE TABLE a.p (id INT PRIMARY KEY)",
                      "CREATE TABLE b.ch (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES a.p (id) ON DELETE CASCADE)",
                      "CREATE TABLE c.other (id INT PRIMARY KEY, q INT, FOREIGN KEY (q) REFERENCES c.other (id))"):
        server.execute(statement)
    with server.connect() as conn:
        parent = read_table_schema(conn, "a", "p")
        child = read_table_schema(conn, "b", "ch")
        facts = gather(conn, ("a",))
        thread = conn.thread_id()
    assert parent is not None and child is not None
    assert [(k.db, k.table, k.on_delete) for k in parent.referenced_by] == [("b", "ch", "CASCADE")]
    assert [(k.ref_db, k.ref_table) for k in child.foreign_keys] == [("a", "p")]
    assert [(k.db, k.table) for k in facts.foreign_keys] == [("b", "ch")]  # c.other is neither child nor parent of a
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL general_log = 0")
        cur.execute("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log WHERE thread_id = %s "
                    "AND command_type = 'Query' AND argument LIKE %s", (thread, "%KEY_COLUMN_USAGE%"))
        statements = [row[0] for row in cur.fetchall()]
        assert statements, "the general log shows no key reads: the test would prove nothing"
        for statement in statements:
            cur.execute("EXPLAIN " + statement)
            plans = [str(row[-1]) for row in cur.fetchall()]
            assert not any("Scanned all databases" in plan for plan in plans), (statement, plans)
