"""--ssl-mode against a real TLS server: VERIFY_CA and VERIFY_IDENTITY really verify, REQUIRED never falls back.

The certificates are made here: a CA, a server certificate it signed for IP 127.0.0.1 only, and an
unrelated CA. PyMySQL given only ssl_ca does not check the chain in every version, so these tests
connect for real and expect the handshake to fail where the mysql client's would.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cdc.capture import Filters, StartRequest, TailOptions, run_tail
from cdc.config import load_settings
from cdc.errors import ConnectError
from cdc.source.connect import connection, query
from tests.capture.conftest import binlog_start, changelog_lines
from tests.rig import MariaDB

PASSWORD = "tls-Pa55 'x\""


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
                 *, ca: bool) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    issuer_name, issuer_key = (subject, key) if issuer is None else issuer
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer_name))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        # The server is 127.0.0.1 and nothing else: VERIFY_IDENTITY to "localhost" must fail.
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                        critical=False)
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem, server.pem/server.key (signed by ca, for IP 127.0.0.1), other-ca.pem (signed nothing)."""
    folder = tmp_path_factory.mktemp("certs")
    ca_key, server_key, other_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    _write(folder / "ca", _certificate("cdc test CA", ca_key, None, ca=True))
    _write(folder / "server", _certificate("cdc test server", server_key, ("cdc test CA", ca_key), ca=False), server_key)
    _write(folder / "other-ca", _certificate("another CA", other_key, None, ca=True))
    return folder


@pytest.fixture(scope="module")
def tls_server(certs: Path) -> Iterator[MariaDB]:
    """A server with TLS (the session server has none), shared by this module's tests."""
    server = MariaDB({"ssl-ca": str(certs / "ca.pem"), "ssl-cert": str(certs / "server.pem"),
                      "ssl-key": str(certs / "server.key")})
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
