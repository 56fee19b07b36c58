"""Open Snowflake connections from connections.toml or SNOWFLAKE_* variables (never from argv).

Resolution, later wins:
1. `[<name>]` of connections.toml, the file the Snowflake CLI uses: `$SNOWFLAKE_HOME/connections.toml`
   when SNOWFLAKE_HOME is set, else ~/.snowflake/connections.toml, else
   ~/.config/snowflake/connections.toml. The name is --connection / CDC_SNOWFLAKE_CONNECTION /
   cdc.toml [snowflake] connection, else SNOWFLAKE_DEFAULT_CONNECTION_NAME, else none.
2. SNOWFLAKE_ACCOUNT, _USER, _PASSWORD, _HOST, _PORT, _PROTOCOL, _DATABASE, _SCHEMA, _WAREHOUSE,
   _ROLE, _AUTHENTICATOR, _PRIVATE_KEY_FILE, _PRIVATE_KEY_FILE_PWD.
3. cdc settings (--database/--schema/--warehouse/--role, CDC_SNOWFLAKE_*, cdc.toml).
Key-pair authentication: `private_key_file` (PEM, optionally encrypted with private_key_file_pwd).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cdc.config import SnowflakeSettings
from cdc.errors import CdcError, ConfigError, ConnectError, TransientError

ENV_KEYS = ("account", "user", "password", "host", "port", "protocol", "database", "schema", "warehouse", "role",
            "authenticator", "private_key_file", "private_key_file_pwd")
_PASSED = frozenset(ENV_KEYS) | {"private_key_file_pwd", "token", "login_timeout", "network_timeout"}
_SECRETS = ("password", "private_key_file_pwd", "token")


def connections_file(env: Mapping[str, str]) -> Path:
    if env.get("SNOWFLAKE_HOME"):
        return Path(env["SNOWFLAKE_HOME"]).expanduser() / "connections.toml"
    home = Path(env.get("HOME", "~")).expanduser()
    legacy = home / ".snowflake" / "connections.toml"
    return legacy if legacy.exists() else home / ".config" / "snowflake" / "connections.toml"


def _from_file(name: str, env: Mapping[str, str]) -> dict[str, Any]:
    path = connections_file(env)
    if not path.exists():
        raise ConfigError(f"connection {name!r} asked for, but {path} does not exist",
                          hint="create it (snow connection add) or set SNOWFLAKE_HOME to its directory")
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    section = document.get(name)
    if not isinstance(section, dict):
        known = ", ".join(sorted(k for k, v in document.items() if isinstance(v, dict))) or "none"
        raise ConfigError(f"{path} has no connection [{name}] (known: {known})", hint="check --connection")
    return {key: value for key, value in section.items() if key in _PASSED}


def connection_params(settings: SnowflakeSettings, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments for snowflake.connector.connect, resolved as documented above."""
    env = os.environ if env is None else env
    name = settings.connection or env.get("SNOWFLAKE_DEFAULT_CONNECTION_NAME")
    params: dict[str, Any] = _from_file(name, env) if name else {}
    for key in ENV_KEYS:
        if env.get(f"SNOWFLAKE_{key.upper()}"):
            params[key] = env[f"SNOWFLAKE_{key.upper()}"]
    for key in ("database", "schema", "warehouse", "role"):
        if getattr(settings, key):
            params[key] = getattr(settings, key)
    if "port" in params:
        params["port"] = int(params["port"])
    if not params.get("account"):
        raise ConfigError("no Snowflake account configured",
                          hint="pass --connection NAME (connections.toml) or set SNOWFLAKE_ACCOUNT and SNOWFLAKE_USER")
    if params.get("private_key_file"):
        params.pop("password", None)
        params.setdefault("authenticator", "SNOWFLAKE_JWT")
    return params


def secret_values(params: Mapping[str, Any]) -> list[str]:
    """The secrets among the connection parameters: for a log handler to keep them out of every line."""
    return [str(params[key]) for key in _SECRETS if params.get(key)]


def describe(params: Mapping[str, Any]) -> str:
    """Where we connect, for messages: never a secret."""
    where = params.get("host") or f"{params.get('account')}.snowflakecomputing.com"
    return f"Snowflake {where} as {params.get('user')!r}"


def connect(settings: SnowflakeSettings, env: Mapping[str, str] | None = None) -> Any:
    """Open a connection with server-side bind parameters (qmark): values never become SQL text.

    A login the link or the service failed (no answer, a reset, a timeout) is a TransientError, as for MySQL: a
    rerun may succeed. A refused login (credentials, account) is a ConnectError."""
    import snowflake.connector

    params = connection_params(settings, env)
    where = f"cannot connect to {describe(params)}"
    try:
        # No telemetry, and no platform detection: the connector otherwise asks the cloud metadata services
        # (169.254.169.254, ...) about the machine at every login, for its telemetry, and the login waits on it.
        return snowflake.connector.connect(**params, paramstyle="qmark", autocommit=True,
                                           session_parameters={"CLIENT_OUT_OF_BAND_TELEMETRY_ENABLED": False},
                                           platform_detection_timeout_seconds=0.0)
    except snowflake.connector.errors.Error as exc:
        if _transient(exc):
            raise TransientError(f"{where}: {_safe_message(exc, params)}", hint=_UNREACHABLE) from None
        raise ConnectError(f"{where}: {_safe_message(exc, params)}",
                           hint="check the account, user and credentials (connections.toml or SNOWFLAKE_*)") from None
    except _network_errors() as exc:
        raise TransientError(f"{where}: the link failed: {_safe_message(exc, params)}", hint=_UNREACHABLE) from None


_UNREACHABLE = "check the host, port, proxy and network; a rerun retries (cdc run --follow does by itself)"


def cursor(conn: Any) -> GuardedCursor:
    """A cursor whose every error is mapped at this boundary (see GuardedCursor); every cdc statement goes through
    one."""
    return GuardedCursor(conn.cursor())


class GuardedCursor:
    """The connector's cursor, with its errors mapped as `refused` maps them: a refusal as CdcError, a lost link as
    TransientError. Statements and fetches both: a fetch downloads result chunks over the network too. The
    connector wraps most network failures in OperationalError, but a reset in the middle of an answer escapes as its
    HTTP library's own ChunkedEncodingError (seen in the soak with faults on the Snowflake link, where it ended
    `cdc run --follow` with a traceback)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._statement = ""
        self.statements = 0  # statements sent: each is at least one round trip to Snowflake (issue #25)

    def execute(self, statement: str, params: Any = None) -> GuardedCursor:
        self._statement = statement
        self.statements += 1
        with answered(statement):
            self.raw.execute(statement, params)
        return self

    def fetchall(self) -> list[tuple[Any, ...]]:
        with answered(self._statement):
            return list(self.raw.fetchall())

    def fetchone(self) -> tuple[Any, ...] | None:
        with answered(self._statement):
            row = self.raw.fetchone()
        return None if row is None else tuple(row)

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        with answered(self._statement):
            return list(self.raw.fetchmany(size))

    @property
    def description(self) -> Any:
        return self.raw.description

    @property
    def rowcount(self) -> int | None:
        return self.raw.rowcount  # type: ignore[no-any-return]

    def close(self) -> None:
        self.raw.close()


@contextmanager
def answered(statement: str) -> Iterator[None]:
    """Run one statement's round trip with the connector's and the network's errors mapped (see `refused`)."""
    from snowflake.connector.errors import Error

    mapped: tuple[type[BaseException], ...] = (Error, *_network_errors())
    try:
        yield
    except mapped as exc:
        raise refused(exc, statement) from None


def _network_errors() -> tuple[type[BaseException], ...]:
    """What a lost link raises when the connector does not wrap it: the socket's own errors and its vendored HTTP
    library's (requests' RequestException, urllib3's HTTPError). Not every OSError: a PUT of a missing local file
    is no network fault."""
    from snowflake.connector.vendored.requests.exceptions import RequestException
    from snowflake.connector.vendored.urllib3.exceptions import HTTPError

    return (ConnectionError, TimeoutError, RequestException, HTTPError)


def _safe_message(exc: BaseException, params: Mapping[str, Any]) -> str:
    text = str(getattr(exc, "msg", None) or exc)
    for key in _SECRETS:
        if params.get(key):
            text = text.replace(str(params[key]), "***")
    return text


def refused(exc: BaseException, statement: str) -> CdcError:
    """A Snowflake error on one statement, mapped at the boundary: what was refused, errno and sqlstate.

    Statement text is safe to show: values never become SQL text (they travel in files or binds).
    """
    head = " ".join(statement.split())[:160]
    message = str(getattr(exc, "msg", None) or exc).strip()
    code = f"errno {getattr(exc, 'errno', None)}, sqlstate {getattr(exc, 'sqlstate', None)}"
    if _transient(exc):
        return TransientError(f"Snowflake did not answer `{head}`: {message} ({code})",
                              hint="the link or the service failed, not the statement: a rerun resumes where this "
                              "one stopped (cdc run --follow retries by itself)")
    return CdcError(f"Snowflake refused `{head}`: {message} ({code})",
                    hint="check the role's privileges and the objects cdc snowflake-bootstrap created; "
                    "nothing after this statement ran, and a rerun resumes where this one stopped")


def _transient(exc: BaseException) -> bool:
    """A lost link, a timeout, throttling or the service failing (HTTP 500/502/503/504), after the connector's own
    retries. The connector raises OperationalError for the network (250003 "Failed to execute request": a reset,
    a read timeout), its HTTP classes for some statuses, HttpError with errno 290000 + status for the rest, and
    lets some resets through as its HTTP library's own exceptions. Snowflake refuses a statement in an HTTP 200
    answer (ProgrammingError and kin, with the SQL error's code): an HTTP 5xx never means "refused". In the soak
    with faults on the Snowflake link these ended `cdc run --follow` with exit 1, as if refused. (The test
    stand-in answers 500 for what it cannot run; tests/snowflake/stand_in.py makes its NOT NULL refusal
    Snowflake's.)"""
    from snowflake.connector import errors

    http = (errors.InternalServerError, errors.ServiceUnavailableError, errors.GatewayTimeoutError, errors.BadGatewayError,
            errors.OtherHTTPRetryableError, errors.RequestTimeoutError)
    if isinstance(exc, (errors.OperationalError, *http, *_network_errors())):
        return True
    errno = getattr(exc, "errno", None)
    status = errno % 290000 if isinstance(errno, int) and errno >= 290000 else 0
    return status in (429, 500, 502, 503, 504)
