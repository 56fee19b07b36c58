"""A table name (or a value) holding ESC or another control character reaches the terminal spelled out, never
raw: `\\x1b[2J` would clear the screen, `\\x1b]0;...\\x07` retitle the window, U+202E reverse the line (#26)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.rig import MariaDB
from tests.security.hostile import q

ROOT = Path(__file__).resolve().parents[2]
NAME = "e\x1b[2J\x1b]0;owned\x07 \u202eevil\rx\ny"
SHOWN = "e\\x1b[2J\\x1b]0;owned\\x07 \\u202eevil\\x0dx"  # then a newline (a line break, harmless) and y


def test_check_binlog_spells_out_control_characters_in_a_table_name(mariadb: MariaDB, fresh_db: str,
                                                                    tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE {q(fresh_db)}.{q(NAME)} (v INT)")  # keyless: check-binlog names it
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")} | {
        "HOME": str(tmp_path), "COLUMNS": "400"}
    argv = [sys.executable, "-m", "cdc", "check-binlog", "--host", mariadb.host, "--port", str(mariadb.port),
            "--user", "root", "--databases", fresh_db, "--server-id", "777026", "--state-dir", str(tmp_path / "s")]
    shown = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=120)
    output = (shown.stdout + shown.stderr).decode()
    assert f"1 table(s) without a primary key: {fresh_db}.{SHOWN}" in output, output
    assert not any(c in output for c in "\x1b\x07\u202e\r"), output
    # --json is for machines: JSON escapes the control characters itself, and the name is exact.
    as_json = subprocess.run([*argv, "--json"], cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert b"\x1b" not in as_json.stdout
    checks = {c["name"]: c for c in json.loads(as_json.stdout)["checks"]}
    assert checks["primary_keys"]["value"] == f"1 table(s) without a primary key: {fresh_db}.{NAME}"


C1_NAME = "c1\u009b2J\u0085\u009d0;owned\u009c \u202eevil\u2028x"  # CSI, NEL, OSC ... ST, RLO, LINE SEPARATOR


def test_json_output_escapes_c1_and_bidi_characters_and_stays_exact(mariadb: MariaDB, fresh_db: str,
                                                                     tmp_path: Path) -> None:
    # JSON escapes U+0000-U+001F itself, not U+0080-U+009F (C1: U+009B is CSI to a terminal that honours C1) nor
    # bidi overrides: --json spells them \uXXXX, which decodes to the same name (#26).
    mariadb.execute(f"CREATE TABLE {q(fresh_db)}.{q(C1_NAME)} (v INT)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")} | {"HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "cdc", "check-binlog", "--host", mariadb.host, "--port", str(mariadb.port),
            "--user", "root", "--databases", fresh_db, "--server-id", "777026", "--state-dir", str(tmp_path / "s")]
    as_json = subprocess.run([*argv, "--json"], cwd=ROOT, env=env, capture_output=True, timeout=120)
    raw = as_json.stdout.decode()
    assert not any("\u0080" <= c <= "\u009f" or c in "\u202e\u2028\x7f" for c in raw), ascii(raw)
    assert "c1\\u009b2J\\u0085\\u009d0;owned\\u009c \\u202eevil\\u2028x" in raw
    checks = {c["name"]: c for c in json.loads(raw)["checks"]}
    assert checks["primary_keys"]["value"] == f"1 table(s) without a primary key: {fresh_db}.{C1_NAME}"
    shown = subprocess.run(argv, cwd=ROOT, env={**env, "COLUMNS": "400"}, capture_output=True, timeout=120)
    text = (shown.stdout + shown.stderr).decode()
    assert f"{fresh_db}.c1\\x9b2J\\x85\\x9d0;owned\\x9c \\u202eevil\\u2028x" in text, text
