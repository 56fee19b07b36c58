"""TLS settings in the option file (~/.my.cnf, --defaults-file) fail closed: where the mariadb client refuses the
server certificate (ERROR 2026), `cdc check-binlog` refuses it too, and it says what protected the connection (#26).

Two real TLS servers: one whose certificate the test CA signed, an impostor with the same names signed by
another CA. The same option file is handed to the `mariadb` client and to cdc.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rig import MariaDB
from tests.rig.tls import make_certs, server_tls_options

ROOT = Path(__file__).resolve().parents[2]
VERIFIED = "certificate and host name verified"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def servers(certs: Path) -> Iterator[dict[str, MariaDB]]:
    """"good": certificate signed by ca.pem; "impostor": the same names, signed by another CA."""
    started = {name: MariaDB(server_tls_options(certs, name)) for name in ("server", "impostor")}
    try:
        yield {"good": started["server"].start(), "impostor": started["impostor"].start()}
    finally:
        for server in started.values():
            server.cleanup()


def _option_file(tmp_path: Path, server: MariaDB, tls: str, *, host: str = "127.0.0.1", group: str = "client") -> Path:
    path = tmp_path / "my.cnf"
    # protocol=TCP: the mariadb client would take "localhost" for its unix socket; cdc ignores the option.
    path.write_text(f"[client]\nuser=root\nhost={host}\nport={server.port}\nprotocol=TCP\n[{group}]\n{tls}\n")
    return path


def _mariadb(option_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mariadb", f"--defaults-file={option_file}", "-N", "-e", "SHOW STATUS LIKE 'Ssl_cipher'"],
                          capture_output=True, text=True, timeout=60)


def _cdc(option_file: Path | None, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_") and k != "MYSQL_PWD"}
    env |= {"HOME": str(tmp_path), "COLUMNS": "300"}
    given = ["--defaults-file", str(option_file)] if option_file else []
    return subprocess.run([sys.executable, "-m", "cdc", "check-binlog", *given, "--server-id", "777027",
                           "--state-dir", str(tmp_path / "state"), *flags],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("case", ["verify-server-cert", "ssl-ca alone", "includedir", "include", "loose, own group"])
def test_a_certificate_the_ca_did_not_sign_is_refused_as_the_mariadb_client_refuses_it(
        case: str, servers: dict[str, MariaDB], certs: Path, tmp_path: Path) -> None:
    ca = certs / "ca.pem"
    conf_d = tmp_path / "conf.d"
    conf_d.mkdir()
    (conf_d / "tls.cnf").write_text(f"[client]\nssl-verify-server-cert\nssl-ca={ca}\n")
    (conf_d / "ignored.txt").write_text("[client]\nskip-ssl\n")  # !includedir reads *.cnf only
    tls, group = {
        "verify-server-cert": (f"ssl-verify-server-cert\nssl-ca={ca}", "client"),
        "ssl-ca alone": (f"ssl-ca={ca}", "client"),
        "includedir": (f"!includedir {conf_d}", "client"),
        "include": (f"!include {conf_d / 'tls.cnf'}", "client"),
        "loose, own group": (f"loose-ssl-verify-server-cert=ON\nloose_ssl_ca=\"{ca}\"", "client-mariadb"),
    }[case]
    option_file = _option_file(tmp_path, servers["impostor"], tls, group=group)
    client = _mariadb(option_file)
    assert client.returncode == 1 and client.stderr.startswith("ERROR 2026 (HY000)"), client.stderr
    done = _cdc(option_file, tmp_path)
    assert done.returncode == 1, done.stderr
    impostor = servers["impostor"]
    assert _one_line(done.stderr).startswith(
        f"error: TLS to MySQL at 127.0.0.1:{impostor.port} failed: certificate verify failed: unable to get "
        "local issuer certificate fix: check --ssl-ca"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_host_name_the_certificate_does_not_name_is_refused(servers: dict[str, MariaDB], certs: Path,
                                                              tmp_path: Path) -> None:
    option_file = _option_file(tmp_path, servers["good"], f"ssl-verify-server-cert\nssl-ca={certs / 'ca.pem'}",
                               host="localhost")  # the certificate names IP 127.0.0.1 only
    client = _mariadb(option_file)
    assert client.returncode == 1 and client.stderr.startswith("ERROR 2026 (HY000)"), client.stderr
    done = _cdc(option_file, tmp_path)
    assert done.returncode == 1, done.stderr
    assert "certificate verify failed: IP address mismatch" in _one_line(done.stderr) or \
        "certificate verify failed: Hostname mismatch" in _one_line(done.stderr), done.stderr


@pytest.mark.parametrize(("tls", "mode", "checked"), [
    ("ssl-verify-server-cert\nssl-ca={ca}", "VERIFY_IDENTITY", VERIFIED),
    ("ssl=1\nssl-ca={ca}", "VERIFY_CA", "certificate verified, host name not checked"),
    ("ssl", "REQUIRED", "certificate NOT verified"),
])
def test_check_binlog_says_how_the_connection_is_protected(servers: dict[str, MariaDB], certs: Path, tmp_path: Path,
                                                           tls: str, mode: str, checked: str) -> None:
    good = servers["good"]
    option_file = _option_file(tmp_path, good, tls.format(ca=certs / "ca.pem"))
    client = _mariadb(option_file)
    assert client.returncode == 0, client.stderr
    cipher = client.stdout.split()[1]  # what the server negotiated with the mariadb client, for the same file
    as_json = _cdc(option_file, tmp_path, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["tls"] == {
        "ssl_mode": mode, "encrypted": True, "version": "TLSv1.3", "cipher": cipher,
        "certificate_verified": mode.startswith("VERIFY"), "host_name_verified": mode == "VERIFY_IDENTITY"}
    shown = _cdc(option_file, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"connection: TLSv1.3 {cipher}, {checked} (--ssl-mode {mode})" in _one_line(shown.stderr), shown.stderr


def test_plaintext_is_reported_and_skip_ssl_is_honoured(servers: dict[str, MariaDB], mariadb: MariaDB,
                                                        tmp_path: Path) -> None:
    option_file = _option_file(tmp_path, servers["good"], "skip-ssl")
    as_json = _cdc(option_file, tmp_path, "--json")
    assert json.loads(as_json.stdout)["tls"] == {
        "ssl_mode": "DISABLED", "encrypted": False, "version": None, "cipher": None,
        "certificate_verified": False, "host_name_verified": False}
    # The session server offers no TLS: PREFERRED (the default) connects in plaintext, and says so.
    shown = _cdc(None, tmp_path, "--host", mariadb.host, "--port", str(mariadb.port), "--user", "root")
    assert "connection: not encrypted (--ssl-mode PREFERRED)" in _one_line(shown.stderr), shown.stderr


def test_ssl_in_the_option_file_never_falls_back_to_plaintext(mariadb: MariaDB, tmp_path: Path) -> None:
    # `ssl` asks for TLS (MySQL maps it to --ssl-mode=REQUIRED): the session server has none. cdc is stricter here
    # than the mariadb 10.11 client, which takes `ssl` (its default) for "TLS if offered".
    done = _cdc(_option_file(tmp_path, mariadb, "ssl"), tmp_path)
    assert done.returncode == 1, done.stderr
    assert _one_line(done.stderr).startswith(f"error: TLS to MySQL at 127.0.0.1:{mariadb.port} failed"), done.stderr


@pytest.mark.parametrize(("tls", "message"), [
    ("ssl-verify-server-cert", "mysql.ssl_mode = VERIFY_IDENTITY (from option file {file}:7: "
                               "ssl-verify-server-cert) needs --ssl-ca"),
    ("ssl-capath=/etc/ssl/certs", "option file {file}:7: ssl-capath is not supported by cdc"),
    ("!includedir {tmp}/nowhere", "option file {file}:7: !includedir {tmp}/nowhere: not a directory"),
    ("!include {tmp}/nowhere.cnf", "option file {tmp}/nowhere.cnf: No such file or directory"),
    ("ssl-verify-server-cert=maybe", "option file {file}:7: ssl-verify-server-cert='maybe' is not a boolean"),
])
def test_tls_lines_cdc_cannot_honour_are_configuration_errors(mariadb: MariaDB, tmp_path: Path, tls: str,
                                                              message: str) -> None:
    option_file = _option_file(tmp_path, mariadb, tls.format(tmp=tmp_path))
    done = _cdc(option_file, tmp_path)
    assert done.returncode == 3, done.stderr
    assert _one_line(done.stderr).startswith("error: " + message.format(file=option_file, tmp=tmp_path)), done.stderr
