"""A mistyped or wrong --ssl-ca / --ssl-cert is a configuration error (exit 3) naming the file, not a
traceback (#26)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("case", ["missing", "not-pem", "directory", "missing-cert"])
def test_an_unreadable_tls_file_is_exit_3_naming_it(case: str, mariadb: MariaDB, tmp_path: Path) -> None:
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("not a certificate\n")
    flags, expected = {
        "missing": (["--ssl-ca", str(tmp_path / "ca.pme")], f"--ssl-ca {tmp_path / 'ca.pme'}: No such file or directory"),
        "not-pem": (["--ssl-ca", str(not_pem)], f"--ssl-ca {not_pem}: not a PEM file (NO_CERTIFICATE_OR_CRL_FOUND)"),
        "directory": (["--ssl-ca", str(tmp_path)], f"--ssl-ca {tmp_path}: Is a directory"),
        "missing-cert": (["--ssl-mode", "REQUIRED", "--ssl-cert", str(tmp_path / "me.crt")],
                         f"--ssl-cert / --ssl-key {tmp_path / 'me.crt'}: No such file or directory"),
    }[case]
    mode = [] if "--ssl-mode" in flags else ["--ssl-mode", "VERIFY_CA"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")} | {"HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "cdc", "check-binlog", "--host", mariadb.host, "--port",
                           str(mariadb.port), "--user", "root", *mode, *flags, "--state-dir", str(tmp_path / "s")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert " ".join(done.stderr.split()).startswith(f"error: {expected} fix: check the path"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
