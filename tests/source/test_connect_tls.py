"""--ssl-mode against a real TLS server: VERIFY_CA and VERIFY_IDENTITY really verify, REQUIRED never falls back.

The certificates are made by tests/rig/tls.py: a CA, a server certificate it signed for IP 127.0.0.1 only, and an
unrelated CA. PyMySQL given only ssl_ca does not check the chain in every version, so these tests
connect for real and expect the handshake to fail where the mysql client's would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.capture import Filters, StartRequest, TailOptions, run_tail
from cdc.config import load_settings
from cdc.errors import ConnectError
from cdc.source.connect import connection, query
from tests.capture.conftest import binlog_start, changelog_lines
from tests.rig import MariaDB
from tests.rig.tls import make_certs, server_tls_options

PASSWORD = "tls-Pa55 'x\""


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem, server.pem/server.key (signed by ca, for IP 127.0.0.1), other-ca.pem (signed nothing)."""
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_server(certs: Path) -> Iterator[MariaDB]:
    """A server with TLS (the session server has none), shared by this module's tests."""
    server = MariaDB(server_tls_options(certs))
    try:
        server.start()
        # REQUIRE SSL: a plaintext connection of this user (control or binlog stream) is refused by the server.
        server.execute("CREATE USER cdc_tls@'%%' IDENTIFIED BY %s REQUIRE SSL", (PASSWORD,))
        server.execute("GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO cdc_tls@'%'")
        yield server
    finally:
        server.cleanup()


def _settings(server: MariaDB, tmp_path: Path, mode: str, ca: Path | None = None, host: str | None = None):
    flags = {"mysql.host": host or server.host, "mysql.port": server.port, "mysql.user": "cdc_tls",
             "mysql.ssl_mode": mode, "state_dir": str(tmp_path / "state")}
    if ca is not None:
        flags["mysql.ssl_ca"] = str(ca)
    return load_settings(flags, env={"HOME": str(tmp_path), "CDC_MYSQL_PASSWORD": PASSWORD}, cwd=tmp_path)


def _cipher(settings) -> str:  # type: ignore[no-untyped-def]
    with connection(settings.mysql) as conn:
        return str(query(conn, "SHOW SESSION STATUS LIKE 'Ssl_cipher'")[0]["Value"])


@pytest.mark.parametrize(("mode", "ca", "host"), [
    ("PREFERRED", None, None),  # TLS when offered (docs/config.md), as the mysql client does; needs PyMySQL 1.2+
    ("REQUIRED", None, None),
    ("VERIFY_CA", "ca.pem", None),
    ("VERIFY_CA", "ca.pem", "localhost"),  # VERIFY_CA checks the chain, not the name
    ("VERIFY_IDENTITY", "ca.pem", None),
])
def test_modes_that_connect_use_tls(tls_server: MariaDB, certs: Path, tmp_path: Path, mode: str, ca: str | None,
                                    host: str | None) -> None:
    assert _cipher(_settings(tls_server, tmp_path, mode, ca and certs / ca, host)) != ""


@pytest.mark.parametrize(("mode", "ca", "host", "reason"), [
    ("VERIFY_CA", "other-ca.pem", None, "certificate verify failed"),
    ("VERIFY_IDENTITY", "other-ca.pem", None, "certificate verify failed"),
    ("VERIFY_IDENTITY", "ca.pem", "localhost", "certificate verify failed"),  # signed for 127.0.0.1 only
])
def test_verify_modes_refuse_a_certificate_they_cannot_trust(tls_server: MariaDB, certs: Path, tmp_path: Path,
                                                             mode: str, ca: str, host: str | None, reason: str) -> None:
    with pytest.raises(ConnectError) as caught:
        _cipher(_settings(tls_server, tmp_path, mode, certs / ca, host))
    assert caught.value.message.startswith(f"TLS to MySQL at {host or tls_server.host}:{tls_server.port} failed")
    assert reason in caught.value.message
    assert "--ssl-ca" in (caught.value.hint or "")


def test_required_never_falls_back_to_plaintext(mariadb: MariaDB, tmp_path: Path) -> None:
    # The session server offers no TLS: the mysql client's REQUIRED fails there, and so must we.
    flags = {"mysql.host": mariadb.host, "mysql.port": mariadb.port, "mysql.user": "root", "mysql.ssl_mode": "REQUIRED"}
    settings = load_settings(flags, env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert mariadb.variable("have_ssl") != "YES"
    with pytest.raises(ConnectError) as caught:
        _cipher(settings)
    assert caught.value.message.startswith(f"TLS to MySQL at {mariadb.host}:{mariadb.port} failed")


def test_tail_reads_the_binlog_over_verified_tls(tls_server: MariaDB, certs: Path, tmp_path: Path) -> None:
    start = binlog_start(tls_server)
    tls_server.execute("CREATE DATABASE s")
    tls_server.execute("CREATE TABLE s.t (id INT PRIMARY KEY)")
    tls_server.execute("INSERT INTO s.t VALUES (1)")
    settings = _settings(tls_server, tmp_path, "VERIFY_IDENTITY", certs / "ca.pem")
    # cdc_tls REQUIRE SSL: the binlog stream connection works only if it, too, is TLS.
    run_tail(settings, TailOptions(StartRequest(position=start), filters=Filters(databases=("s",))))
    assert [(line["op"], line["table"]) for line in changelog_lines(tmp_path / "state")] == [("ddl", "t"), ("c", "t")]
    (tmp_path / "w").mkdir()
    wrong = _settings(tls_server, tmp_path / "w", "VERIFY_CA", certs / "other-ca.pem")
    with pytest.raises(ConnectError, match="certificate verify failed"):
        run_tail(wrong, TailOptions(StartRequest(position=start), filters=Filters(databases=("s",))))


def test_disabled_means_plaintext(tls_server: MariaDB, tmp_path: Path) -> None:
    # cdc_tls REQUIRE SSL: refused in plaintext, which proves DISABLED did not negotiate TLS.
    with pytest.raises(ConnectError, match="access denied"):
        _cipher(_settings(tls_server, tmp_path, "DISABLED"))


def test_preferred_connections_share_one_tls_context(tls_server: MariaDB, certs: Path, tmp_path: Path) -> None:
    # PyMySQL would build a context (loading the CA bundle) per connection; PREFERRED verifies nothing, so
    # one context serves every connection and both still negotiate TLS.
    settings = _settings(tls_server, tmp_path, "PREFERRED")
    with connection(settings.mysql) as first, connection(settings.mysql) as second:
        assert first.ctx is second.ctx
        for conn in (first, second):
            assert query(conn, "SHOW SESSION STATUS LIKE 'Ssl_cipher'")[0]["Value"] != ""
    verified = _settings(tls_server, tmp_path, "VERIFY_CA", certs / "ca.pem")
    with connection(verified.mysql) as own:
        assert own.ctx is not first.ctx and own.ctx.verify_mode.name == "CERT_REQUIRED"
    # nothing to verify against: PREFERRED loads no trust anchors (the CA bundle cost 20-35 ms a process)
    assert first.ctx.verify_mode.name == "CERT_NONE" and first.ctx.cert_store_stats()["x509_ca"] == 0
