"""A table's current schema from information_schema: what the snapshot, bootstrap and tail's hints start from."""

from __future__ import annotations

from cdc.schema import Column
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
