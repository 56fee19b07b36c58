"""docs/changelog.schema.json describes every line tail and snapshot write: rows of every type, DDL, snapshot reads."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # a test extra (pyproject.toml)

from cdc.snapshot.run import SnapshotRequest, run_snapshot
from tests.capture.conftest import ROOT, binlog_start, changelog_lines, tail_once
from tests.capture.workload import TABLE, create_all_types_table, run_workload
from tests.rig import MariaDB
from tests.snapshot.support import make_settings

SCHEMA = json.loads((ROOT / "docs" / "changelog.schema.json").read_text())


def test_every_line_validates_against_the_published_schema(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    with mariadb.connect() as conn:
        create_all_types_table(conn, fresh_db, "seeded")
        run_workload(conn, fresh_db, "seeded", seed=3, transactions=10)
    state = tmp_path / "state"
    run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest(chunk_size=7))
    start = binlog_start(mariadb)
    with mariadb.connect() as conn:
        create_all_types_table(conn, fresh_db)
        run_workload(conn, fresh_db, seed=4, transactions=20)
    db = f"`{fresh_db}`"
    with mariadb.connect() as conn, conn.cursor() as cur:  # a change made with foreign_key_checks=0 is marked
        cur.execute("SET SESSION foreign_key_checks = 0")
        cur.execute(f"DELETE FROM {db}.{TABLE} ORDER BY id LIMIT 1")
        conn.commit()
    for sql in (f"ALTER TABLE {db}.{TABLE} ADD COLUMN extra INT", f"RENAME TABLE {db}.{TABLE} TO {db}.moved",
                f"TRUNCATE TABLE {db}.moved", f"DROP TABLE {db}.moved"):
        mariadb.execute(sql)
    tail_once(mariadb, tmp_path / "tail", fresh_db, start)

    lines = changelog_lines(state) + changelog_lines(tmp_path / "tail")
    assert {line["op"] for line in lines} == {"r", "c", "u", "d", "ddl"}
    assert [line["op"] for line in lines if "fk_checks" in line] == ["d"]
    assert {line["kind"] for line in lines if line["op"] == "ddl"} == {"create", "alter", "rename", "truncate", "drop"}
    for line in lines:
        errors = sorted(validator.iter_errors(line), key=str)
        assert not errors, (line["position"], [e.message for e in errors[:3]])
    # The schema is not vacuous: a line with a wrong op, a missing coordinate or an extra key is refused.
    row = next(line for line in lines if line["op"] == "u")
    for broken in ({**row, "op": "x"}, {**row, "src": {**row["src"], "pos": None}}, {**row, "extra": 1},
                   {**row, "before": None}, {**row, "fk_checks": True}):
        assert not validator.is_valid(broken), broken
