"""The settings cdc runs with: one frozen dataclass per section, the values a setting may take, and their checks.

Where each value comes from (flag > CDC_* > cdc.toml > MySQL option file > default) is cdc.config's business; a
check here names a bad value with that origin (Settings.sources), e.g.
"mysql.port = 70000 (from environment CDC_MYSQL_PORT) is not a TCP port".
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from cdc.durations import parse_duration
from cdc.errors import CdcError, ConfigError

SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
SECRET_KEYS = frozenset({"password", "private_key_passphrase", "aws_secret_access_key", "token", "hash_key"})
LOG_LEVELS = ("debug", "info", "warning", "error")
SSE_MODES = ("AES256", "aws:kms")
LOG_FORMATS = ("text", "json")


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
    # Seconds a request to S3/Kinesis may wait for its answer before botocore retries it on a new connection:
    # a link that died without a FIN or an RST (a NAT's dropped mapping, a blackholed route) is noticed only so.
    read_timeout: float = 60.0


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
    # Sessions that stage a batch's tables at once in snowflake-apply (cdc.snowflake.loaders): its own and up to
    # load_sessions - 1 more. 1: every statement on one session, one after the other.
    load_sessions: int = 4


MAX_LOAD_SESSIONS = 16  # a warehouse runs 8 queries at once by default (MAX_CONCURRENCY_LEVEL); more only queue


@dataclass(frozen=True)
class ChangelogSettings:
    """The local change log's retention: `cdc run` and `cdc prune` delete sealed segments every consumer has read
    once they are older than `keep` (cdc.pipeline.prune); "off": `cdc run` never prunes."""

    keep: str = "24h"

    def keep_seconds(self) -> float | None:
        if self.keep.strip().lower() == "off":
            return None
        return parse_duration(self.keep, "changelog.keep")


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
    changelog: ChangelogSettings = ChangelogSettings()
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
    "changelog": ChangelogSettings,
}


def validate_settings(settings: Settings) -> None:
    """Refuse a value no section accepts, naming where it came from."""
    validate_log(settings)
    _validate_keep(settings)
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
    if not settings.aws.read_timeout > 0:
        raise ConfigError(f"aws.read_timeout = {settings.aws.read_timeout} (from "
                          f"{settings.source_of('aws.read_timeout')}) is not a number of seconds above 0",
                          hint="e.g. 60, botocore's default")
    _validate_hosts(settings)
    if not 1 <= settings.snowflake.load_sessions <= MAX_LOAD_SESSIONS:
        raise ConfigError(f"snowflake.load_sessions = {settings.snowflake.load_sessions} (from "
                          f"{settings.source_of('snowflake.load_sessions')}) is outside 1..{MAX_LOAD_SESSIONS}",
                          hint="4 by default; 1 stages a batch's tables one after the other on one session")
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


def validate_log(settings: Settings) -> None:
    log = settings.log
    for key, value, allowed in (("log.level", log.level, LOG_LEVELS), ("log.format", log.format, LOG_FORMATS)):
        if value not in allowed:
            raise ConfigError(f"{key} = {value!r} (from {settings.source_of(key)}) is not one of {', '.join(allowed)}")
    try:
        log.status_seconds()
    except CdcError:
        raise ConfigError(f"log.status_interval = {log.status_interval!r} (from {settings.source_of('log.status_interval')}) "
                          "is not a duration", hint="write e.g. 30s, 2m, or 0 for no status lines") from None


def _validate_keep(settings: Settings) -> None:
    try:
        settings.changelog.keep_seconds()
    except CdcError:
        raise ConfigError(f"changelog.keep = {settings.changelog.keep!r} (from {settings.source_of('changelog.keep')}) "
                          "is not a duration", hint="write e.g. 24h, 7d, or off (cdc run never prunes)") from None
