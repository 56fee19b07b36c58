"""Helpers for the `cdc verify` tests: a replicated source (real MariaDB -> tail -> spark-merge) and lake tampering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cdc.schema import SchemaHistory
from cdc.snowflake import apply, bootstrap
from cdc.spark import merge
from cdc.spark.lake import read_pointer, table_dir
from cdc.state import StateDir
from tests.capture.conftest import tail_once
from tests.pipeline.cli import run
from tests.rig import MariaDB

# Mixed case, a reserved word, a space, a backtick and a dot (no single quote: fakesnow's DuckDB rejects the
# backslash-escaped quote in the COMMENT snowflake-bootstrap writes; real Snowflake accepts it).
HOSTILE_TABLE = "Sel`ect Order.T"
# For Snowflake: a reserved word in mixed case (snowflake-apply does not find the batch files of a table whose
# name needs percent-encoding yet); the columns stay hostile.
SNOWFLAKE_HOSTILE_TABLE = "Order"
HOSTILE_COLUMNS = ("`Key Col`", "`select`", "`Mixed Case`", "`we``ird`")


def create_hostile_table(server: MariaDB, db: str, name: str = HOSTILE_TABLE) -> None:
    table = "`" + name.replace("`", "``") + "`"
    server.execute(f"CREATE TABLE `{db}`.{table} ({HOSTILE_COLUMNS[0]} VARCHAR(20) NOT NULL, "
                   f"{HOSTILE_COLUMNS[1]} INT NOT NULL, {HOSTILE_COLUMNS[2]} DECIMAL(12,3), {HOSTILE_COLUMNS[3]} TEXT, "
                   f"PRIMARY KEY ({HOSTILE_COLUMNS[0]}, {HOSTILE_COLUMNS[1]}))")
    server.execute(f"INSERT INTO `{db}`.{table} VALUES ('a', 1, 1.5, 'x'), ('B', 2, -0.001, NULL), "
                   f"('c''d', 3, 12345.678, 'O''Brien'), ('ä', 4, 0, '🎉')")


def replicate(server: MariaDB, state: Path, db: str, spark: Any, start: str | None = None) -> None:
    """tail --until-now (from `start` on the first run) and one spark-merge run into <state>/lake."""
    tail_once(server, state, db, start)
    merge(StateDir(state), spark=spark)


def server_args(server: MariaDB) -> tuple[str, ...]:
    return ("--host", server.host, "--port", str(server.port), "--user", "root")


def verify_json(state: Path, server: MariaDB, *args: str) -> tuple[int, dict[str, Any]]:
    result = run("verify", "--state-dir", str(state), *server_args(server), "--json", *args)
    assert result.stdout.strip(), result.output
    return result.exit_code, json.loads(result.stdout)


def statuses(document: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(t["table"], t["target"]): t["status"] for t in document["tables"]}


def tamper_lake(lake: Path, db: str, table: str, edit: Any) -> None:
    """Rewrite the lake table's current version through `edit(list of row dicts) -> list of row dicts`."""
    directory = table_dir(lake, db, table)
    pointer = read_pointer(directory)
    assert pointer is not None
    files = sorted((directory / pointer["current"]).glob("*.parquet"))
    original = pa.concat_tables([pq.read_table(f) for f in files])
    rows = edit(original.to_pylist())
    for path in files:
        path.unlink()
    pq.write_table(pa.Table.from_pylist(rows, schema=original.schema), files[0])


def apply_to_snowflake(conn: Any, state: Path) -> None:
    """snowflake-bootstrap (from the schema history) then snowflake-apply, as tests/snowflake/test_pipeline.py does."""
    options = bootstrap.Options()
    schemas = bootstrap.schemas_from_history(SchemaHistory(state / "schema"), [])
    bootstrap.run(conn, bootstrap.targets_for(schemas, options), options)
    assert apply.run(conn, StateDir(state)).applied
