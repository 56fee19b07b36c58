"""Snapshot under column rules: excluded columns never written, hashed ones as tail hashes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.errors import UsageError
from cdc.masking import RULES_FILE, hash_value
from cdc.snapshot.run import SnapshotRequest, run_snapshot
from tests.capture import workload
from tests.hash_key import KEY
from tests.rig import MariaDB
from tests.snapshot.support import changelog_lines, make_settings

EXCLUDED = ("c_text", "c_blob", "c_json")


def test_masked_snapshot_is_the_plain_one_with_columns_dropped_and_hashed(
        mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
        workload.run_workload(conn, fresh_db, seed=5, transactions=40)
    table = f"{fresh_db}.{workload.TABLE}"
    hashed = tuple(c for c in workload.COLUMNS if c not in EXCLUDED)  # every type, hostile values included
    run_snapshot(make_settings(mariadb, tmp_path / "plain", tables=(table,)), SnapshotRequest(chunk_size=9))
    run_snapshot(make_settings(mariadb, tmp_path / "masked", tables=(table,),
                               exclude_columns=tuple(f"{table}.{c}" for c in EXCLUDED),
                               hash_columns=tuple(f"{table}.{c}" for c in hashed)),
                 SnapshotRequest(chunk_size=9))

    plain, masked = changelog_lines(tmp_path / "plain"), changelog_lines(tmp_path / "masked")
    assert len(plain) == len(masked) > 20
    for before, after in zip(plain, masked):
        expected = {k: hash_value(v, KEY) if k in hashed else v for k, v in before["after"].items() if k not in EXCLUDED}
        assert after["after"] == expected
        assert after["key"] == before["key"] and after["key"] == {"id": before["after"]["id"]}
    assert any(line["after"]["c_varchar"] == hash_value("O'Brien", KEY) for line in masked)
    written = b"".join(p.read_bytes() for p in (tmp_path / "masked" / "changelog").iterdir())
    assert b"O'Brien" not in written and b'"c_text"' not in written


def test_rules_on_a_key_column_are_refused_before_anything_is_written(
        mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
    table = f"{fresh_db}.{workload.TABLE}"
    settings = make_settings(mariadb, tmp_path / "state", tables=(table,), hash_columns=(f"{table}.id",))
    with pytest.raises(UsageError, match=r"key column\(s\) \['id'\]"):
        run_snapshot(settings, SnapshotRequest())
    assert not (tmp_path / "state" / RULES_FILE).exists()
    assert not list((tmp_path / "state").rglob("seg-*"))
