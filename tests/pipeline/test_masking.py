"""Column rules end to end: cdc.toml's exclude_columns / hash_columns hold for every stage, snapshot and tail alike.

A column excluded never reaches disk and does not exist in the lake or Snowflake; a hashed one is
the HMAC-SHA-256 hex (the key from CDC_MYSQL_HASH_KEY) of its change-log value everywhere (a DECIMAL too:
downstream types it as text). A run that asks for other rules than the ones the state was captured with is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc.errors import ExitCode
from tests.hash_key import ENV, HASH_KEY, hmac_hex
from tests.pipeline.run_rig import ROOT, cdc_run, create_source, more_writes, write_config
from tests.rig import MariaDB
from tests.security.modes import assert_private_state


def written_files(state: Path) -> dict[str, bytes]:
    """The checkpoints, records and segments of a state directory (not the last error kept for `cdc status`)."""
    return {p.name: p.read_bytes() for p in state.rglob("*")
            if p.is_file() and p.suffix in (".json", ".jsonl") and "errors" not in p.relative_to(state).parts}


@pytest.fixture(autouse=True)
def hash_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cdc subprocess here hashes with the test key, given as a user gives it: in the environment."""
    monkeypatch.setenv(ENV, HASH_KEY)


def sha(text: str | None) -> str | None:
    return None if text is None else hmac_hex(text.encode("utf-8"))


def masked_config(tmp_path: Path, mariadb: MariaDB, db: str, aws_env: dict[str, str], bucket: str) -> Path:
    config = write_config(tmp_path / "cdc.toml", mariadb, db, aws_env, bucket, tmp_path / "state")
    rules = (f'exclude_columns = ["{db}.orders.note"]\n'
             f'hash_columns = ["{db}.customers.name", "{db}.customers.balance"]\n')
    config.write_text(config.read_text().replace("[mysql]\n", "[mysql]\n" + rules, 1))
    return config


def expected_customers(mariadb: MariaDB, db: str) -> list[tuple[Any, ...]]:
    rows = mariadb.execute("SELECT id, name, balance, seen FROM customers ORDER BY id", database=db)
    # A DECIMAL's change-log value is its exact digits as text (docs/formats.md).
    return [(i, sha(name), sha(str(balance)) if isinstance(balance, Decimal) else None, seen)
            for i, name, balance, seen in rows]


def snowflake_columns(sf: Any, table: str) -> list[str]:
    cursor = sf.cursor()
    cursor.execute(f'SELECT * FROM "{table}" LIMIT 0')
    return [d[0] for d in cursor.description]


def test_rules_from_cdc_toml_hold_from_snapshot_to_snowflake(
        tmp_path: Path, mariadb: MariaDB, fresh_db: str, aws_env: dict[str, str], bucket: str,  # noqa: F811
        snowflake_env: dict[str, str], sf: Any) -> None:  # noqa: F811
    create_source(mariadb, fresh_db)
    config = masked_config(tmp_path, mariadb, fresh_db, aws_env, bucket)
    # Under umask 022 (the usual default): every file written is still private (#26; 000 in tests/pipeline/test_run.py).
    code, _, err = cdc_run(config, "--until-now", umask=0o022)  # snapshot: `r` lines
    assert code == 0, err
    more_writes(mariadb, fresh_db)
    code, _, err = cdc_run(config, "--until-now", umask=0o022)  # tail: binlog changes, a key change, deletes
    assert code == 0, err
    assert_private_state(tmp_path / "state")

    cursor = sf.cursor()
    cursor.execute('SELECT "ID", "NAME", "BALANCE", "SEEN" FROM "CUSTOMERS" ORDER BY "ID"')
    assert list(cursor.fetchall()) == expected_customers(mariadb, fresh_db)
    assert "NOTE" not in snowflake_columns(sf, "ORDERS") and "CUSTOMER_ID" in snowflake_columns(sf, "ORDERS")
    cursor.execute('SELECT "ID", "CUSTOMER_ID" FROM "ORDERS" ORDER BY "ID"')
    assert list(cursor.fetchall()) == mariadb.execute("SELECT id, customer_id FROM orders ORDER BY id",
                                                      database=fresh_db)

    written = b"".join(p.read_bytes() for p in (tmp_path / "state" / "changelog").glob("seg-*.jsonl"))
    assert b"O'Brien" not in written and b"order 1" not in written and b'"note"' not in written
    assert sha("O'Brien").encode() in written  # hashed, both from the snapshot and from tail

    verify = subprocess.run([sys.executable, "-m", "cdc", "verify", "--config", str(config), "--json"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert {(t["table"], t["status"]) for t in json.loads(verify.stdout)["tables"]} >= {
        (f"{fresh_db}.customers", "OK"), (f"{fresh_db}.orders", "OK")}


def test_a_capture_with_other_rules_is_refused_and_writes_nothing(
        tmp_path: Path, mariadb: MariaDB, fresh_db: str, aws_env: dict[str, str], bucket: str,  # noqa: F811
        snowflake_env: dict[str, str]) -> None:  # noqa: F811
    create_source(mariadb, fresh_db)
    config = masked_config(tmp_path, mariadb, fresh_db, aws_env, bucket)
    # Capture alone binds the rules; the later stages (Spark, Snowflake) add nothing to this check.
    code, _, err = cdc_run(config, "--until-now", "--stages", "snapshot,tail")
    assert code == 0, err
    state = tmp_path / "state"
    before = written_files(state)
    more_writes(mariadb, fresh_db)
    # A restart by hand that forgot one of the rules (flags replace cdc.toml's list).
    forgot = subprocess.run([sys.executable, "-m", "cdc", "tail", "--until-now", "--config", str(config),
                             "--hash-columns", f"{fresh_db}.customers.name"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert forgot.returncode == ExitCode.USAGE, forgot.stderr
    assert "hash_columns" in forgot.stderr and "Traceback" not in forgot.stderr
    after = written_files(state)
    assert {k: v for k, v in after.items() if k in before} == before
    assert not set(after) - set(before)
    assert json.loads((state / "errors" / "tail.json").read_text())["exit_code"] == ExitCode.USAGE  # for `cdc status`
