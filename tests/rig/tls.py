"""Certificates for TLS servers in tests: a CA, a server certificate it signed, and an impostor.

    folder = make_certs(tmp_path)                       # ca.pem, server.pem/.key, other-ca.pem, impostor.pem/.key
    MariaDB(server_tls_options(folder, "server"))      # a server whose certificate ca.pem signed
    MariaDB(server_tls_options(folder, "impostor"))    # same names, signed by another CA: a client trusting
                                                        # ca.pem must refuse it (the mariadb client: ERROR 2026)

Both server certificates are issued for IP 127.0.0.1 only, so VERIFY_IDENTITY to "localhost" fails.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .mariadb import OptionValue


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def certificate(subject: str, key: ec.EllipticCurvePrivateKey,
                issuer: tuple[str, ec.EllipticCurvePrivateKey] | None, *, ca: bool) -> x509.Certificate:
    """A CA certificate (issuer None: self-signed) or a server certificate for 127.0.0.1 signed by `issuer`."""
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
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                        critical=False)
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def write_pem(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
    """<path>.pem, and <path>.key (unencrypted) when a key is given."""
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))


def make_certs(folder: Path) -> Path:
    """ca.pem; server.pem/.key signed by it; other-ca.pem; impostor.pem/.key signed by other-ca (same names)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, server_key, other_key, impostor_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(4))
    write_pem(folder / "ca", certificate("cdc test CA", ca_key, None, ca=True))
    write_pem(folder / "server", certificate("cdc test server", server_key, ("cdc test CA", ca_key), ca=False),
              server_key)
    write_pem(folder / "other-ca", certificate("another CA", other_key, None, ca=True))
    write_pem(folder / "impostor", certificate("cdc test server", impostor_key, ("another CA", other_key), ca=False),
              impostor_key)
    return folder


def server_tls_options(folder: Path, name: str = "server") -> dict[str, OptionValue]:
    """mariadbd options serving <name>.pem / <name>.key (the server trusts ca.pem for client certificates)."""
    return {"ssl-ca": str(folder / "ca.pem"), "ssl-cert": str(folder / f"{name}.pem"),
            "ssl-key": str(folder / f"{name}.key")}
