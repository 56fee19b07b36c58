"""snowflake-apply stages a batch's tables on several sessions at once (cdc.snowflake.loaders, issue #25):
the targets end exact, the extra sessions are opened once and kept, and a failure on one of them merges nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdc.config import SnowflakeSettings
from cdc.errors import DataError
from cdc.snowflake import apply, bootstrap
from cdc.snowflake.connect import connect
from cdc.state import StateDir
from tests.snowflake.batches import position, record_schema, row, value, write_batch
from tests.snowflake.stand_in import rows


class _Login:
    """A real connection that remembers being closed (the connector's is_closed() stays False against the stand-in,
    whose logout answer it takes for an error)."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.closed = conn, False

    def cursor(self) -> Any:
        return self.conn.cursor()

    def close(self) -> None:
        self.closed = True
        self.conn.close()


class _Logins:
    """open_connection for the Applier: a real login to the test's database each call, every connection kept."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.opened: list[_Login] = []

    def __call__(self) -> _Login:
        self.opened.append(_Login(connect(SnowflakeSettings(), self.env)))
        return self.opened[-1]


def _tables(sf: Any, state: Path, count: int) -> list[str]:
    tables = [f"t{i}" for i in range(count)]
    opts = bootstrap.Options()
    bootstrap.run(sf, bootstrap.targets_for([record_schema(state, "shop", t) for t in tables], opts), opts)
    return tables


def _names(sf: Any, table: str) -> list[tuple[Any, ...]]:
    return rows(sf, f'SELECT "ID", "NAME", "_CDC_POSITION" FROM "{table.upper()}" ORDER BY "ID"')


def test_a_batchs_tables_are_staged_on_extra_sessions_kept_from_batch_to_batch(sf: Any, snowflake_env: dict[str, str],
                                                                                 tmp_path: Path) -> None:
    tables = _tables(sf, tmp_path, 6)
    write_batch(tmp_path, 1, {f"shop.{t}": [row(i, i, "c", **value(i)) for i in range(1, 4)] for t in tables})
    write_batch(tmp_path, 2, {f"shop.{t}": [row(1, 10, "d"), row(2, 11, "u", **value(12))] for t in tables})
    logins = _Logins(snowflake_env)
    applier = apply.Applier(sf, StateDir(tmp_path), open_connection=logins, load_sessions=4)
    seen: list[int] = []
    summary = apply.run(sf, StateDir(tmp_path), applier=applier, on_batch=lambda *_: seen.append(applier.statements))
    assert summary.applied == ["b000000000001", "b000000000002"]
    assert seen[1] - seen[0] == 3 * len(tables) + 3  # as on one session: PUT, 6 x (TRUNCATE, COPY, MERGE), COUNT, INSERT
    assert len(logins.opened) == 3  # opened at the first batch, kept for the second
    # Each batch readies its 6 staging tables on the extra sessions while its own PUTs: 12 statements at least.
    assert applier.loaders.statements >= 12
    for t in tables:
        assert _names(sf, t) == [(2, value(12)["name"], position(11)), (3, value(3)["name"], position(3))]
    applier.close()
    assert all(conn.closed for conn in logins.opened)
    assert not [r for r in rows(sf, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES") if r[0].startswith("_CDC_STG_")]


def test_a_copy_refused_on_an_extra_session_merges_nothing_and_a_rerun_lands_exact(
        sf: Any, snowflake_env: dict[str, str], tmp_path: Path) -> None:
    """A table's COPY loads fewer rows than its manifest says (a damaged batch): the error surfaces from its
    session's thread once every other table's staging has ended, no table is merged, the session it failed on is
    logged out and the others at close(); once the batch is whole again, a new Applier (as `cdc run` makes after a
    failure; a kept one never reads a sealed manifest twice) applies it exactly."""
    tables = _tables(sf, tmp_path, 4)
    folder = write_batch(tmp_path, 1, {f"shop.{t}": [row(i, i, "c", **value(i)) for i in range(1, 4)] for t in tables})
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["tables"]["shop.t2"]["rows"] = 4
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    logins = _Logins(snowflake_env)
    applier = apply.Applier(sf, StateDir(tmp_path), open_connection=logins, load_sessions=4)
    with pytest.raises(DataError, match="table shop.t2: COPY loaded 3 rows, manifest says 4"):
        apply.run(sf, StateDir(tmp_path), applier=applier)
    assert all(_names(sf, t) == [] for t in tables)
    assert rows(sf, 'SELECT COUNT(*) FROM "_CDC_APPLIED_BATCHES"') == [(0,)]
    failed_here = [conn for conn in logins.opened if conn.closed]
    assert len(failed_here) <= 1  # the COPY ran on an extra session (closed) or on the apply's own (kept)
    applier.close()
    assert all(conn.closed for conn in logins.opened)
    manifest["tables"]["shop.t2"]["rows"] = 3
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    again = _Logins(snowflake_env)
    summary = apply.run(sf, StateDir(tmp_path), open_connection=again, load_sessions=4)
    assert summary.applied == ["b000000000001"]
    for t in tables:
        assert _names(sf, t) == [(i, value(i)["name"], position(i)) for i in range(1, 4)]
    assert again.opened and all(conn.closed for conn in again.opened)  # run() logs out what it opened
