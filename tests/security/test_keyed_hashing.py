"""--hash-columns is keyed (HMAC-SHA-256): no key, no hashing; the key never lands on disk or in a log; a state
directory hashed with one key refuses another (#26).

Plain SHA-256 of an e-mail, a phone number or a national id is reversed by brute force in minutes: the
hashes below must not be what anyone can compute without the key.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.config import load_settings
from cdc.errors import ConfigError
from cdc.masking import RULES_FILE, ColumnRules, HashKey, bind_rules, load_hash_key, read_rules
from cdc.state import StateDir
from tests.capture.conftest import env_for
from tests.hash_key import HASH_KEY, hmac_hex
from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]
EMAIL = "ana.o'brien@example.com"


def _cdc(command: str, mariadb: MariaDB, db: str, state: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = env_for(mariadb, CDC_MYSQL_HASH_COLUMNS=f"{db}.people.email", CDC_MYSQL_TABLES=f"{db}.people",
                          HOME=str(state.parent), **env)
    until = ["--until-now"] if command == "tail" else []
    return subprocess.run([sys.executable, "-m", "cdc", command, *until, "--state-dir", str(state),
                           "--log-level", "debug", "--json"],
                          cwd=ROOT, env=environment, capture_output=True, text=True, timeout=180)


def _lines(state: Path) -> list[dict[str, object]]:
    segments = sorted((state / "changelog").glob("seg-*.jsonl"))
    return [json.loads(line) for segment in segments for line in segment.read_text().splitlines()]


def _everything_written(state: Path) -> dict[str, bytes]:
    """Every file's bytes but the last error kept for `cdc status` and the (empty) lock files."""
    return {str(p.relative_to(state)): p.read_bytes() for p in state.rglob("*")
            if p.is_file() and not {"errors", "locks"} & set(p.relative_to(state).parts)}


def test_hashed_columns_are_hmac_with_the_key_and_the_key_is_nowhere(mariadb: MariaDB, fresh_db: str,
                                                                      tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.people (id INT PRIMARY KEY, email VARCHAR(80))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.people VALUES (1, %s), (2, NULL)", (EMAIL,))
    state = tmp_path / "state"

    refused = _cdc("snapshot", mariadb, fresh_db, state)  # no key: no hashing at all, and nothing written
    assert refused.returncode == 3, refused.stderr
    assert "ERROR cdc.commands.snapshot: hash_columns needs a key: set CDC_MYSQL_HASH_KEY or mysql.hash_key_file " \
        "(a 0600 file)" in " ".join(refused.stderr.split()), refused.stderr
    assert not state.exists()

    done = _cdc("snapshot", mariadb, fresh_db, state, CDC_MYSQL_HASH_KEY=HASH_KEY)
    assert done.returncode == 0, done.stderr
    assert [line["after"] for line in _lines(state)] == [{"id": 1, "email": hmac_hex(EMAIL.encode())},
                                                         {"id": 2, "email": None}]
    written = b"".join(_everything_written(state).values())
    assert hashlib.sha256(EMAIL.encode()).hexdigest().encode() not in written  # not the unkeyed hash
    assert EMAIL.encode() not in written and HASH_KEY.encode() not in written
    assert HASH_KEY not in done.stdout + done.stderr  # nor in the debug log
    rules = json.loads((state / RULES_FILE).read_text())
    assert rules == {"version": 2, "exclude_columns": [], "hash_columns": [f"{fresh_db}.people.email"],
                     "hash_key_fingerprint": HashKey(HASH_KEY.encode(), "").fingerprint}

    # Another key on the same state directory: refused before anything is written, not two keys' hashes mixed.
    mariadb.execute(f"INSERT INTO `{fresh_db}`.people VALUES (3, 'x@example.com')")
    before = _everything_written(state)
    other = _cdc("tail", mariadb, fresh_db, state, CDC_MYSQL_HASH_KEY=HASH_KEY.upper())
    assert other.returncode == 3, other.stderr
    assert f"state directory {state} was hashed with the key {rules['hash_key_fingerprint']}, but this run's key " \
        "(environment CDC_MYSQL_HASH_KEY) is hmac-sha256:" in " ".join(other.stderr.split()), other.stderr
    assert HASH_KEY.upper() not in other.stdout + other.stderr
    assert _everything_written(state) == before
    # The right key: tail hashes the new row as snapshot did.
    done = _cdc("tail", mariadb, fresh_db, state, CDC_MYSQL_HASH_KEY=HASH_KEY)
    assert done.returncode == 0, done.stderr
    assert [line["after"] for line in _lines(state) if line["op"] == "c"] == [
        {"id": 3, "email": hmac_hex(b"x@example.com")}]


def _settings(tmp_path: Path, **env: str):  # type: ignore[no-untyped-def]
    return load_settings({"mysql.hash_columns": ("shop.people.email",)}, env={"HOME": str(tmp_path), **env},
                         cwd=tmp_path)


def test_a_key_file_must_be_private_and_long_enough(tmp_path: Path) -> None:
    key_file = tmp_path / "hash.key"
    key_file.write_text(HASH_KEY + "\n")
    key_file.chmod(0o644)
    with pytest.raises(ConfigError, match=r"hash key file .* is readable or writable by others \(mode 0644\)") as caught:
        ColumnRules.from_settings(_settings(tmp_path, CDC_MYSQL_HASH_KEY_FILE=str(key_file)).mysql)
    assert caught.value.hint == f"chmod 600 {key_file}"
    key_file.chmod(0o600)
    key = load_hash_key(_settings(tmp_path, CDC_MYSQL_HASH_KEY_FILE=str(key_file)).mysql)
    assert key is not None and key.secret == HASH_KEY.encode()  # the trailing newline is not part of it
    assert key.fingerprint == HashKey(HASH_KEY.encode(), "").fingerprint and HASH_KEY not in repr(key)
    key_file.write_text("short\n")
    with pytest.raises(ConfigError, match="is 5 bytes; at least 32 are needed"):
        load_hash_key(_settings(tmp_path, CDC_MYSQL_HASH_KEY_FILE=str(key_file)).mysql)
    with pytest.raises(ConfigError, match="both CDC_MYSQL_HASH_KEY and mysql.hash_key_file are set"):
        load_hash_key(_settings(tmp_path, CDC_MYSQL_HASH_KEY_FILE=str(key_file), CDC_MYSQL_HASH_KEY=HASH_KEY).mysql)


def test_the_key_is_a_secret_cdc_toml_may_not_hold(tmp_path: Path) -> None:
    (tmp_path / "cdc.toml").write_text(f'[mysql]\nhash_key = "{HASH_KEY}"\n')
    with pytest.raises(ConfigError, match=r"holds a secret \(mysql.hash_key\)"):
        load_settings({}, env={"HOME": str(tmp_path)}, cwd=tmp_path)
    settings = load_settings({}, env={"HOME": str(tmp_path), "CDC_MYSQL_HASH_KEY": HASH_KEY},
                             cwd=tmp_path / "elsewhere")
    assert HASH_KEY not in repr(settings)


def test_a_state_directory_hashed_without_a_key_refuses_to_go_on_keyed(tmp_path: Path) -> None:
    # Written by cdc before #26: version 1, plain SHA-256. Going on with HMAC would mix two kinds of hash.
    state = StateDir(tmp_path / "state").ensure()
    old = '{"version": 1, "exclude_columns": [], "hash_columns": ["shop.people.email"]}'
    (state.root / RULES_FILE).write_text(old)
    keyed = ColumnRules.from_settings(_settings(tmp_path, CDC_MYSQL_HASH_KEY=HASH_KEY).mysql)
    with pytest.raises(ConfigError, match=r"was hashed with plain SHA-256, without a key"):
        bind_rules(state, keyed)
    with pytest.raises(ConfigError, match=r"was hashed with plain SHA-256, without a key"):
        read_rules(state, _settings(tmp_path, CDC_MYSQL_HASH_KEY=HASH_KEY).mysql)  # verify's way in
    assert (state.root / RULES_FILE).read_text() == old
    # A version 1 file that hashed nothing is simply rewritten as version 2.
    (state.root / RULES_FILE).write_text('{"version": 1, "exclude_columns": ["shop.people.ssn"], "hash_columns": []}')
    bind_rules(state, ColumnRules(("shop.people.ssn",)))
    assert json.loads((state.root / RULES_FILE).read_text()) == {
        "version": 2, "exclude_columns": ["shop.people.ssn"], "hash_columns": [], "hash_key_fingerprint": None}


def test_rules_without_a_key_never_hash(tmp_path: Path) -> None:
    from tests.test_masking import PEOPLE

    with pytest.raises(ConfigError, match="hash_columns needs a key"):
        ColumnRules(hash_columns=("shop.people.email",)).row_masker(PEOPLE)
    with pytest.raises(ConfigError, match="hash_columns needs a key"):
        ColumnRules.from_settings(_settings(tmp_path).mysql)


def test_a_key_from_a_file_is_redacted_from_the_logs(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    # A library that logged the key (here: the table's name is the key, logged at debug by snapshot) must not
    # put it in a log line: the command registers the file's key as a secret, as it does CDC_MYSQL_HASH_KEY.
    key = "k" * 8 + fresh_db + "k" * 24
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.people (id INT PRIMARY KEY, email VARCHAR(80))")
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.`{key}` (id INT PRIMARY KEY)")
    key_file = tmp_path / "hash.key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    environment = env_for(mariadb, CDC_MYSQL_HASH_COLUMNS=f"{fresh_db}.people.email", CDC_MYSQL_DATABASES=fresh_db,
                          CDC_MYSQL_HASH_KEY_FILE=str(key_file), HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "cdc", "snapshot", "--state-dir", str(tmp_path / "state"),
                           "--log-level", "debug", "--log-format", "json"],
                          cwd=ROOT, env=environment, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert key not in done.stderr and "***" in done.stderr  # stdout is data (the summary names the table)
