"""One typed settings object, resolved flag > environment (CDC_*) > cdc.toml > MySQL option file > default.

Every resolved value remembers where it came from, so a validation error can say
"mysql.port = 'abc' (from environment CDC_MYSQL_PORT) is not a port number".
Secrets are never read from cdc.toml or flags: passwords come from the environment,
a MySQL option file (~/.my.cnf or --defaults-file), or a prompt at a TTY.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from cdc.durations import parse_duration
from cdc.errors import CdcError, ConfigError
from cdc.option_file import Option, flag_value, read_options

SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
SECRET_KEYS = frozenset({"password", "private_key_passphrase", "aws_secret_access_key", "token", "hash_key"})
LOG_LEVELS = ("debug", "info", "warning", "error")
SSE_MODES = ("AES256", "aws:kms")
LOG_FORMATS = ("text", "json")
# The flags whose name is not --<last part of the key>.
_FLAG_NAMES = {"log.level": "--log-level", "log.format": "--log-format"}


@dataclass(frozen=True)
class MySQLSettings:
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str | None = field(default=None, repr=False)
    socket: str | None = None
    defaults_file: str | None = None
    ssl_mode: str = "PREFERRED"
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    connect_timeout: int = 10
    # The server_id our binlog reader announces; 0 means "derive one" (see reader_server_id).
    server_id: int = 0
    databases: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    exclude_tables: tuple[str, ...] = ()
    # DB.TABLE.COLUMN globs never written / written as HMAC-SHA-256 hex, by snapshot and tail alike
    # (fixed per state directory, with the key's fingerprint: cdc.masking.bind_rules).
    exclude_columns: tuple[str, ...] = ()
    hash_columns: tuple[str, ...] = ()
    # The HMAC key of hash_columns: CDC_MYSQL_HASH_KEY (a secret: refused in cdc.toml), or a 0600 file.
    hash_key: str | None = field(default=None, repr=False)
    hash_key_file: str | None = None
    # The table `cdc resnapshot` writes its watermarks to, and tail reads them from (cdc.watermarks).
    watermark_table: str = "cdc.watermarks"
    # host or host:port of every server of one replication topology: tail reads the writable one and follows a
    # failover or switchover to another by GTIDs (cdc.source.topology). Empty: host/port only, --rebase by hand.
    hosts: tuple[str, ...] = ()

    def reader_server_id(self) -> int:
        """Our replica server_id: the configured one, else a stable value derived from host/port/user.

        Never 0 (the server refuses it) and never random: two runs of the same pipeline must
        announce the same id, and a collision with a real replica kicks that replica off.
        """
        if self.server_id:
            return self.server_id
        digest = hashlib.sha256(f"cdc:{self.host}:{self.port}:{self.user}".encode()).digest()
        return 1_000_000_000 + int.from_bytes(digest[:4], "big") % 1_000_000_000

    def describe(self) -> str:
        return self.socket or f"{self.host}:{self.port}"


@dataclass(frozen=True)
class AWSSettings:
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    stream: str | None = None
    bucket: str | None = None
    prefix: str = "cdc"
    roll_size: int = 128  # MiB: ship --to s3 closes a batch (and cuts a table's object) at this payload
    roll_interval: float = 60.0  # seconds the oldest segment of an open S3 batch may wait (--follow)
    # Server-side encryption of every object cdc writes to S3: AES256 (SSE-S3) or aws:kms (SSE-KMS, with
    # sse_kms_key_id, else the account's aws/s3 key). None: the bucket's default encryption.
    sse: str | None = None
    sse_kms_key_id: str | None = None


# The JVM `cdc run --follow` keeps for its whole life (issue #27): G1 never gave back the heap a burst had made it
# commit, so the soak's JVM went from ~0.3 to ~1.1 GiB in each run's first minutes and stayed there; metaspace (Spark
# generates classes for every query plan) had no bound at all. Min/MaxHeapFreeRatio let G1 uncommit at the end of
# a marking cycle, the periodic collection does so when the writes pause. Metaspace measured: ~50 MiB in the soak's
# JVM, ~170 MiB in JVMs that ran larger merges (docs/config.md).
FOLLOW_JAVA_OPTIONS = ("-XX:MaxMetaspaceSize=384m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 "
                       "-XX:G1PeriodicGCInterval=60000")


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    driver_memory: str = "2g"
    conf: tuple[str, ...] = ()
    # `cdc run --follow`: the heap of its JVM (Spark's own default; a cycle merges seconds of writes) and its options.
    follow_driver_memory: str = "1g"
    follow_java_options: str = FOLLOW_JAVA_OPTIONS


@dataclass(frozen=True)
class SnowflakeSettings:
    connection: str | None = None
    database: str | None = None
    schema: str | None = None
    warehouse: str | None = None
    role: str | None = None


@dataclass(frozen=True)
class LogSettings:
    """The logs of the long-running commands (commands/logs.py sets them up; the library only logs)."""

    level: str = "info"  # debug | info | warning | error
    format: str = "text"  # text | json (one JSON object per line)
    status_interval: str = "30s"  # tail/run: a status line this often without a terminal; 0 = never

    def status_seconds(self) -> float:
        return parse_duration(self.status_interval, "log.status_interval")


@dataclass(frozen=True)
class Settings:
    state_dir: str = ".cdc"
    mysql: MySQLSettings = MySQLSettings()
    aws: AWSSettings = AWSSettings()
    spark: SparkSettings = SparkSettings()
    snowflake: SnowflakeSettings = SnowflakeSettings()
    log: LogSettings = LogSettings()
    # "mysql.port" -> "flag --port" / "environment CDC_MYSQL_PORT" / "cdc.toml" / "option file" / "default"
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def source_of(self, key: str) -> str:
        return self.sources.get(key, "default")


SECTIONS: dict[str, type] = {
    "mysql": MySQLSettings,
    "aws": AWSSettings,
    "spark": SparkSettings,
    "snowflake": SnowflakeSettings,
    "log": LogSettings,
}


def load_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    config_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Resolve settings from flags (dotted keys such as "mysql.host"; None = not given) and the rest."""
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None and v != ()}
    layers: list[tuple[str, dict[str, Any]]] = []
    toml_path, toml_values = _read_toml(config_path, cwd or Path.cwd(), env)
    defaults_file = flags.get("mysql.defaults_file") or env.get("CDC_MYSQL_DEFAULTS_FILE") or toml_values.get(
        "mysql.defaults_file"
    )
    option_file, tls_why = _read_option_file(defaults_file, env)
    layers.append(("option file", option_file))
    layers.append((f"config file {toml_path}", toml_values))
    layers.append(("environment", _read_env(env)))
    layers.append(("flag", dict(flags)))
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for origin, values in layers:
        for key, value in values.items():
            merged[key] = value
            sources[key] = _describe_origin(origin, key)
    if sources.get("mysql.ssl_mode") == "option file":
        sources["mysql.ssl_mode"] = f"option file {tls_why}"
    _imply_ssl_mode(merged, sources)
    _host_from_hosts(merged, sources)
    return _build(merged, sources)


def _host_from_hosts(merged: dict[str, Any], sources: dict[str, str]) -> None:
    """mysql.hosts without mysql.host: the commands that connect to one server (snapshot, resnapshot, verify,
    status) use the first of the list, not 127.0.0.1; tail picks among them all (cdc.source.topology)."""
    if "mysql.host" in merged or "mysql.socket" in merged or not merged.get("mysql.hosts"):
        return
    try:
        first = _split_list(merged["mysql.hosts"])[0]
        host, port = parse_host(first, int(merged.get("mysql.port", MySQLSettings.port)))
    except (ValueError, IndexError, TypeError):
        return  # reported by validation, with where the list came from
    origin = f"the first of mysql.hosts ({sources.get('mysql.hosts', 'default')})"
    merged["mysql.host"], sources["mysql.host"] = host, origin
    merged["mysql.port"], sources["mysql.port"] = port, origin


def _imply_ssl_mode(merged: dict[str, Any], sources: dict[str, str]) -> None:
    """A CA or client certificate given without any --ssl-mode asks for TLS: never the unverified default (#26).

    PREFERRED would connect without checking the certificate against the CA the user named; the mariadb client
    given --ssl-ca refuses a certificate that CA did not sign (ERROR 2026).
    """
    if "mysql.ssl_mode" in merged:
        return
    for key, mode in (("mysql.ssl_ca", "VERIFY_CA"), ("mysql.ssl_cert", "REQUIRED"), ("mysql.ssl_key", "REQUIRED")):
        if merged.get(key):
            merged["mysql.ssl_mode"] = mode
            sources["mysql.ssl_mode"] = f"implied by {key} (from {sources[key]})"
            return


def load_log_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    config_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    read_toml: bool = True,
) -> LogSettings:
    """The [log] section alone, resolved like the rest (flag > CDC_LOG_* > cdc.toml > default).

    A command sets its logs up from this before it loads the other settings, so that an error in those
    is already logged in the format asked for. read_toml=False: flags and environment only.
    """
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None and k.startswith("log.")}
    toml_path, toml_values = _read_toml(config_path, cwd or Path.cwd(), env) if read_toml else ("", {})
    layers = [(f"config file {toml_path}", toml_values), ("environment", _read_env(env)), ("flag", flags)]
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for origin, values in layers:
        for key, value in values.items():
            if key.startswith("log."):
                merged[key] = value
                sources[key] = _describe_origin(origin, key)
    settings = _build(merged, sources, validate=False)
    _validate_log(settings)
    return settings.log


def _describe_origin(origin: str, key: str) -> str:
    if origin == "environment":
        return f"environment {env_name(key)}"
    if origin == "flag":
        return f"flag {_FLAG_NAMES.get(key) or '--' + key.split('.')[-1].replace('_', '-')}"
    return origin


def env_name(key: str) -> str:
    return "CDC_" + key.replace(".", "_").upper()


def _all_keys() -> list[tuple[str, Any]]:
    keys: list[tuple[str, Any]] = [("state_dir", str)]
    for section, cls in SECTIONS.items():
        keys.extend((f"{section}.{f.name}", f.type) for f in fields(cls))
    return keys


def _read_env(env: Mapping[str, str]) -> dict[str, Any]:
    found = {key: env[env_name(key)] for key, _ in _all_keys() if env_name(key) in env}
    # The mysql client's own variable is honoured too (below ours).
    if "mysql.password" not in found and "MYSQL_PWD" in env:
        found["mysql.password"] = env["MYSQL_PWD"]
    return found


def _read_toml(config_path: str | Path | None, cwd: Path, env: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    explicit = config_path or env.get("CDC_CONFIG")
    path = Path(explicit) if explicit else cwd / "cdc.toml"
    if not path.exists():
        if explicit:
            raise ConfigError(f"config file {path} does not exist", hint="check --config / CDC_CONFIG")
        return str(path), {}
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}", hint="fix the file (see examples/)") from exc
    return str(path), _flatten_toml(document, path)


def _flatten_toml(document: dict[str, Any], path: Path) -> dict[str, Any]:
    known = {key for key, _ in _all_keys()}
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, dict) and key in SECTIONS:
            for sub, subvalue in value.items():
                flat[f"{key}.{sub}"] = subvalue
        else:
            flat[key] = value
    for key in flat:
        if key.split(".")[-1] in SECRET_KEYS:
            raise ConfigError(
                f"config file {path} holds a secret ({key}); cdc.toml is meant to be shared and committed",
                hint="move it to the environment (e.g. CDC_MYSQL_PASSWORD) or a MySQL option file (~/.my.cnf)",
            )
        if key not in known:
            raise ConfigError(f"config file {path}: unknown setting {key!r}", hint=f"known settings: {sorted(known)}")
    return flat


_OPTION_FILE_KEYS = {
    "host": "mysql.host",
    "port": "mysql.port",
    "user": "mysql.user",
    "password": "mysql.password",
    "socket": "mysql.socket",
    "ssl-ca": "mysql.ssl_ca",
    "ssl-cert": "mysql.ssl_cert",
    "ssl-key": "mysql.ssl_key",
}
# TLS options cdc cannot honour: ignoring one would connect with less checking than the file asks for (#26).
_UNSUPPORTED_TLS = ("ssl-capath", "ssl-crl", "ssl-crlpath")
_MODE_STRENGTH = {mode: rank for rank, mode in enumerate(SSL_MODES)}


def _read_option_file(defaults_file: str | None, env: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """Read the client groups of a MySQL option file as the mysql client does; TLS options fail closed.

    Returns the settings found and, for mysql.ssl_mode, the option lines that decided it.
    """
    if defaults_file:
        path = Path(defaults_file).expanduser()
        if not path.exists():
            raise ConfigError(f"option file {path} does not exist", hint="check --defaults-file")
    else:
        path = Path(env.get("HOME", "~")).expanduser() / ".my.cnf"
        if not path.exists():
            return {}, ""
    found: dict[str, Any] = {}
    tls: dict[str, Option] = {}  # what decides the TLS mode: the last line of each kind wins, as in the client
    for option in read_options(path):
        key = _OPTION_FILE_KEYS.get(option.name)
        if key and option.value is not None:
            found[key] = option.value
        if option.name in _UNSUPPORTED_TLS:
            raise ConfigError(f"option file {option.where}: {option.name} is not supported by cdc",
                              hint="name the CA bundle with ssl-ca (a PEM file) instead")
        _note_tls(option, tls)
    mode, why = _option_file_tls_mode(tls)
    if mode:
        found["mysql.ssl_mode"] = mode
    return found, why


def _note_tls(option: Option, tls: dict[str, Option]) -> None:
    name = option.name
    for prefix, flag in (("skip-", "0"), ("disable-", "0"), ("enable-", "1")):
        if name.startswith(prefix) and name.removeprefix(prefix) in ("ssl", "ssl-verify-server-cert"):
            name, option = name.removeprefix(prefix), Option(name.removeprefix(prefix), flag, option.where)
    if name in ("ssl", "ssl-verify-server-cert", "ssl-mode", "ssl-ca", "ssl-cert", "ssl-key"):
        tls[name] = option


def _option_file_tls_mode(tls: dict[str, Option]) -> tuple[str | None, str]:
    """The --ssl-mode an option file's TLS lines mean; the strongest one wins (fail closed, #26).

    MySQL 5.7 mapped the old options onto --ssl-mode: `ssl` = REQUIRED, `ssl=0` / `skip-ssl` = DISABLED,
    `ssl-verify-server-cert` = VERIFY_IDENTITY (https://dev.mysql.com/doc/refman/5.7/en/connection-options.html).
    The mariadb client verifies the server certificate against an ssl-ca it is given (ERROR 2026 when that CA did
    not sign it): ssl-ca = VERIFY_CA; a client certificate needs TLS: ssl-cert / ssl-key = REQUIRED.
    """
    wanted: list[tuple[str, Option]] = []
    if "ssl-mode" in tls:
        wanted.append(((tls["ssl-mode"].value or "").upper(), tls["ssl-mode"]))
    if "ssl" in tls:
        wanted.append(("REQUIRED" if flag_value(tls["ssl"]) else "DISABLED", tls["ssl"]))
    if "ssl-verify-server-cert" in tls and flag_value(tls["ssl-verify-server-cert"]):
        wanted.append(("VERIFY_IDENTITY", tls["ssl-verify-server-cert"]))
    if "ssl-ca" in tls:
        wanted.append(("VERIFY_CA", tls["ssl-ca"]))
    wanted += [("REQUIRED", tls[name]) for name in ("ssl-cert", "ssl-key") if name in tls]
    if not wanted:
        return None, ""
    # An unknown mode sorts first and is kept only alone: _validate then names it.
    mode, option = max(wanted, key=lambda item: _MODE_STRENGTH.get(item[0], -1))
    return mode, f"{option.where}: {option.name}" + (f"={option.value}" if option.value else "")


def _build(merged: dict[str, Any], sources: dict[str, str], *, validate: bool = True) -> Settings:
    kwargs: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        values = {}
        for f in fields(cls):
            key = f"{section}.{f.name}"
            if key in merged:
                values[f.name] = _coerce(key, merged[key], f.type, sources.get(key, "default"))
        kwargs[section] = cls(**values)
    if "state_dir" in merged:
        kwargs["state_dir"] = str(merged["state_dir"])
    settings = Settings(**kwargs, sources=sources)
    if validate:
        _validate(settings)
    return settings


_COERCERS: dict[str, Callable[[Any], Any]] = {
    "int": lambda v: int(v) if not isinstance(v, bool) else _raise(),
    "float": lambda v: float(v) if not isinstance(v, bool) else _raise(),
    "str": str,
    "str | None": str,
    "tuple[str, ...]": lambda v: tuple(_split_list(v)),
}


def _raise() -> Any:
    raise ValueError("not a number")


def _split_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return [str(part) for part in value]
    raise ValueError("not a list")


def _coerce(key: str, value: Any, type_name: Any, origin: str) -> Any:
    coerce = _COERCERS[str(type_name)]
    try:
        return coerce(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{key} = {_shown(key, value)} (from {origin}) is not a valid {type_name}",
        ) from None


def _shown(key: str, value: Any) -> str:
    return "'***'" if key.split(".")[-1] in SECRET_KEYS else repr(value)


def _validate(settings: Settings) -> None:
    _validate_log(settings)
    mysql = settings.mysql
    if not 0 < mysql.port < 65536:
        raise ConfigError(f"mysql.port = {mysql.port} (from {settings.source_of('mysql.port')}) is not a TCP port")
    mode = mysql.ssl_mode.upper()
    if mode not in SSL_MODES:
        raise ConfigError(
            f"mysql.ssl_mode = {mysql.ssl_mode!r} (from {settings.source_of('mysql.ssl_mode')}) is not one of "
            + ", ".join(SSL_MODES)
        )
    if mode in ("VERIFY_CA", "VERIFY_IDENTITY") and not mysql.ssl_ca:
        raise ConfigError(
            f"mysql.ssl_mode = {mode} (from {settings.source_of('mysql.ssl_mode')}) needs --ssl-ca",
            hint="pass the CA bundle that signed the server certificate (for RDS: the region's global bundle)",
        )
    _validate_sse(settings)
    _validate_hosts(settings)
    if not 0 <= mysql.server_id < 2**32:
        raise ConfigError(
            f"mysql.server_id = {mysql.server_id} (from {settings.source_of('mysql.server_id')}) "
            "is outside 1..4294967295 (0 lets cdc derive one)"
        )


def parse_host(entry: str, default_port: int) -> tuple[str, int]:
    """`host`, `host:port` or `[v6 address]:port` of mysql.hosts; ValueError names what is wrong."""
    text = entry.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else rest
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host or (port_text and not port_text.isdigit()):
        raise ValueError(f"{entry!r} is not host or host:port")
    port = int(port_text) if port_text else default_port
    if not 0 < port < 65536:
        raise ValueError(f"{entry!r} has no TCP port")
    return host, port


def _validate_hosts(settings: Settings) -> None:
    for entry in settings.mysql.hosts:
        try:
            parse_host(entry, settings.mysql.port)
        except ValueError as exc:
            raise ConfigError(f"mysql.hosts (from {settings.source_of('mysql.hosts')}): {exc}",
                              hint='write e.g. hosts = ["db-a.example.com:3306", "db-b.example.com:3306"]') from None


def _validate_sse(settings: Settings) -> None:
    aws = settings.aws
    if aws.sse is not None and aws.sse not in SSE_MODES:
        raise ConfigError(f"aws.sse = {aws.sse!r} (from {settings.source_of('aws.sse')}) is not one of "
                          + ", ".join(SSE_MODES), hint="AES256 for SSE-S3, aws:kms for SSE-KMS")
    if aws.sse_kms_key_id and aws.sse != "aws:kms":
        raise ConfigError(f"aws.sse_kms_key_id (from {settings.source_of('aws.sse_kms_key_id')}) needs aws.sse = "
                          f"'aws:kms', not {aws.sse!r}", hint="pass --sse aws:kms with --sse-kms-key-id")


def _validate_log(settings: Settings) -> None:
    log = settings.log
    for key, value, allowed in (("log.level", log.level, LOG_LEVELS), ("log.format", log.format, LOG_FORMATS)):
        if value not in allowed:
            raise ConfigError(f"{key} = {value!r} (from {settings.source_of(key)}) is not one of {', '.join(allowed)}")
    try:
        log.status_seconds()
    except CdcError:
        raise ConfigError(f"log.status_interval = {log.status_interval!r} (from {settings.source_of('log.status_interval')}) "
                          "is not a duration", hint="write e.g. 30s, 2m, or 0 for no status lines") from None


def with_password(settings: Settings, password: str) -> Settings:
    """Return settings with a password obtained at run time (e.g. a TTY prompt)."""
    return replace(settings, mysql=replace(settings.mysql, password=password))
