"""`cdc init`: the wizard's logic: validate answers, test them live, write cdc.toml (never a secret).

The prompts live in commands/init.py; everything here is plain functions on an `Answers` value,
so the same checks serve the interactive wizard and `--no-input` runs from scripts.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from cdc.config import AWSSettings, MySQLSettings, Settings, SnowflakeSettings, load_settings
from cdc.errors import CdcError, ConfigError, PreconditionError, UsageError
from cdc.settings import SSL_MODES
from cdc.state import write_bytes_atomic

DEFAULT_PATH = "cdc.toml"


# TLS modes that check the server certificate against a CA: they need --ssl-ca (cdc.config refuses them without).
CA_MODES = ("VERIFY_CA", "VERIFY_IDENTITY")


def _always(answers: Answers) -> bool:
    return True


def _never(answers: Answers) -> bool:
    """Not asked (a flag-only setting such as --socket), or never required beyond `required`."""
    return False


def needs_ca(answers: Answers) -> bool:
    return answers.ssl_mode.upper() in CA_MODES


@dataclass(frozen=True)
class Question:
    key: str  # field of Answers
    flag: str
    prompt: str
    required: bool = False
    section: str = "mysql"
    # Whether the wizard asks it, given the answers so far (the CA only for a mode that verifies, ...).
    asked: Callable[[Answers], bool] = _always
    # Required given the answers so far, beyond `required` (the CA is, for VERIFY_CA / VERIFY_IDENTITY).
    required_when: Callable[[Answers], bool] = _never

    def is_required(self, answers: Answers) -> bool:
        return self.required or self.required_when(answers)


# In the order the wizard asks; every question has its flag (non-interactive runs).
QUESTIONS: tuple[Question, ...] = (
    Question("host", "--host", "MySQL host", required=True),
    Question("port", "--port", "MySQL port"),
    Question("socket", "--socket", "Unix socket (empty: TCP)", asked=_never),
    Question("user", "--user", "MySQL user (REPLICATION SLAVE, REPLICATION CLIENT, SELECT)", required=True),
    Question("ssl_mode", "--ssl-mode", f"TLS mode ({'/'.join(SSL_MODES)})"),
    Question("ssl_ca", "--ssl-ca", "CA bundle that signed the server certificate (PEM file; for RDS the region's "
             "bundle)", asked=needs_ca, required_when=needs_ca),
    Question("ssl_cert", "--ssl-cert", "Client certificate (PEM file; empty: none)",
             asked=lambda a: a.ssl_mode.upper() != "DISABLED"),
    Question("ssl_key", "--ssl-key", "Client key (PEM file; empty: the key is in the certificate file)",
             asked=lambda a: bool(a.ssl_cert)),
    Question("tables", "--tables", "Tables to replicate (db.table, globs allowed, comma-separated)", required=True,
             section="tables"),
    Question("exclude_tables", "--exclude-tables", "Excluded tables (db.table, globs allowed, comma-separated; "
             "empty: none)", section="tables"),
    Question("state_dir", "--state-dir", "State directory", section="tables"),
    Question("bucket", "--bucket", "S3 bucket for `cdc ship --to s3` (empty: none)", section="aws"),
    Question("prefix", "--prefix", "S3 key prefix", section="aws"),
    Question("stream", "--stream", "Kinesis stream for `cdc ship --to kinesis` (empty: none)", section="aws"),
    Question("region", "--region", "AWS region (empty: the default chain's)", section="aws"),
    Question("snowflake_connection", "--snowflake-connection",
             "Snowflake connection name in connections.toml (empty: none)", section="snowflake"),
    Question("snowflake_database", "--snowflake-database", "Snowflake database", section="snowflake"),
    Question("snowflake_schema", "--snowflake-schema", "Snowflake schema", section="snowflake"),
)


@dataclass(frozen=True)
class Answers:
    host: str | None = None
    port: str = "3306"
    socket: str | None = None
    user: str | None = None
    ssl_mode: str = "PREFERRED"
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    tables: str | None = None
    exclude_tables: str | None = None
    state_dir: str = ".cdc"
    bucket: str | None = None
    prefix: str = "cdc"
    stream: str | None = None
    region: str | None = None
    snowflake_connection: str | None = None
    snowflake_database: str | None = None
    snowflake_schema: str | None = None

    def get(self, key: str) -> str | None:
        value: str | None = getattr(self, key)
        return value

    def with_answer(self, key: str, value: str | None) -> Answers:
        """Record an answer; an empty one means the setting's default (None for optional ones).

        A file answer (--ssl-ca ...) is recorded as an absolute path: cdc.toml is read by commands started
        from any directory, and a relative CA path would silently point elsewhere there.
        """
        text = (value or "").strip()
        if text and key in FILE_KEYS:
            text = os.path.abspath(os.path.expanduser(text))
        default = next(f.default for f in fields(Answers) if f.name == key)
        return replace(self, **{key: text or default})  # type: ignore[arg-type]  # default: a field's own default

    def with_answers(self, given: dict[str, str | None]) -> Answers:
        """Record every answer that was given (None: not given)."""
        answers = self
        for key, value in given.items():
            if value is not None:
                answers = answers.with_answer(key, value)
        return answers

    def table_list(self) -> tuple[str, ...]:
        return _split(self.tables)

    def excluded_list(self) -> tuple[str, ...]:
        return _split(self.exclude_tables)


FILE_KEYS = frozenset({"ssl_ca", "ssl_cert", "ssl_key"})


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


_HOST = re.compile(r"^[A-Za-z0-9._:\-\[\]]+$")
_USER = re.compile(r"^[^\s'\"`]{1,80}$")
_TABLE = re.compile(r"^[^.\s`]+\.[^.\s`]+$")
_BUCKET = re.compile(r"^(?!xn--)(?!.*\.\.)[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_STREAM = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$\-]{0,254}$")


def validate(key: str, value: str | None, *, required: bool | None = None) -> str | None:
    """Why `value` is not a valid answer to `key` (None: it is). Empty optional answers are valid.

    `required` overrides the question's own flag (a CA bundle is required only for the verifying TLS modes).
    """
    if value is None or value == "":
        if required is None:
            required = next(q for q in QUESTIONS if q.key == key).required
        return "an answer is required" if required else None
    checks: dict[str, Any] = {
        "host": lambda v: None if _HOST.match(v) else "not a host name or IP address",
        "port": lambda v: None if v.isdigit() and 0 < int(v) < 65536 else "not a TCP port (1-65535)",
        "user": lambda v: None if _USER.match(v) else "not a MySQL user name (no spaces or quotes)",
        "ssl_mode": lambda v: None if v.upper() in SSL_MODES else f"not one of {', '.join(SSL_MODES)}",
        "tables": _validate_tables,
        "exclude_tables": _validate_tables,
        "ssl_ca": _validate_file,
        "ssl_cert": _validate_file,
        "ssl_key": _validate_file,
        "bucket": lambda v: None if _BUCKET.match(v) else "not an S3 bucket name (3-63 of a-z 0-9 . -)",
        "prefix": lambda v: None if not v.startswith("/") and "//" not in v else "a key prefix has no leading / or //",
        "stream": lambda v: None if _STREAM.match(v) else "not a Kinesis stream name (A-Z a-z 0-9 _ . -)",
        "region": lambda v: None if re.match(r"^[a-z]{2}(-[a-z]+)+-\d$", v) else "not an AWS region (e.g. eu-west-1)",
        "snowflake_connection": lambda v: None if _NAME.match(v) else "not a connection name",
        "snowflake_database": lambda v: None if _NAME.match(v) else "not a Snowflake identifier",
        "snowflake_schema": lambda v: None if _NAME.match(v) else "not a Snowflake identifier",
    }
    check = checks.get(key)
    return check(value) if check else None


def _validate_tables(value: str) -> str | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    bad = [p for p in parts if not _TABLE.match(p)]
    if not parts or bad:
        return f"not db.table: {', '.join(bad) or value!r} (globs allowed: shop.*)"
    return None


def _validate_file(value: str) -> str | None:
    """A PEM file named for TLS must be there and readable now: a typo found at 3 a.m. by `cdc tail` costs more."""
    path = Path(os.path.abspath(os.path.expanduser(value)))  # named as it would be recorded
    if not path.exists():
        return f"no such file: {path}"
    if not path.is_file():
        return f"not a file: {path}"
    if not os.access(path, os.R_OK):
        return f"not readable by this user: {path}"
    return None


def check_answers(answers: Answers) -> None:
    """Refuse a missing required answer or an invalid one, naming the flag (exit 2)."""
    for question in QUESTIONS:
        value = answers.get(question.key)
        problem = validate(question.key, value, required=question.is_required(answers))
        if not problem:
            continue
        if value:
            raise UsageError(f"{question.flag} {value!r}: {problem}",
                             hint=f"fix {question.flag}, or run `cdc init` at a terminal to be asked")
        if question.key == "ssl_ca":
            raise UsageError(f"--ssl-mode {answers.ssl_mode.upper()} checks the server certificate against a CA: "
                             "missing --ssl-ca", hint="pass --ssl-ca FILE (for RDS: the region's global bundle), or "
                             "--ssl-mode REQUIRED to encrypt without verifying")
        raise UsageError(f"missing {question.flag}: {question.prompt.lower()} is required without a terminal",
                         hint=f"pass {question.flag}, or run `cdc init` at a terminal to be asked")
    if answers.ssl_key and not answers.ssl_cert:
        raise UsageError("--ssl-key without --ssl-cert: the key belongs to a client certificate",
                         hint="pass --ssl-cert too, or leave both out")


def to_settings(answers: Answers, password: str | None = None) -> Settings:
    """The settings the answers describe; the password (if any) lives only in this value, never on disk."""
    mysql = MySQLSettings(host=answers.host or "127.0.0.1", port=int(answers.port), user=answers.user or "root",
                          password=password, socket=answers.socket, ssl_mode=answers.ssl_mode.upper(),
                          ssl_ca=answers.ssl_ca, ssl_cert=answers.ssl_cert, ssl_key=answers.ssl_key,
                          tables=answers.table_list(), exclude_tables=answers.excluded_list())
    aws = AWSSettings(region=answers.region, stream=answers.stream, bucket=answers.bucket, prefix=answers.prefix)
    snowflake = SnowflakeSettings(connection=answers.snowflake_connection, database=answers.snowflake_database,
                                  schema=answers.snowflake_schema)
    return Settings(state_dir=answers.state_dir, mysql=mysql, aws=aws, snowflake=snowflake)


def probe_connection(settings: Settings) -> Any:
    """Connect and run the binlog checks (cdc.source.preflight); connection errors raise, failed checks are returned."""
    from cdc.source import preflight

    return preflight.run(settings)


def probe_tables(settings: Settings) -> list[str]:
    """The tables the patterns select on the server; UsageError if they select nothing."""
    from cdc.source.connect import connection
    from cdc.source.tables import select_tables

    with connection(settings.mysql) as conn:
        return [t.name for t in select_tables(conn, settings.mysql)]


def probe_destination(settings: Settings, key: str) -> str:
    """Reach the S3 bucket or Kinesis stream the answers name; return what was found."""
    from cdc.aws import make_client, map_error

    aws = settings.aws
    try:
        if key == "bucket":
            make_client("s3", aws).head_bucket(Bucket=aws.bucket)
            return f"s3://{aws.bucket} is reachable"
        summary = make_client("kinesis", aws).describe_stream_summary(StreamName=aws.stream)["StreamDescriptionSummary"]
        return f"kinesis stream {aws.stream} is {summary['StreamStatus']} with {summary['OpenShardCount']} shard(s)"
    except CdcError:
        raise
    except Exception as exc:  # botocore's errors, mapped at the boundary
        what = f"s3://{aws.bucket}" if key == "bucket" else f"kinesis stream {aws.stream}"
        raise map_error(exc, f"checking {what}", missing_hint="create it first, or check --region / the name") from None


def render_toml(answers: Answers) -> str:
    """cdc.toml for the answers: only non-secret settings, empty answers left out."""
    def line(key: str, value: Any) -> str:
        # A JSON string is a valid TOML basic string (same escapes), so hostile values stay quoted.
        return f"{key} = {json.dumps(value, ensure_ascii=False)}"

    out = ["# Written by `cdc init`. No secrets here: passwords come from CDC_MYSQL_PASSWORD, MYSQL_PWD or",
           "# ~/.my.cnf; AWS credentials from the default chain; Snowflake's from connections.toml.",
           line("state_dir", answers.state_dir), "", "[mysql]", line("host", answers.host),
           f"port = {int(answers.port)}"]
    out += [line("socket", answers.socket)] if answers.socket else []
    out += [line("user", answers.user), line("ssl_mode", answers.ssl_mode.upper())]
    out += [line(key, answers.get(key)) for key in ("ssl_ca", "ssl_cert", "ssl_key") if answers.get(key)]
    out += [line("tables", list(answers.table_list()))]
    out += [line("exclude_tables", list(answers.excluded_list()))] if answers.excluded_list() else []
    aws = {"bucket": answers.bucket, "stream": answers.stream, "region": answers.region}
    # A prefix alone is written too: what was answered must load back as answered.
    if any(aws.values()) or answers.prefix != Answers.prefix:
        out += ["", "[aws]"] + [line(k, v) for k, v in aws.items() if v] + [line("prefix", answers.prefix)]
    snowflake = {"connection": answers.snowflake_connection, "database": answers.snowflake_database,
                 "schema": answers.snowflake_schema}
    if any(snowflake.values()):
        out += ["", "[snowflake]"] + [line(k, v) for k, v in snowflake.items() if v]
    return "\n".join(out) + "\n"


def write_config(path: Path, answers: Answers, *, force: bool = False) -> Path:
    """Write cdc.toml atomically; refuse to replace an existing file unless forced; prove it loads as answered."""
    refuse_existing(path, force)
    text = render_toml(answers)
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "cdc.toml"
        copy.write_text(text, encoding="utf-8")
        try:
            loaded = load_settings(config_path=copy, env={"HOME": scratch})
        except ConfigError as exc:
            raise PreconditionError(f"the answers do not make a valid cdc.toml: {exc.message}") from None
    if loaded != to_settings(answers):  # an answer that render_toml drops or spells wrong: a bug, never written
        raise PreconditionError("the written cdc.toml would not load back as answered (a bug in cdc init)",
                                hint="report it with the flags you passed; write cdc.toml by hand from examples/")
    write_bytes_atomic(path, text.encode("utf-8"))
    return path


ANSWER_KEYS = tuple(f.name for f in fields(Answers))


def refuse_existing(path: Path, force: bool) -> None:
    """Fail before asking anything when the answers could not be written anyway."""
    if path.exists() and not force:
        raise UsageError(f"{path} already exists; cdc init does not overwrite it",
                         hint="pass --force to replace it, or --output to write elsewhere")


def password_from_env(env: dict[str, str]) -> str | None:
    """The password for the live test without a terminal: CDC_MYSQL_PASSWORD, else the mysql client's MYSQL_PWD."""
    return env.get("CDC_MYSQL_PASSWORD") or env.get("MYSQL_PWD")


def probe_snowflake_connection(name: str, env: dict[str, str]) -> str:
    """Find the named connection in Snowflake's connections.toml (the connector's own lookup order)."""
    import tomllib

    home = Path(env.get("SNOWFLAKE_HOME") or Path(env.get("HOME", "~")).expanduser() / ".snowflake")
    path = home / "connections.toml"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PreconditionError(f"Snowflake connection {name!r}: {path} does not exist",
                                hint="create it (snow connection add) or set SNOWFLAKE_HOME") from None
    except tomllib.TOMLDecodeError as exc:
        raise PreconditionError(f"{path} is not valid TOML: {exc}") from None
    if name not in document:
        raise PreconditionError(f"Snowflake connection {name!r} is not in {path} (found: {', '.join(document) or 'none'})",
                                hint="add it there; cdc.toml only names it, the credentials stay in connections.toml")
    return f"Snowflake connection {name} found in {path}"


SECTIONS = ("mysql", "tables", "aws", "snowflake")
OK, WARN = "ok", "warn"


@dataclass(frozen=True)
class Finding:
    """One line of what a live test found: `ok`, or `warn` (written anyway, worth fixing)."""

    status: str
    text: str


def check_section(section: str, answers: Answers, password: str | None, env: dict[str, str]) -> list[Finding]:
    """Test one section's answers live; return what was found, raise a CdcError naming what failed."""
    settings = to_settings(answers, password)
    if section == "mysql":
        return binlog_findings(settings, probe_connection(settings))
    if section == "tables":
        names = probe_tables(settings)
        shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        return [Finding(OK, f"{len(names)} table(s) selected: {shown}")]
    if section == "aws":
        return [Finding(OK, probe_destination(settings, key)) for key in ("bucket", "stream") if answers.get(key)]
    if answers.snowflake_connection:
        return [Finding(OK, probe_snowflake_connection(answers.snowflake_connection, env))]
    return []


def binlog_findings(settings: Settings, report: Any) -> list[Finding]:
    """The check-binlog verdict, counted as `cdc check-binlog` counts it: failures stop, warnings are named.

    (#23: init once said "17 binlog checks pass" where check-binlog showed a warning for the same server.)
    """
    failed = [c for c in report.checks if c.status == "fail"]
    warned = [c for c in report.checks if c.status == "warn"]
    counts = f"{len(failed)} failed, {len(warned)} warning(s) of {len(report.checks)} binlog checks"
    if failed:
        raise PreconditionError(
            f"connected to {settings.mysql.describe()}, but {counts}: "
            + "; ".join(f"{c.name} = {c.value} (fix: {c.fix})" for c in failed)
            + (f"; warnings: {', '.join(c.name for c in warned)}" if warned else ""),
            hint="fix the server (`cdc check-binlog`, `cdc set-retention`), or pass --skip-test to write anyway")
    server = f"{report.server.get('flavour')} {report.server.get('version')} at {settings.mysql.describe()}"
    named = f" ({', '.join(c.name for c in warned)})" if warned else ""
    return ([Finding(WARN if warned else OK, f"connected to {server}; {counts}{named}")]
            + [Finding(WARN, f"{c.name}: {c.value}" + (f" (fix: {c.fix})" if c.fix else "")) for c in warned])

