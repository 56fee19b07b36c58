"""RENAME TABLE followed end to end, without a manual step (issue #30).

Real MariaDB -> tail -> spark-merge -> snowflake-apply (fakesnow): RENAME TABLE (one, a chain, a swap), ALTER TABLE
... RENAME TO with other clauses, a move to another database, within one batch and across batches, with rows
written under the old name before and under the new name after. After every round each lake table and each
Snowflake table equals a SELECT * of its MySQL table row for row, no lake table or Snowflake table is left under
a name MySQL no longer has, and `cdc verify` says OK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc.capture import Filters, StartRequest, TailOptions, run_tail
from cdc.schema import SchemaHistory
from cdc.snowflake import apply, bootstrap, names
from cdc.source.schema_reads import read_table_schema
from cdc.spark import merge, read_lake_table
from cdc.spark.lake import table_dir
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, settings_for
from tests.capture.workload import expected_rows
from tests.pipeline.verify_rig import statuses, verify_json
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows
from tests.snowflake.test_pipeline import _lake_expected, _snowflake_rows, _snowflake_value, _typed


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _tail(mariadb: MariaDB, state: StateDir, dbs: tuple[str, ...], start: str | None = None) -> None:
    run_tail(settings_for(mariadb, state.root), TailOptions(start=StartRequest(position=start),
                                                             filters=Filters(databases=dbs)))


def _snowflake_tables(sf: Any) -> set[str]:
    return {r[0] for r in rows(sf, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = "
                                   "CURRENT_SCHEMA()") if not str(r[0]).startswith("_CDC_")}


def _round(mariadb: MariaDB, state: StateDir, sf: Any, spark: Any, dbs: tuple[str, ...],
           tables: list[tuple[str, str]], label: str, *, bootstrap_first: bool = False) -> None:
    """Replicate what MySQL did since the last round; every table in `tables` (and nothing else) must be exact."""
    _tail(mariadb, state, dbs)
    merge(state, spark=spark)
    if bootstrap_first:  # from the schema history, with SCD2 tables, as `cdc run` bootstraps before every apply
        options = bootstrap.Options(history=True)
        bootstrap.run(sf, bootstrap.targets_for(bootstrap.schemas_from_history(SchemaHistory(state.schema), []),
                                                options), options)
    assert apply.run(sf, state).applied, label
    lake_dirs = {p.name for p in (state.root / "lake").iterdir() if not p.name.startswith("_")}
    assert lake_dirs == {table_dir(state.root / "lake", db, t).name for db, t in tables}, label
    want_sf = {names.snowflake_name(t) for _, t in tables}
    found_sf = _snowflake_tables(sf)
    assert {t for t in found_sf if not t.endswith("_HISTORY")} == want_sf, label
    assert {t for t in found_sf if t.endswith("_HISTORY")} <= {names.derived_name(t, "_HISTORY") for t in want_sf}
    assert not [t for t in rows(sf, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES") if t[0].startswith("_CDC_MOVE")]
    assert set(SchemaHistory(state.schema).tables()) == set(tables), label
    for db, table in tables:
        with mariadb.connect() as conn:
            encoded = expected_rows(conn, db, table)
            schema = read_table_schema(conn, db, table)
        assert schema is not None
        lake = read_lake_table(state.root / "lake", db, table)
        assert lake is not None, (label, table)
        assert lake.columns[:-3] == schema.column_names, (label, table)
        found = {key: _typed({c: row[c] for c in schema.column_names}) for key, row in lake.by_key().items()}
        assert found == _lake_expected(schema, encoded), (label, table)
        expected = {key: _typed({c.name: _snowflake_value(c, row[c.name]) for c in schema.columns})
                    for key, row in encoded.items()}
        assert _snowflake_rows(sf, schema) == expected, (label, table)
    code, doc = verify_json(state.root, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, (label, doc)


def test_rename_table_is_followed_by_lake_and_snowflake(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                        spark: Any, sf: Any) -> None:  # noqa: F811
    db, other = fresh_db, mariadb.create_database("test")
    dbs = (db, other)
    state = StateDir(tmp_path / "state")
    start = binlog_start(mariadb)
    for table in ("a", "b"):
        mariadb.execute(f"CREATE TABLE {q(db)}.{table} (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL, n INT)")
        mariadb.execute(f"INSERT INTO {q(db)}.{table} VALUES " + ", ".join(f"({i}, '{table}{i}', {i})"
                                                                            for i in range(1, 6)))
    _tail(mariadb, state, dbs, start)
    merge(state, spark=spark)
    _round(mariadb, state, sf, spark, dbs, [(db, "a"), (db, "b")], "start", bootstrap_first=True)

    # One RENAME, rows under the old name before it and under the new one after, in one batch.
    mariadb.execute(f"UPDATE {q(db)}.a SET v = 'before' WHERE id = 1")
    mariadb.execute(f"DELETE FROM {q(db)}.a WHERE id = 2")
    mariadb.execute(f"RENAME TABLE {q(db)}.a TO {q(db)}.a2")
    mariadb.execute(f"UPDATE {q(db)}.a2 SET v = 'after' WHERE id IN (1, 3)")
    mariadb.execute(f"INSERT INTO {q(db)}.a2 VALUES (6, 'new', NULL)")
    _round(mariadb, state, sf, spark, dbs, [(db, "a2"), (db, "b")], "RENAME TABLE", bootstrap_first=True)

    # A chain in one statement, then ALTER ... RENAME TO with other clauses (the added column's fill follows).
    mariadb.execute(f"INSERT INTO {q(db)}.a2 VALUES (7, 'seven', 7)")
    mariadb.execute(f"RENAME TABLE {q(db)}.a2 TO {q(db)}.c, {q(db)}.c TO {q(db)}.d")
    mariadb.execute(f"UPDATE {q(db)}.d SET n = 70 WHERE id = 7")
    mariadb.execute(f"ALTER TABLE {q(db)}.d ADD COLUMN w INT NOT NULL DEFAULT 5, RENAME TO {q(db)}.e")
    mariadb.execute(f"INSERT INTO {q(db)}.e VALUES (8, 'eight', 8, 80)")
    _round(mariadb, state, sf, spark, dbs, [(db, "e"), (db, "b")], "chain and ALTER RENAME", bootstrap_first=True)

    # A swap through a third name, rows in both tables before and after.
    mariadb.execute(f"UPDATE {q(db)}.b SET v = 'b before' WHERE id = 3")
    mariadb.execute(f"UPDATE {q(db)}.e SET v = 'e before' WHERE id = 3")
    mariadb.execute(f"RENAME TABLE {q(db)}.e TO {q(db)}.tmp, {q(db)}.b TO {q(db)}.e, {q(db)}.tmp TO {q(db)}.b")
    mariadb.execute(f"UPDATE {q(db)}.b SET w = 1 WHERE id = 4")
    mariadb.execute(f"INSERT INTO {q(db)}.e VALUES (9, 'was b', 9)")
    mariadb.execute(f"DELETE FROM {q(db)}.e WHERE id = 5")
    _round(mariadb, state, sf, spark, dbs, [(db, "e"), (db, "b")], "swap", bootstrap_first=True)

    # Across batches: a RENAME alone into another database, then rows under the new name in the next batch.
    mariadb.execute(f"RENAME TABLE {q(db)}.b TO {q(other)}.moved")
    _round(mariadb, state, sf, spark, dbs, [(db, "e"), (other, "moved")], "moved to another database",
           bootstrap_first=True)
    mariadb.execute(f"UPDATE {q(other)}.moved SET w = 2, v = 'moved' WHERE id = 1")
    mariadb.execute(f"INSERT INTO {q(other)}.moved VALUES (10, 'ten', 10, 100)")
    _round(mariadb, state, sf, spark, dbs, [(db, "e"), (other, "moved")], "rows after the move")

    # A dropped table's name taken by a RENAME, and a new table under a name renamed away from.
    mariadb.execute(f"DROP TABLE {q(db)}.e")
    mariadb.execute(f"RENAME TABLE {q(other)}.moved TO {q(db)}.e")
    mariadb.execute(f"CREATE TABLE {q(other)}.moved (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL, n INT, w INT)")
    mariadb.execute(f"INSERT INTO {q(other)}.moved VALUES (1, 'fresh', 1, 1)")
    mariadb.execute(f"UPDATE {q(db)}.e SET n = -1 WHERE id = 10")
    _round(mariadb, state, sf, spark, dbs, [(db, "e"), (other, "moved")], "dropped name taken", bootstrap_first=True)


def test_renamed_primary_key_column_keeps_merging(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                  spark: Any, sf: Any) -> None:  # noqa: F811
    db, dbs = fresh_db, (fresh_db,)
    state = StateDir(tmp_path / "state")
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE {q(db)}.item (id INT PRIMARY KEY, v VARCHAR(20))")
    mariadb.execute(f"INSERT INTO {q(db)}.item VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    _tail(mariadb, state, dbs, start)
    merge(state, spark=spark)
    _round(mariadb, state, sf, spark, dbs, [(db, "item")], "start", bootstrap_first=True)

    mariadb.execute(f"UPDATE {q(db)}.item SET v = 'before' WHERE id = 1")
    mariadb.execute(f"ALTER TABLE {q(db)}.item RENAME COLUMN id TO item_id")
    mariadb.execute(f"UPDATE {q(db)}.item SET v = 'after' WHERE item_id = 2")
    mariadb.execute(f"UPDATE {q(db)}.item SET item_id = 30 WHERE item_id = 3")
    mariadb.execute(f"INSERT INTO {q(db)}.item VALUES (4, 'four')")
    _round(mariadb, state, sf, spark, dbs, [(db, "item")], "RENAME COLUMN of the key")

    mariadb.execute(f"DELETE FROM {q(db)}.item WHERE item_id = 1")
    mariadb.execute(f"ALTER TABLE {q(db)}.item CHANGE item_id code INT")
    mariadb.execute(f"INSERT INTO {q(db)}.item VALUES (5, 'five')")
    mariadb.execute(f"RENAME TABLE {q(db)}.item TO {q(db)}.items")
    mariadb.execute(f"UPDATE {q(db)}.items SET v = 'renamed' WHERE code = 4")
    _round(mariadb, state, sf, spark, dbs, [(db, "items")], "CHANGE of the key, then RENAME TABLE",
           bootstrap_first=True)
