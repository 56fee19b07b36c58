"""Open MySQL connections with the mysql client's TLS semantics and map driver errors at the boundary."""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import pymysql
import pymysql.connections
import pymysql.cursors

from cdc.config import MySQLSettings
from cdc.errors import ConfigError, ConnectError, PreconditionError, TransientError

# https://dev.mysql.com/doc/mysql-errors/8.0/en/client-error-reference.html
_TRANSIENT_CODES = {2003, 2006, 2013, 2055}
ACCESS_DENIED = 1045
UNKNOWN_DATABASE = 1049
# A statement refused for a missing privilege (specific, database, table) or an account refused.
PRIVILEGE_DENIED = frozenset({1044, 1045, 1142, 1227})
CR_SSL_CONNECTION_ERROR = 2026


def ssl_context(settings: MySQLSettings) -> ssl.SSLContext | None:
    """Build the TLS context for --ssl-mode, matching the mysql client.

    PyMySQL given only ssl_ca does not verify the certificate chain against it in every
    version, so we build the context ourselves and make VERIFY_* really verify.
    """
    mode = settings.ssl_mode.upper()
    if mode in ("DISABLED", "PREFERRED"):
        return None
    if mode == "REQUIRED":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        with _tls_file("--ssl-ca", settings.ssl_ca or ""):
            context = ssl.create_default_context(cafile=settings.ssl_ca)
        context.check_hostname = mode == "VERIFY_IDENTITY"
        context.verify_mode = ssl.CERT_REQUIRED
    if settings.ssl_cert:
        with _tls_file("--ssl-cert / --ssl-key", f"{settings.ssl_cert}" + (f", {settings.ssl_key}"
                                                                            if settings.ssl_key else "")):
            context.load_cert_chain(settings.ssl_cert, settings.ssl_key)
    return context


@contextmanager
def _tls_file(option: str, path: str) -> Iterator[None]:
    """A TLS file that cannot be read or is not PEM: a ConfigError naming it, not a traceback (#26)."""
    try:
        yield
    except OSError as exc:  # ssl.SSLError is an OSError too: a file that is there but holds no PEM certificate
        reason = exc.strerror or str(exc) if not isinstance(exc, ssl.SSLError) else f"not a PEM file ({exc.reason})"
        raise ConfigError(f"{option} {path}: {reason}",
                          hint="check the path (option files and cdc.toml too) and that the file is the PEM bundle"
                          ) from None


@dataclass(frozen=True)
class TlsState:
    """What protects an open connection: check-binlog reports it (text and --json)."""

    ssl_mode: str
    encrypted: bool
    version: str | None = None  # "TLSv1.3"
    cipher: str | None = None  # "TLS_AES_256_GCM_SHA384"
    certificate_verified: bool = False  # the chain was checked against --ssl-ca
    host_name_verified: bool = False  # and the certificate names the host we connected to

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if not self.encrypted:
            return f"not encrypted (--ssl-mode {self.ssl_mode})"
        checked = ("certificate and host name verified" if self.host_name_verified else
                   "certificate verified, host name not checked" if self.certificate_verified else
                   "certificate NOT verified")
        return f"{self.version} {self.cipher}, {checked} (--ssl-mode {self.ssl_mode})"


def tls_state(conn: pymysql.Connection, settings: MySQLSettings) -> TlsState:
    """Read the negotiated TLS off the connection's socket, and what its context checked."""
    sock = getattr(conn, "_sock", None)  # PyMySQL swaps in the SSLSocket after the TLS handshake
    if not isinstance(sock, ssl.SSLSocket):
        return TlsState(settings.ssl_mode.upper(), encrypted=False)
    cipher = sock.cipher()
    verified = sock.context.verify_mode == ssl.CERT_REQUIRED
    return TlsState(settings.ssl_mode.upper(), encrypted=True, version=sock.version(),
                    cipher=cipher[0] if cipher else None, certificate_verified=verified,
                    host_name_verified=verified and sock.context.check_hostname)


def connection_kwargs(settings: MySQLSettings) -> dict[str, Any]:
    """Keyword arguments for pymysql.connect (also handed to the binlog reader)."""
    kwargs: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "user": settings.user,
        "password": settings.password or "",
        "charset": "utf8mb4",
        "connect_timeout": settings.connect_timeout,
        "autocommit": True,
    }
    if settings.socket:
        kwargs["unix_socket"] = settings.socket
    mode = settings.ssl_mode.upper()
    if mode == "DISABLED":
        kwargs["ssl_disabled"] = True
    context = ssl_context(settings)
    if context is not None:
        kwargs["ssl"] = context  # an SSLContext makes PyMySQL require TLS
    return kwargs


class Connection(pymysql.connections.Connection):  # type: ignore[misc]  # PyMySQL ships no types
    """PyMySQL's connection, with one PREFERRED-mode TLS context per process that loads no CA bundle.

    Without TLS options PyMySQL builds a context per connection that loads the system's CA bundle (20-35 ms
    of CPU, ~10% of a 300,000-row snapshot) only to verify nothing (no CA: CERT_NONE, no host check), even
    when the server offers no TLS. Every binlog stream opens two connections, a snapshot one per table or
    worker. Explicit TLS settings (an SSLContext from ssl_context above) pass through unchanged.
    """

    def connect(self, sock: Any = None) -> None:
        # PyMySQL bounds only the TCP connect by connect_timeout; the server's greeting and the login are read with
        # read_timeout, None by default: a hung host (or a stalled proxy) then holds `cdc check-binlog` forever.
        # The mysql client bounds the whole handshake by its connect_timeout: so do we. PyMySQL re-applies
        # _read_timeout to the socket before its next read, so the caller's own read timeout holds afterwards.
        wanted: float | None = getattr(self, "_read_timeout", None)
        self._read_timeout = wanted or self.connect_timeout
        try:
            super().connect(sock)
        finally:
            self._read_timeout = wanted

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:
            return _preferred_context()
        return super()._create_ssl_ctx(sslp)


@functools.cache
def _preferred_context() -> ssl.SSLContext:
    # What PyMySQL's own PREFERRED context does (encrypt, verify nothing), minus loading trust anchors
    # that CERT_NONE never consults; the mysql client's PREFERRED does not verify either.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def bounded_waits(settings: MySQLSettings, seconds: float) -> dict[str, Any]:
    """Connection options under which no wait (connect, handshake, read, write) lasts longer than `seconds`.

    For the connections a long-running reader keeps beside its stream (tail's schema and lag queries): without
    a read timeout, one query sent into a blackholed link (a dead NAT entry, a stalled proxy) waits forever,
    and the stream's own read timeout never gets a chance to notice (issue #27).
    """
    return {"connect_timeout": min(settings.connect_timeout, seconds), "read_timeout": seconds,
            "write_timeout": seconds}


def open_connection(settings: MySQLSettings, *, database: str | None = None, **extra: Any) -> pymysql.Connection:
    """Connect, turning driver errors into messages that name the server and the fix."""
    kwargs = connection_kwargs(settings) | extra
    if database:
        kwargs["database"] = database
    try:
        return Connection(**kwargs)
    except pymysql.err.OperationalError as exc:
        raise map_error(exc, settings) from None
    except ssl.SSLError as exc:
        raise tls_error(str(exc.reason or exc), settings) from None


# "Can't connect to MySQL server on 'h' ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: ... (_ssl.c:1006))"
_SSL_REASON = re.compile(r"\[SSL(?:: [A-Z_]+)?\] (?P<reason>.*?)(?: \(_ssl\.c:\d+\))?\)?$")


def tls_error(reason: str, settings: MySQLSettings) -> ConnectError:
    found = _SSL_REASON.search(reason)
    return ConnectError(
        f"TLS to MySQL at {settings.describe()} failed: {found['reason'] if found else reason}",
        hint="check --ssl-ca (the CA that signed the server certificate), the host name the certificate was issued "
        "for (VERIFY_IDENTITY) and --ssl-mode",
    )


def is_tls_failure(code: int | None, text: str) -> bool:
    """A refused certificate or a server without TLS: permanent, never worth a reconnect."""
    # PyMySQL reports a failed handshake as error 2003 ("Can't connect") with the ssl error in the text,
    # and REQUIRED against a server without TLS as 2026.
    return code == CR_SSL_CONNECTION_ERROR or "[SSL" in text or "CERTIFICATE_VERIFY_FAILED" in text


def map_error(exc: BaseException, settings: MySQLSettings) -> Exception:
    """Translate a PyMySQL error into a CdcError; never include the password."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    where = f"MySQL at {settings.describe()} as user {settings.user!r}"
    if is_tls_failure(code, text):
        return tls_error(text, settings)
    if code == ACCESS_DENIED:
        return ConnectError(
            f"{where}: access denied",
            hint="check the user and the password (CDC_MYSQL_PASSWORD, MYSQL_PWD or ~/.my.cnf); "
            "passwords are never read from the command line",
        )
    if code == UNKNOWN_DATABASE:
        return PreconditionError(f"{where}: {text}")
    if code in _TRANSIENT_CODES:
        return TransientError(f"cannot reach {where}: {text}", hint="check the host, port, firewall and that the server runs")
    return ConnectError(f"{where}: error {code}: {text}")


@contextmanager
def connection(settings: MySQLSettings, **extra: Any) -> Iterator[pymysql.Connection]:
    conn = open_connection(settings, **extra)
    try:
        yield conn
    finally:
        conn.close()


def query(conn: pymysql.Connection, sql: str, params: Any = None) -> list[dict[str, Any]]:
    """Run one statement and return rows as dicts (column names as the server spells them)."""
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def variables(conn: pymysql.Connection, names: list[str]) -> dict[str, str]:
    """Read global variables by name; missing ones are absent from the result."""
    # SHOW works on every flavour; information_schema.GLOBAL_VARIABLES is gone from MySQL 8.
    placeholders = ", ".join(["%s"] * len(names))
    with conn.cursor() as cursor:
        cursor.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", [n.lower() for n in names])
        rows = cursor.fetchall()
    return {str(name).lower(): "" if value is None else str(value) for name, value in rows}

