"""`cdc init`: flags without a terminal, and the wizard with a tiny fake questionary (scripted answers)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import questionary

from cdc.commands import ui
from cdc.config import load_settings
from cdc.pipeline.init import Answers, render_toml, to_settings
from tests.conftest import REPLICATION_PASSWORD
from tests.pipeline.cli import run
from tests.rig import DbUser, MariaDB
from tests.source.test_connect_tls import PASSWORD as TLS_PASSWORD
from tests.source.test_connect_tls import certs, tls_server


class FakeQuestionary:
    """Stands in for questionary.text/password/confirm: scripted answers, validation as questionary does it.

    Faithful where #23 bit: text's `default` prefills the input buffer, so what is typed lands after it
    (typing 3306 at a prompt prefilled with 3306 gives 33063306), as at a real terminal.
    """

    def __init__(self, answers: list[Any]) -> None:
        self.answers: Iterator[Any] = iter(answers)
        self.asked: list[str] = []
        self.rejected: list[str] = []

    def _question(self, message: str, validate: Any = None, default: Any = None, kind: str = "text", **_: Any) -> Any:
        fake = self
        prefill = default if kind == "text" and isinstance(default, str) else ""

        class Question:
            def ask(self) -> Any:
                fake.asked.append(message)
                while True:
                    typed = next(fake.answers)
                    answer = typed if typed is None or not isinstance(typed, str) else prefill + typed
                    verdict = True if validate is None or answer is None else validate(answer)
                    if verdict is True:
                        return answer
                    fake.rejected.append(f"{answer}: {verdict}")  # questionary re-asks on a failed validation

        return Question()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ui, "is_tty", lambda: True)
        for name in ("text", "password", "confirm"):
            monkeypatch.setattr(questionary, name,
                                lambda message, fake=self, kind=name, **kw: fake._question(message, kind=kind, **kw))


def connection_flags(server: MariaDB, user: DbUser) -> list[str]:
    return ["--host", server.host, "--port", str(server.port), "--user", user.name]


def test_no_input_writes_a_loadable_config_without_the_password(
        mariadb: MariaDB, fresh_db: str, replication_user: DbUser, monkeypatch: pytest.MonkeyPatch) -> None:
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY)", database=fresh_db)
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", REPLICATION_PASSWORD)
    result = run("init", "--no-input", *connection_flags(mariadb, replication_user), "--tables", f"{fresh_db}.*",
                 "--snowflake-database", "RAW", "--state-dir", "/var/lib/cdc")
    assert result.exit_code == 0, result.output
    text = Path("cdc.toml").read_text()
    settings_lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert REPLICATION_PASSWORD not in text and not [line for line in settings_lines if "password" in line]
    monkeypatch.delenv("CDC_MYSQL_PASSWORD")
    settings = load_settings(config_path="cdc.toml", env={})
    assert (settings.mysql.host, settings.mysql.port, settings.mysql.user) == (mariadb.host, mariadb.port, "cdc_repl")
    assert settings.mysql.tables == (f"{fresh_db}.*",) and settings.mysql.password is None
    assert (settings.state_dir, settings.snowflake.database, settings.aws.bucket) == ("/var/lib/cdc", "RAW", None)
    assert "1 table(s) selected" in result.stderr


def test_live_test_failures_stop_without_writing(mariadb: MariaDB, fresh_db: str, replication_user: DbUser,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", "wrong")
    result = run("init", "--no-input", *connection_flags(mariadb, replication_user), "--tables", f"{fresh_db}.x")
    assert result.exit_code == 1 and "access denied" in result.stderr and not Path("cdc.toml").exists()
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", REPLICATION_PASSWORD)
    result = run("init", "--no-input", *connection_flags(mariadb, replication_user), "--tables", f"{fresh_db}.nothing")
    assert result.exit_code != 0 and not Path("cdc.toml").exists()
    result = run("init", "--no-input", "--skip-test", *connection_flags(mariadb, replication_user),
                 "--tables", f"{fresh_db}.nothing")
    assert result.exit_code == 0 and Path("cdc.toml").exists()


@pytest.mark.parametrize(("args", "needle"), [
    ([], "missing --host"),
    (["--host", "db"], "missing --user"),
    (["--host", "db", "--user", "u"], "missing --tables"),
    (["--host", "db", "--user", "u", "--tables", "nodot"], "--tables 'nodot': not db.table"),
    (["--host", "db", "--user", "u", "--tables", "a.b", "--port", "99999"], "--port '99999': not a TCP port"),
    (["--host", "db", "--user", "u", "--tables", "a.b", "--bucket", "Bad_Bucket"], "--bucket 'Bad_Bucket'"),
])
def test_without_a_terminal_missing_or_bad_answers_exit_2(args: list[str], needle: str) -> None:
    result = run("init", "--skip-test", *args)  # CliRunner's stdin is no TTY: nothing waits
    assert result.exit_code == 2 and needle in result.stderr.replace("\n", " ")
    assert not Path("cdc.toml").exists()


def test_refuses_to_overwrite_without_force() -> None:
    Path("cdc.toml").write_text("# mine\n")
    args = ["init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.b"]
    result = run(*args)
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert Path("cdc.toml").read_text() == "# mine\n"
    assert run(*args, "--force").exit_code == 0
    assert load_settings(config_path="cdc.toml", env={}).mysql.host == "db"


def test_wizard_asks_tests_and_re_asks_after_a_failed_connection(
        mariadb: MariaDB, fresh_db: str, replication_user: DbUser, monkeypatch: pytest.MonkeyPatch) -> None:
    mariadb.execute("CREATE TABLE a (id INT PRIMARY KEY)", database=fresh_db)
    fake = FakeQuestionary([
        # mysql: a wrong port first (nothing listens on port 1), TLS mode and client cert left empty, the
        # password, the test fails
        mariadb.host, "http://x", "1", replication_user.name, "", "", REPLICATION_PASSWORD, True,
        # ... asked again, with the previous answers shown (not prefilled)
        mariadb.host, str(mariadb.port), replication_user.name, "", "",
        # tables (one invalid answer first), excluded tables, state dir
        "just-a-name", f"{fresh_db}.a", "", "",
        # aws and snowflake: nothing
        "", "", "", "", "", "", "",
    ])
    fake.install(monkeypatch)
    result = run("init")
    assert result.exit_code == 0, result.output
    assert fake.rejected == ["http://x: not a TCP port (1-65535)", "just-a-name: not db.table: 'just-a-name' "
                             "(globs allowed: shop.*)"]
    assert sum("Password" in m for m in fake.asked) == 1 and "Change these answers?" in fake.asked
    settings = load_settings(config_path="cdc.toml", env={})
    assert (settings.mysql.port, settings.mysql.tables, settings.aws.stream) == (mariadb.port, (f"{fresh_db}.a",), None)
    assert REPLICATION_PASSWORD not in Path("cdc.toml").read_text()


def test_wizard_ctrl_c_aborts_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeQuestionary(["db", None]).install(monkeypatch)
    result = run("init", "--skip-test")
    assert result.exit_code == 1 and not Path("cdc.toml").exists()


def test_flags_are_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeQuestionary([""] * 12)
    fake.install(monkeypatch)
    result = run("init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.b")
    assert result.exit_code == 0, result.output
    assert not any(m.startswith(("MySQL host", "MySQL user", "Tables")) for m in fake.asked)


@pytest.mark.parametrize("hostile", ['sh"op', "sh'op", "s\\hop", "shöp🐬", "a#b"])
def test_hostile_values_survive_the_toml(hostile: str, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(render_toml(Answers(host="db", user="u", tables=f"{hostile}.t", snowflake_schema="S")))
    assert load_settings(config_path=path, env={}).mysql.tables == (f"{hostile}.t",)


# --- #23: a new user's first hour ---------------------------------------------------------------------------

SKIP = ["init", "--no-input", "--skip-test"]


def test_short_flags_match_the_other_commands() -> None:
    result = run(*SKIP, "-h", "db.internal", "-P", "3307", "-u", "repl", "-S", "/run/mysqld/mysqld.sock",
                 "--tables", "a.b")
    assert result.exit_code == 0, result.output
    mysql = load_settings(config_path="cdc.toml", env={}).mysql
    assert (mysql.host, mysql.port, mysql.user, mysql.socket) == ("db.internal", 3307, "repl", "/run/mysqld/mysqld.sock")


def test_port_typed_at_a_real_prompt_is_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real questionary on a pipe: what a person types replaces the shown default instead of appending to it."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    monkeypatch.setattr(ui, "is_tty", lambda: True)
    # port, TLS mode, client cert | excluded tables, state dir | bucket, prefix, stream, region | 3 Snowflake
    keys = "3306\r" + "\r" * 11
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text(keys)
        pipe.close()  # anything asked beyond the script ends the prompt (EOF) instead of waiting
        result = run("init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.b")
    assert result.exit_code == 0, result.output
    assert load_settings(config_path="cdc.toml", env={}).mysql.port == 3306


def test_wizard_enter_keeps_the_shown_default_and_typing_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeQuestionary(["3307", "", "", "", "", "", "a-prefix", "", "", "", "", ""])
    fake.install(monkeypatch)
    result = run("init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.b")
    assert result.exit_code == 0, result.output
    assert fake.rejected == []
    settings = load_settings(config_path="cdc.toml", env={})
    assert (settings.mysql.port, settings.mysql.ssl_mode, settings.state_dir, settings.aws.prefix) == (
        3307, "PREFERRED", ".cdc", "a-prefix")


@pytest.fixture
def ca_file(tmp_path: Path) -> Path:
    path = tmp_path / "tls" / "rds-global-bundle.pem"
    path.parent.mkdir()
    path.write_text("-----BEGIN CERTIFICATE-----\n")  # read only by the TLS handshake, which --skip-test skips
    return path


def test_tls_flags_are_written_and_load_back(ca_file: Path, tmp_path: Path) -> None:
    cert, key = tmp_path / "tls" / "client.pem", tmp_path / "tls" / "client.key"
    cert.write_text("cert\n")
    key.write_text("key\n")
    result = run(*SKIP, "-h", "db", "-u", "u", "--tables", "a.b", "--ssl-mode", "verify_identity",
                 "--ssl-ca", "tls/rds-global-bundle.pem", "--ssl-cert", str(cert), "--ssl-key", str(key))
    assert result.exit_code == 0, result.output
    mysql = load_settings(config_path="cdc.toml", env={}).mysql
    # A relative path is recorded absolute: cdc.toml is read by commands started from other directories.
    assert (mysql.ssl_mode, mysql.ssl_ca, mysql.ssl_cert, mysql.ssl_key) == (
        "VERIFY_IDENTITY", str(ca_file), str(cert), str(key))


@pytest.mark.parametrize(("args", "needle"), [
    (["--ssl-mode", "VERIFY_IDENTITY"], "--ssl-mode VERIFY_IDENTITY checks the server certificate against a CA: "
                                        "missing --ssl-ca"),
    (["--ssl-mode", "VERIFY_CA", "--ssl-ca", "nowhere.pem"], "--ssl-ca '"),
    (["--ssl-mode", "VERIFY_CA", "--ssl-ca", "."], "not a file"),
    (["--ssl-mode", "sometimes"], "--ssl-mode 'sometimes': not one of DISABLED"),
    (["--ssl-key", "tls/rds-global-bundle.pem"], "--ssl-key without --ssl-cert"),
    (["--exclude-tables", "nodot"], "--exclude-tables 'nodot': not db.table"),
])
def test_bad_tls_or_exclude_answers_exit_2(ca_file: Path, args: list[str], needle: str) -> None:
    result = run(*SKIP, "-h", "db", "-u", "u", "--tables", "a.b", *args)
    assert result.exit_code == 2 and needle in " ".join(result.stderr.split())
    assert not Path("cdc.toml").exists()


def test_missing_ca_file_is_named(ca_file: Path) -> None:
    result = run(*SKIP, "-h", "db", "-u", "u", "--tables", "a.b", "--ssl-mode", "VERIFY_CA", "--ssl-ca", "no.pem")
    assert result.exit_code == 2
    assert f"no such file: {Path.cwd() / 'no.pem'}" in " ".join(result.stderr.split())


def test_wizard_asks_for_the_ca_only_when_the_mode_verifies(ca_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeQuestionary([
        "", "verify_identity", "", "missing.pem", str(ca_file), "",  # port, mode, CA: empty, wrong, right; no cert
        "a.audit_*, a.tmp", "",  # excluded tables, state dir
        "", "", "", "", "", "", "",
    ])
    fake.install(monkeypatch)
    result = run("init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.*")
    assert result.exit_code == 0, result.output
    assert fake.rejected == [": an answer is required",
                             f"missing.pem: no such file: {Path.cwd() / 'missing.pem'}"]
    mysql = load_settings(config_path="cdc.toml", env={}).mysql
    assert (mysql.ssl_mode, mysql.ssl_ca, mysql.exclude_tables) == ("VERIFY_IDENTITY", str(ca_file), ("a.audit_*", "a.tmp"))
    assert sum(m.startswith("CA bundle") for m in fake.asked) == 1

    Path("cdc.toml").unlink()
    plain = FakeQuestionary([""] * 12)
    plain.install(monkeypatch)
    assert run("init", "--skip-test", "--host", "db", "--user", "u", "--tables", "a.*").exit_code == 0
    assert not any(m.startswith("CA bundle") for m in plain.asked)


def test_exclude_tables_flag_is_written_and_loads_back() -> None:
    result = run(*SKIP, "-h", "db", "-u", "u", "--tables", "shop.*", "--exclude-tables", "shop.audit_*",
                 "--exclude-tables", "shop.tmp,shop.old")
    assert result.exit_code == 0, result.output
    mysql = load_settings(config_path="cdc.toml", env={}).mysql
    assert (mysql.tables, mysql.exclude_tables) == (("shop.*",), ("shop.audit_*", "shop.tmp", "shop.old"))


@pytest.mark.parametrize("fields", [
    dict(host="db", user="u", tables="a.b"),
    dict(host="db", port="3307", user="u", ssl_mode="required", tables="a.*, b.c", exclude_tables="a.x_*",
         state_dir="/var/lib/cdc", bucket="acme-landing", prefix="mysql/hr", stream="s", region="eu-west-1",
         snowflake_connection="cdc", snowflake_database="RAW", snowflake_schema="HR"),
    dict(host="db", user="u", tables="a.b", ssl_mode="VERIFY_CA", ssl_ca="/etc/ssl/ca.pem", ssl_cert="/etc/ssl/c.pem",
         ssl_key="/etc/ssl/c.key", socket="/tmp/mysql.sock"),
    dict(host="db", user="u", tables="a.b", prefix="only-a-prefix"),  # no bucket or stream: still recorded
])
def test_what_is_written_loads_back_as_answered(fields: dict[str, str], tmp_path: Path) -> None:
    answers = Answers(**fields)
    path = tmp_path / "c.toml"
    path.write_text(render_toml(answers))
    assert load_settings(config_path=path, env={}) == to_settings(answers)


def test_check_summary_counts_warnings_as_check_binlog_does(
        mariadb: MariaDB, fresh_db: str, replication_user: DbUser, monkeypatch: pytest.MonkeyPatch) -> None:
    mariadb.execute("CREATE TABLE keyed (id INT PRIMARY KEY)", database=fresh_db)
    mariadb.execute("CREATE TABLE loose (a INT)", database=fresh_db)  # no primary key: check-binlog warns
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", REPLICATION_PASSWORD)
    result = run("init", "--no-input", *connection_flags(mariadb, replication_user), "--tables", f"{fresh_db}.*")
    assert result.exit_code == 0, result.output
    report = json.loads(run("check-binlog", "--json", "--config", "cdc.toml").stdout)
    warned = [c["name"] for c in report["checks"] if c["status"] == "warn"]
    failed = [c["name"] for c in report["checks"] if c["status"] == "fail"]
    assert "primary_keys" in warned and failed == []
    said = " ".join(result.stderr.split())
    assert (f"warn connected to mariadb {report['server']['version']} at {mariadb.host}:{mariadb.port}; 0 failed, "
            f"{len(warned)} warning(s) of {len(report['checks'])} binlog checks ({', '.join(warned)})") in said
    for check in (c for c in report["checks"] if c["status"] == "warn"):  # each warning with its value and fix
        assert f"warn {check['name']}: {' '.join(check['value'].split())} (fix: {' '.join(check['fix'].split())})" in said
    assert "checks pass" not in said


RUNBOOK = Path(__file__).resolve().parents[2] / "examples" / "runbook-rds-to-snowflake.md"


def runbook_init_command() -> list[str]:
    """The `cdc init --no-input ...` of the runbook's step 1, as a shell would split it."""
    text = RUNBOOK.read_text(encoding="utf-8").replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("$ cdc init --no-input"))
    return shlex.split(line.removeprefix("$ cdc "))


def replaced(args: list[str], flag: str, value: str) -> list[str]:
    at = args.index(flag)
    return [*args[:at + 1], value, *args[at + 2:]]


def test_the_runbooks_init_step_works_as_written(tls_server: MariaDB, certs: Path, aws_env: dict[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 1 of the runbook, verbatim but for the server's address and the CA file: a TLS server verified
    by name (VERIFY_IDENTITY) against its CA, moto for S3, a connections.toml naming `cdc`."""
    import boto3

    tls_server.execute("CREATE USER IF NOT EXISTS cdc_repl@'%%' IDENTIFIED BY %s REQUIRE SSL", (TLS_PASSWORD,))
    tls_server.execute("GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO cdc_repl@'%'")
    tls_server.execute("CREATE DATABASE IF NOT EXISTS hr")
    tls_server.execute("CREATE TABLE IF NOT EXISTS hr.employees (id INT PRIMARY KEY)")
    tls_server.execute("CREATE TABLE IF NOT EXISTS hr.audit_log (id INT PRIMARY KEY)")
    s3 = boto3.client("s3", region_name="eu-west-1")
    if "acme-cdc-landing" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="acme-cdc-landing", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    home = Path.home() / ".snowflake"
    home.mkdir()
    (home / "connections.toml").write_text('[cdc]\naccount = "acme"\nuser = "cdc"\n')
    monkeypatch.setenv("CDC_MYSQL_PASSWORD", TLS_PASSWORD)

    args = runbook_init_command()
    args = replaced(replaced(args, "-h", tls_server.host), "--ssl-ca", str(certs / "ca.pem"))
    result = run(*args, "-P", str(tls_server.port))
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert f"connected to mariadb {tls_server.variable('version')} at {tls_server.host}:{tls_server.port}; 0 failed," in said
    assert "ok 1 table(s) selected: hr.employees" in said and "ok s3://acme-cdc-landing is reachable" in said

    written = load_settings(config_path="cdc.toml", env={})
    example = load_settings(config_path=RUNBOOK.parent / "cdc.s3.toml", env={})
    assert (written.mysql.host, written.mysql.port, written.mysql.ssl_ca) == (
        tls_server.host, tls_server.port, str(certs / "ca.pem"))
    for section, keys in {"mysql": ("user", "ssl_mode", "tables", "exclude_tables"),
                          "aws": ("region", "bucket", "prefix"),
                          "snowflake": ("connection", "database", "schema")}.items():
        for key in keys:
            assert getattr(getattr(written, section), key) == getattr(getattr(example, section), key), key
    assert written.state_dir == example.state_dir
