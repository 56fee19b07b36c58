"""A keyless table given a primary key, and a keyed table losing its key, end to end.

The classic real-world sequence: a table without a key is captured as a multiset (`--allow-no-pk`), its duplicates
are cleaned up and `ALTER TABLE ... ADD PRIMARY KEY` is run; later a key may be dropped again (a migration tool's
shadow table, a key moved off a column). MySQL changes no row at either ALTER; only which rows a later change
replaces differs. So every change before the ALTER must merge as a multiset, every later one by the new key (or
as a multiset again), with row changes on both sides of the ALTER in one merge input. After every round the lake
and Snowflake equal `SELECT *` of the MySQL table as multisets, and `cdc verify` says OK.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from cdc.schema import SchemaHistory
from cdc.snowflake import apply, bootstrap
from cdc.spark import merge
from cdc.state import StateDir
from tests.capture.conftest import tail_once
from tests.pipeline.cli import run
from tests.pipeline.multiset_rig import lake_rows, run_sql, snowflake_rows, source_rows
from tests.pipeline.verify_rig import apply_to_snowflake, server_args, statuses, verify_json
from tests.rig import MariaDB
from tests.snowflake.stand_in import rows as sf_rows

TABLE = "ledger"


def _merge_all(state: StateDir, spark: Any) -> int:
    """spark-merge until nothing is left (a run ends before a key change); the number of runs."""
    runs = 0
    while True:
        runs += 1
        if merge(state, spark=spark).key_change is None:
            return runs


def _replicate(mariadb: MariaDB, db: str, state: Path, spark: Any, sf: Any, label: str, *,
               runs: int) -> Counter[tuple[Any, ...]]:
    tail_once(mariadb, state, db)
    assert _merge_all(StateDir(state), spark) == runs, label
    apply_to_snowflake(sf, state)
    schema, expected = source_rows(mariadb, db, TABLE)
    assert lake_rows(state, schema) == expected, f"lake {label}"
    assert snowflake_rows(sf, schema) == expected, f"Snowflake {label}"
    code, doc = verify_json(state, mariadb)
    assert code == 0 and set(statuses(doc).values()) == {"OK"}, (label, json.dumps(doc))
    return expected


def test_a_key_added_to_a_keyless_table_and_dropped_again(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                         spark: Any, sf: Any) -> None:  # noqa: F811
    state = tmp_path / "state"
    mariadb.execute(f"CREATE TABLE {TABLE} (id INT NOT NULL, note VARCHAR(10), n INT)", database=fresh_db)
    run_sql(mariadb, fresh_db, [f"INSERT INTO {TABLE} VALUES (1, 'a', 1), (1, 'a', 1), (2, 'b', 2), (3, 'c', 3),"
                                 " (3, 'c', 3), (4, NULL, NULL)"])
    snap = run("snapshot", "--state-dir", str(state), *server_args(mariadb), "--databases", fresh_db, "--allow-no-pk")
    assert snap.exit_code == 0, snap.output
    run_sql(mariadb, fresh_db, [f"UPDATE {TABLE} SET n = 10 WHERE id = 2", f"INSERT INTO {TABLE} VALUES (5, 'e', 5)"])
    _replicate(mariadb, fresh_db, state, spark, sf, "keyless", runs=1)

    # The duplicates cleaned up, the key added, and rows changed under it, all in one merge input: the run ends at
    # the ALTER. (6, 'f') then (6, 'g') is an update by the new key; under the multiset it would be two rows.
    run_sql(mariadb, fresh_db, [f"DELETE FROM {TABLE} WHERE id = 1 LIMIT 1", f"DELETE FROM {TABLE} WHERE id = 3 LIMIT 1",
                                 f"UPDATE {TABLE} SET note = 'dup' WHERE id = 5"])
    mariadb.execute(f"ALTER TABLE {TABLE} ADD PRIMARY KEY (id)", database=fresh_db)
    run_sql(mariadb, fresh_db, [f"INSERT INTO {TABLE} VALUES (6, 'f', 6)", f"UPDATE {TABLE} SET note = 'g' WHERE id = 6",
                                 f"UPDATE {TABLE} SET id = 7 WHERE id = 4", f"DELETE FROM {TABLE} WHERE id = 2"])
    expected = _replicate(mariadb, fresh_db, state, spark, sf, "key added", runs=2)
    assert expected == Counter({(1, "a", 1): 1, (3, "c", 3): 1, (5, "dup", 5): 1, (6, "g", 6): 1, (7, None, None): 1})
    history = SchemaHistory(state / "schema")
    assert [v.primary_key for v in history.versions(fresh_db, TABLE)][-1] == ("id",)

    # Later changes under the key alone, in a run of their own.
    run_sql(mariadb, fresh_db, [f"UPDATE {TABLE} SET n = 30 WHERE id = 3", f"INSERT INTO {TABLE} VALUES (8, 'h', 8)"])
    _replicate(mariadb, fresh_db, state, spark, sf, "keyed", runs=1)

    # The key dropped: copies are allowed again, written right after the ALTER in the same input as changes
    # before it.
    run_sql(mariadb, fresh_db, [f"UPDATE {TABLE} SET note = 'before' WHERE id = 8"])
    mariadb.execute(f"ALTER TABLE {TABLE} DROP PRIMARY KEY", database=fresh_db)
    run_sql(mariadb, fresh_db, [f"INSERT INTO {TABLE} VALUES (8, 'before', 8), (8, 'before', 8)",
                                 f"DELETE FROM {TABLE} WHERE id = 8 LIMIT 1", f"UPDATE {TABLE} SET n = 0 WHERE id = 1"])
    expected = _replicate(mariadb, fresh_db, state, spark, sf, "key dropped", runs=2)
    assert expected[(8, "before", 8)] == 2
    assert [v.primary_key for v in SchemaHistory(state / "schema").versions(fresh_db, TABLE)][-1] == ()

    # Later changes to the multiset alone.
    run_sql(mariadb, fresh_db, [f"UPDATE {TABLE} SET note = 'x' WHERE id = 8 LIMIT 1",
                                 f"INSERT INTO {TABLE} VALUES (1, 'a', 0)"])
    _replicate(mariadb, fresh_db, state, spark, sf, "keyless again", runs=1)


def test_a_key_dropped_under_soft_delete_and_scd2(mariadb: MariaDB, fresh_db: str, tmp_path: Path, spark: Any,
                                                 sf: Any) -> None:  # noqa: F811
    """A keyed table bootstrapped with soft delete and SCD2 loses its key: its later rows are live (FALSE, never
    NULL, which `WHERE NOT "_CDC_DELETED"` would drop), its soft-deleted rows stay deleted, its history keeps the
    versions before the ALTER."""
    state = tmp_path / "state"
    mariadb.execute("CREATE TABLE acct (id INT NOT NULL PRIMARY KEY, note VARCHAR(10))", database=fresh_db)
    run_sql(mariadb, fresh_db, ["INSERT INTO acct VALUES (1, 'a'), (2, 'b'), (3, 'c')"])
    snap = run("snapshot", "--state-dir", str(state), *server_args(mariadb), "--databases", fresh_db)
    assert snap.exit_code == 0, snap.output
    options = bootstrap.Options(soft_delete=True, history=True)
    schemas = bootstrap.schemas_from_history(SchemaHistory(state / "schema"), [])
    bootstrap.run(sf, bootstrap.targets_for(schemas, options), options)

    def replicate(runs: int) -> None:
        tail_once(mariadb, state, fresh_db)
        assert _merge_all(StateDir(state), spark) == runs
        assert apply.run(sf, StateDir(state)).applied
        code, doc = verify_json(state, mariadb)
        assert code == 0 and set(statuses(doc).values()) == {"OK"}, json.dumps(doc)

    replicate(runs=1)  # the snapshot, alone: a row it holds and a later batch deletes is soft-deleted
    run_sql(mariadb, fresh_db, ["DELETE FROM acct WHERE id = 2", "UPDATE acct SET note = 'before' WHERE id = 3"])
    replicate(runs=1)
    mariadb.execute("ALTER TABLE acct DROP PRIMARY KEY", database=fresh_db)
    run_sql(mariadb, fresh_db, ["INSERT INTO acct VALUES (3, 'before'), (4, 'd')", "DELETE FROM acct WHERE id = 1"])
    replicate(runs=1)
    live = sf_rows(sf, 'SELECT "ID", "NOTE", "_CDC_DELETED" FROM "ACCT" WHERE NOT COALESCE("_CDC_DELETED", FALSE)')
    assert Counter(live) == Counter({(3, "before", False): 2, (4, "d", False): 1})
    assert sf_rows(sf, 'SELECT "ID", "NOTE" FROM "ACCT" WHERE "_CDC_DELETED"') == [(2, "b")]
    history = sf_rows(sf, 'SELECT "ID", "NOTE", "_CDC_IS_CURRENT" FROM "ACCT_HISTORY" ORDER BY "_CDC_POSITION"')
    assert Counter(history) == Counter({(1, "a", True): 1, (2, "b", False): 1, (3, "c", False): 1,
                                       (3, "before", True): 1})
