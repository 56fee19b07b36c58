"""Where a Snowflake connection comes from: connections.toml, SNOWFLAKE_* variables, cdc settings; key-pair auth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.config import SnowflakeSettings
from cdc.errors import ConfigError
from cdc.snowflake.connect import connect, connection_params, describe
from tests.snowflake.stand_in import rows

TOML = """\
[prod]
account = "acme-prod"
user = "loader"
password = "file-secret"
warehouse = "FILE_WH"
database = "FILE_DB"
unknown_key = "ignored"

[keypair]
account = "acme-kp"
user = "svc"
private_key_file = "{key}"
"""


def _home(tmp_path: Path, key: str = "/keys/rsa_key.p8") -> dict[str, str]:
    (tmp_path / "connections.toml").write_text(TOML.format(key=key), encoding="utf-8")
    return {"SNOWFLAKE_HOME": str(tmp_path)}


def test_named_connection_from_connections_toml(tmp_path: Path) -> None:
    params = connection_params(SnowflakeSettings(connection="prod"), _home(tmp_path))
    assert params == {"account": "acme-prod", "user": "loader", "password": "file-secret", "warehouse": "FILE_WH",
                      "database": "FILE_DB"}


def test_default_connection_name_and_precedence(tmp_path: Path) -> None:
    """SNOWFLAKE_* variables override the file; cdc's own settings (flags, cdc.toml) override both."""
    env = _home(tmp_path) | {"SNOWFLAKE_DEFAULT_CONNECTION_NAME": "prod", "SNOWFLAKE_WAREHOUSE": "ENV_WH",
                             "SNOWFLAKE_DATABASE": "ENV_DB", "SNOWFLAKE_PASSWORD": "env-secret",
                             "SNOWFLAKE_PORT": "8443"}
    params = connection_params(SnowflakeSettings(database="FLAG_DB", role="LOADER_ROLE"), env)
    assert params == {"account": "acme-prod", "user": "loader", "password": "env-secret", "warehouse": "ENV_WH",
                      "database": "FLAG_DB", "role": "LOADER_ROLE", "port": 8443}


def test_environment_only(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "SNOWFLAKE_ACCOUNT": "acme", "SNOWFLAKE_USER": "u", "SNOWFLAKE_PASSWORD": "p"}
    assert connection_params(SnowflakeSettings(), env) == {"account": "acme", "user": "u", "password": "p"}


def test_key_pair_authentication(tmp_path: Path) -> None:
    env = _home(tmp_path) | {"SNOWFLAKE_PASSWORD": "must-not-be-sent", "SNOWFLAKE_PRIVATE_KEY_FILE_PWD": "kp"}
    params = connection_params(SnowflakeSettings(connection="keypair"), env)
    assert params == {"account": "acme-kp", "user": "svc", "private_key_file": "/keys/rsa_key.p8",
                      "private_key_file_pwd": "kp", "authenticator": "SNOWFLAKE_JWT"}


@pytest.mark.parametrize(
    ("settings", "env", "needle"),
    [
        (SnowflakeSettings(connection="nope"), {}, "has no connection [nope] (known: keypair, prod)"),
        (SnowflakeSettings(), {}, "no Snowflake account configured"),
    ],
)
def test_missing_connection_is_a_config_error(tmp_path: Path, settings: SnowflakeSettings, env: dict[str, str],
                                              needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        connection_params(settings, _home(tmp_path) | env)
    assert needle in str(caught.value) and caught.value.exit_code == 3


def test_missing_connections_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="connections.toml does not exist"):
        connection_params(SnowflakeSettings(connection="prod"), {"SNOWFLAKE_HOME": str(tmp_path / "none")})


def test_describe_never_shows_a_secret(tmp_path: Path) -> None:
    params = connection_params(SnowflakeSettings(connection="prod"), _home(tmp_path))
    assert "file-secret" not in describe(params) and "acme-prod" in describe(params)


def test_failed_connection_hides_the_password(snowflake_home: Path, tmp_path: Path) -> None:
    """A failed login names where, never the password (the connector's message may echo parameters). Nothing
    answers on port 9: that is a link failure (TransientError, exit 10, as for MySQL), not a refusal."""
    from cdc.errors import TransientError

    env = {"SNOWFLAKE_HOME": str(snowflake_home), "SNOWFLAKE_DEFAULT_CONNECTION_NAME": "fake",
           "SNOWFLAKE_HOST": "127.0.0.1", "SNOWFLAKE_PORT": "9", "SNOWFLAKE_PASSWORD": "s3cr3t-value"}
    with pytest.raises(TransientError) as caught:
        connect(SnowflakeSettings(), env)
    assert "s3cr3t-value" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_key_pair_connects_through_the_real_connector(snowflake_home: Path, fakesnow_server: dict[str, Any],
                                                      tmp_path: Path) -> None:
    """The connector loads the (encrypted) PEM key and signs a JWT; fakesnow accepts any login."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(b"kp-pass"))
    (tmp_path / "rsa_key.p8").write_bytes(pem)
    toml = (f'[kp]\naccount = "fakesnow"\nuser = "svc"\nprivate_key_file = "{tmp_path / "rsa_key.p8"}"\n'
            f'host = "{fakesnow_server["host"]}"\nport = {fakesnow_server["port"]}\nprotocol = "http"\n'
            "network_timeout = 5\n")
    (tmp_path / "connections.toml").write_text(toml, encoding="utf-8")
    env = {"SNOWFLAKE_HOME": str(tmp_path), "SNOWFLAKE_PRIVATE_KEY_FILE_PWD": "kp-pass"}
    conn = connect(SnowflakeSettings(connection="kp"), env)
    try:
        assert rows(conn, "SELECT 1 + 1") == [(2,)]
    finally:
        conn.close()


_SOCKET_CONNECTS: list[str] = []


def _note_connects(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _SOCKET_CONNECTS and isinstance(args[1], tuple):
        _SOCKET_CONNECTS.append(str(args[1][0]))


def test_connect_probes_no_cloud_metadata_service(snowflake_home: Path) -> None:
    """The connector's platform detection (telemetry) asks the cloud metadata services (169.254.169.254, ...) about
    the machine at every login: cdc sends the connector no telemetry, and a login waits on no such probe."""
    import sys
    import threading

    sys.addaudithook(_note_connects)  # audit hooks cannot be removed: it records only while the list is not empty
    _SOCKET_CONNECTS.append("start")
    env = {"SNOWFLAKE_HOME": str(snowflake_home), "SNOWFLAKE_DEFAULT_CONNECTION_NAME": "fake"}
    try:
        conn = connect(SnowflakeSettings(), env)
        try:
            assert rows(conn, "SELECT 1 + 1") == [(2,)]
        finally:
            conn.close()
        for thread in threading.enumerate():  # the detection runs in a pool of its own
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join(timeout=5)
    finally:
        seen, _SOCKET_CONNECTS[:] = list(_SOCKET_CONNECTS[1:]), []
    assert seen, "no socket connect was seen at all: the test would prove nothing"
    assert not [host for host in seen if host.startswith("169.254.") or host.startswith("fd00:ec2")], seen


def test_a_lost_link_or_a_5xx_is_transient_a_refusal_is_not() -> None:
    """The connector's own errors, as it raises them: the soak with faults on the Snowflake link saw lost links end
    `cdc run --follow` with exit 1, as if the statement had been refused. Snowflake refuses a statement in an HTTP
    200 answer; a 500 is the service failing (the long soak's MERGE hit one when the stand-in failed on a resent
    request)."""
    from snowflake.connector import errors

    from cdc.errors import ExitCode, TransientError
    from cdc.snowflake.connect import refused

    lost = errors.OperationalError(msg="Failed to execute request: ('Connection aborted.', ConnectionResetError(104))",
                                   errno=250003)
    unavailable = errors.HttpError(msg="503 Service Unavailable", errno=290503)
    http_500 = errors.HttpError(msg="290500: HTTP 500: Internal Server Error", errno=580500)
    throttled = errors.HttpError(msg="429 Too Many Requests", errno=290429)
    denied = errors.ProgrammingError(msg="SQL access control error: Insufficient privileges", errno=3001,
                                     sqlstate="42501")
    forbidden = errors.HttpError(msg="403 Forbidden", errno=290403)
    for exc in (lost, unavailable, throttled, http_500):
        mapped = refused(exc, "SELECT CURRENT_SCHEMA()")
        assert isinstance(mapped, TransientError) and mapped.exit_code == ExitCode.TRANSIENT, exc
        assert "did not answer `SELECT CURRENT_SCHEMA()`" in mapped.message
    for exc in (denied, forbidden):
        mapped = refused(exc, "SELECT 1")
        assert not isinstance(mapped, TransientError) and "refused" in mapped.message, exc
