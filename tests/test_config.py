"""Settings resolve flag > CDC_* environment > cdc.toml > MySQL option file > default, and say where a value came from."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cdc.config import MySQLSettings, load_settings
from cdc.errors import ConfigError, ExitCode


@pytest.fixture
def layers(tmp_path: Path) -> dict[str, object]:
    """An option file, a cdc.toml, an environment and flags that all set mysql.port (and more)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".my.cnf").write_text("[client]\nport = 1001\nuser = from_cnf\npassword = \"cnf secret\"\nhost = cnf.example\n")
    (tmp_path / "cdc.toml").write_text('state_dir = "toml-state"\n[mysql]\nport = 1002\nuser = "from_toml"\n')
    return {"cwd": tmp_path, "env": {"HOME": str(home), "CDC_MYSQL_PORT": "1003"}, "flags": {"mysql.port": 1004}}


def resolve(layers: dict[str, object], *, env: dict[str, str] | None = None, flags: dict[str, object] | None = None):
    return load_settings(flags if flags is not None else layers["flags"], env=env if env is not None else layers["env"],
                         cwd=layers["cwd"])  # type: ignore[arg-type]


def test_precedence_flag_env_toml_option_file_default(layers: dict[str, object], tmp_path: Path) -> None:
    env: dict[str, str] = layers["env"]  # type: ignore[assignment]
    settings = resolve(layers)
    assert (settings.mysql.port, settings.source_of("mysql.port")) == (1004, "flag --port")
    settings = resolve(layers, flags={})
    assert (settings.mysql.port, settings.source_of("mysql.port")) == (1003, "environment CDC_MYSQL_PORT")
    settings = resolve(layers, flags={}, env={"HOME": env["HOME"]})
    assert (settings.mysql.port, settings.source_of("mysql.port")) == (1002, f"config file {tmp_path / 'cdc.toml'}")
    assert (settings.mysql.user, settings.state_dir) == ("from_toml", "toml-state")
    # What only the option file sets comes from it, password included.
    assert (settings.mysql.host, settings.mysql.password) == ("cnf.example", "cnf secret")
    assert settings.source_of("mysql.host") == "option file"
    (tmp_path / "cdc.toml").unlink()
    settings = resolve(layers, flags={}, env={"HOME": env["HOME"]})
    assert (settings.mysql.port, settings.mysql.user, settings.source_of("mysql.port")) == (1001, "from_cnf", "option file")
    (Path(env["HOME"]) / ".my.cnf").unlink()
    settings = resolve(layers, flags={}, env={"HOME": env["HOME"]})
    assert (settings.mysql.port, settings.mysql.user, settings.source_of("mysql.port")) == (3306, "root", "default")


def test_password_environment_order(tmp_path: Path) -> None:
    base = {"HOME": str(tmp_path)}
    assert load_settings(env=base | {"MYSQL_PWD": "a"}, cwd=tmp_path).mysql.password == "a"
    both = base | {"MYSQL_PWD": "a", "CDC_MYSQL_PASSWORD": "pw-from-cdc-env"}
    settings = load_settings(env=both, cwd=tmp_path)
    assert settings.mysql.password == "pw-from-cdc-env"
    assert "pw-from-cdc-env" not in repr(settings)


@pytest.mark.parametrize(("env", "toml", "flags", "message"), [
    ({"CDC_MYSQL_PORT": "abc"}, "", {}, "mysql.port = 'abc' (from environment CDC_MYSQL_PORT) is not a valid int"),
    ({}, '[mysql]\nport = "abc"\n', {}, "mysql.port = 'abc' (from config file {toml}) is not a valid int"),
    ({}, "", {"mysql.port": 70000}, "mysql.port = 70000 (from flag --port) is not a TCP port"),
    ({"CDC_MYSQL_SSL_MODE": "maybe"}, "", {}, "mysql.ssl_mode = 'maybe' (from environment CDC_MYSQL_SSL_MODE) is not one of"),
    ({}, "[mysql]\nhots = 1\n", {}, "config file {toml}: unknown setting 'mysql.hots'"),
])
def test_errors_name_the_field_and_its_source(
    tmp_path: Path, env: dict[str, str], toml: str, flags: dict[str, object], message: str
) -> None:
    if toml:
        (tmp_path / "cdc.toml").write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(flags, env={"HOME": str(tmp_path), **env}, cwd=tmp_path)
    assert str(caught.value).startswith(message.format(toml=tmp_path / "cdc.toml"))
    assert caught.value.exit_code == ExitCode.CONFIG


@pytest.mark.parametrize("toml", ['[mysql]\npassword = "hunter2-secret"\n',
                                  '[aws]\naws_secret_access_key = "hunter2-secret"\n'])
def test_secret_in_cdc_toml_is_refused(tmp_path: Path, toml: str) -> None:
    (tmp_path / "cdc.toml").write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert "holds a secret" in caught.value.message
    assert "hunter2-secret" not in str(caught.value)
    assert caught.value.hint is not None and "CDC_MYSQL_PASSWORD" in caught.value.hint


def test_config_error_exits_3_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cdc.commands.main import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["check-binlog"], env={"HOME": str(tmp_path), "CDC_MYSQL_PORT": "abc"})
    assert result.exit_code == ExitCode.CONFIG
    assert "mysql.port = 'abc' (from environment CDC_MYSQL_PORT)" in " ".join(result.stderr.split())


def test_reader_server_id_is_stable_non_zero_and_configurable() -> None:
    derived = MySQLSettings(host="db1", port=3306, user="cdc").reader_server_id()
    assert derived == MySQLSettings(host="db1", port=3306, user="cdc").reader_server_id()
    assert derived != MySQLSettings(host="db2", port=3306, user="cdc").reader_server_id()
    assert 1_000_000_000 <= derived < 2**32
    assert MySQLSettings(server_id=42).reader_server_id() == 42


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parents[1] / "examples").glob("*.toml")))
def test_every_example_config_loads(name: str, tmp_path: Path) -> None:
    """The examples are what users copy: each must load with no unknown key and its values typed."""
    path = Path(__file__).parents[1] / "examples" / name
    settings = load_settings({}, config_path=path, env={}, cwd=tmp_path)
    assert settings.sources  # every key came from the file, nothing silently ignored
    if name == "cdc.s3.toml":
        assert settings.mysql.hash_columns == ("hr.employees.personal_email",)
        assert settings.aws.roll_size == 128 and settings.aws.roll_interval == 60


def test_hosts_list_from_toml_or_environment(tmp_path: Path) -> None:
    (tmp_path / "cdc.toml").write_text('[mysql]\nport = 3307\nhosts = ["db-a", "db-b:3310", "[::1]:3311"]\n')
    from cdc.source.topology import candidates

    settings = load_settings(env={}, cwd=tmp_path)
    assert settings.mysql.hosts == ("db-a", "db-b:3310", "[::1]:3311")
    assert [(s.host, s.port) for s in candidates(settings.mysql)] == [("db-a", 3307), ("db-b", 3310), ("::1", 3311)]
    assert load_settings(env={"CDC_MYSQL_HOSTS": "x:1, y:2"}, cwd=tmp_path).mysql.hosts == ("x:1", "y:2")
    assert [(s.host, s.port) for s in candidates(MySQLSettings(host="h", port=9))] == [("h", 9)]


@pytest.mark.parametrize("entry", ["db-a:port", ":3306", "db-a:70000"])
def test_a_bad_host_in_hosts_is_a_config_error(entry: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"mysql.hosts \(from environment CDC_MYSQL_HOSTS\)"):
        load_settings(env={"CDC_MYSQL_HOSTS": f"db-b,{entry}"}, cwd=tmp_path)


def test_hosts_alone_give_the_other_commands_their_first_server(tmp_path: Path) -> None:
    (tmp_path / "cdc.toml").write_text('[mysql]\nhosts = ["db-a:3310", "db-b"]\n')
    settings = load_settings(env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert (settings.mysql.host, settings.mysql.port) == ("db-a", 3310)
    assert settings.source_of("mysql.host").startswith("the first of mysql.hosts")
    both = load_settings({"mysql.host": "db-c"}, env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert (both.mysql.host, both.mysql.port) == ("db-c", 3306)  # an explicit host wins


def test_aws_read_timeout_reaches_the_clients_and_is_checked(tmp_path: Path) -> None:
    """A dead link to S3/Kinesis is noticed after aws.read_timeout: the value must reach botocore's clients."""
    from cdc.aws import make_client

    (tmp_path / "cdc.toml").write_text('[aws]\nregion = "us-east-1"\nread_timeout = 7.5\n')
    settings = load_settings(env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert make_client("kinesis", settings.aws).meta.config.read_timeout == 7.5
    from_env = load_settings(env={"HOME": str(tmp_path), "CDC_AWS_READ_TIMEOUT": "3"}, cwd=tmp_path)
    assert make_client("s3", from_env.aws).meta.config.read_timeout == 3.0
    assert load_settings(env={"HOME": str(tmp_path)}, cwd=tmp_path / "none").aws.read_timeout == 60.0
    with pytest.raises(ConfigError, match=r"aws.read_timeout = 0.0 \(from environment CDC_AWS_READ_TIMEOUT\)"):
        load_settings(env={"HOME": str(tmp_path), "CDC_AWS_READ_TIMEOUT": "0"}, cwd=tmp_path)


def test_snowflake_load_sessions_defaults_to_four_and_is_checked(tmp_path: Path) -> None:
    """snowflake-apply stages a batch's tables on load_sessions sessions (issue #25): 1..16, from any layer."""
    (tmp_path / "cdc.toml").write_text("[snowflake]\nload_sessions = 2\n")
    assert load_settings(env={"HOME": str(tmp_path)}, cwd=tmp_path / "none").snowflake.load_sessions == 4
    assert load_settings(env={"HOME": str(tmp_path)}, cwd=tmp_path).snowflake.load_sessions == 2
    one = load_settings(env={"HOME": str(tmp_path), "CDC_SNOWFLAKE_LOAD_SESSIONS": "1"}, cwd=tmp_path)
    assert one.snowflake.load_sessions == 1
    for wrong in ("0", "17"):
        with pytest.raises(ConfigError, match=rf"snowflake.load_sessions = {wrong} \(from environment "
                                              r"CDC_SNOWFLAKE_LOAD_SESSIONS\) is outside 1..16"):
            load_settings(env={"HOME": str(tmp_path), "CDC_SNOWFLAKE_LOAD_SESSIONS": wrong}, cwd=tmp_path)
