"""Against a live Snowflake account: `pytest -m snowflake_live tests/snowflake/test_live.py`.

Needs a connection (SNOWFLAKE_DEFAULT_CONNECTION_NAME / connections.toml, or SNOWFLAKE_ACCOUNT, _USER and a
password or key file) with a database (SNOWFLAKE_DATABASE) where the role may create schemas. Skipped without
one. Runs in a fresh schema, dropped at the end. Here, unlike fakesnow, MERGE runs inside BEGIN ... COMMIT:
the transactional path of snowflake-apply.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.config import SnowflakeSettings
from cdc.errors import ConfigError
from cdc.snowflake import apply, bootstrap
from cdc.snowflake.connect import connect, connection_params
from cdc.state import StateDir
from tests.snowflake.batches import record_schema
from tests.snowflake.stand_in import rows
from tests.snowflake.test_apply import _expected, _scenario

pytestmark = pytest.mark.snowflake_live


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Any]:
    try:
        params = connection_params(SnowflakeSettings())
    except ConfigError as exc:
        pytest.skip(f"no live Snowflake connection configured: {exc}")
    if not params.get("database"):
        pytest.skip("set SNOWFLAKE_DATABASE (or database in the connection) for the live tests")
    schema = f"CDC_LIVE_{uuid.uuid4().hex[:8].upper()}"
    conn = connect(SnowflakeSettings(schema=schema), dict(os.environ))
    try:
        conn.cursor().execute(f'CREATE SCHEMA "{schema}"')
        conn.cursor().execute(f'USE SCHEMA "{schema}"')
        yield conn
    finally:
        conn.cursor().execute(f'DROP SCHEMA IF EXISTS "{schema}"')
        conn.close()


def test_live_bootstrap_and_transactional_apply(live: Any, tmp_path: Path) -> None:
    schema = record_schema(tmp_path, "shop", "items")
    options = bootstrap.Options(history=True)
    assert bootstrap.run(live, bootstrap.targets_for([schema], options), options).created == ["ITEMS", "ITEMS_HISTORY"]
    _scenario(tmp_path)
    summary = apply.run(live, StateDir(tmp_path))
    assert summary.transactional is True and summary.applied == ["b000000000001", "b000000000002"]
    # ID, NAME, AMOUNT, BIG, RAW and the CDC columns (ARRAY/VARIANT text is pretty-printed by Snowflake)
    got = rows(live, 'SELECT "ID", "NAME", "AMOUNT", "BIG", "RAW", "_CDC_POSITION", "_CDC_OP" FROM "ITEMS" ORDER BY "ID"')
    expected = [_expected(i, i, "c") for i in (4, 5, 6, 7, 8)]
    expected.insert(0, (2,) + _expected(12, 21, "u")[1:])
    expected.append((30,) + _expected(30, 22, "u")[1:])
    assert [(r[0], r[1], r[2], r[3], bytes(r[4]), r[5], r[6]) for r in got] == [
        (e[0], e[1], e[2], e[3], bytes(e[5]), e[8], e[9]) for e in expected]
    again = bootstrap.run(live, bootstrap.targets_for([schema], options), options)
    assert (again.created, again.added, again.type_drift) == ([], [], [])
