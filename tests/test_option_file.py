"""Option files read as the mysql client reads them: file order across groups, !include / !includedir where they
stand, booleans, and TLS lines mapped onto --ssl-mode failing closed (#26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.config import load_settings
from cdc.errors import ConfigError
from cdc.option_file import read_options


def _settings(tmp_path: Path, text: str, **flags: str):  # type: ignore[no-untyped-def]
    (tmp_path / ".my.cnf").write_text(text)
    return load_settings({f"mysql.{k}": v for k, v in flags.items()}, env={"HOME": str(tmp_path)}, cwd=tmp_path)


def test_options_come_in_file_order_with_includes_where_they_stand(tmp_path: Path) -> None:
    conf_d = tmp_path / "conf.d"
    conf_d.mkdir()
    (conf_d / "b.cnf").write_text("[client]\nport=2\n")
    (conf_d / "a.cnf").write_text("[mysqld]\nport=9\n[client]\nport=1\n")
    (conf_d / "c.ini").write_text("[client]\nport=7\n")  # not *.cnf: not read
    (tmp_path / "extra.cnf").write_text("[mysql]\nuser=included\n")
    main = tmp_path / "my.cnf"
    main.write_text("# comment\n[mysql] # the client's own group\nuser = first\n!include extra.cnf\nhost=h\n; comment\n"
                    f"[server]\nport=8\n!includedir {conf_d}\n[client-mariadb]\nLOOSE_SSL_MODE=\"REQUIRED\"\nssl\n")
    found = [(o.name, o.value, o.where.split("/")[-1]) for o in read_options(main)]
    assert found == [("user", "first", "my.cnf:3"), ("user", "included", "extra.cnf:2"), ("host", "h", "my.cnf:5"),
                     ("port", "1", "a.cnf:4"), ("port", "2", "b.cnf:2"), ("ssl-mode", "REQUIRED", "my.cnf:11"),
                     ("ssl", None, "my.cnf:12")]


def test_a_file_that_includes_itself_is_an_error_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / ".my.cnf").write_text("[client]\n!include .my.cnf\n")
    with pytest.raises(ConfigError, match="includes nested deeper than 10"):
        load_settings({}, env={"HOME": str(tmp_path)}, cwd=tmp_path)


@pytest.mark.parametrize(("lines", "mode", "why"), [
    ("ssl", "REQUIRED", "ssl"),
    ("ssl=0", "DISABLED", "ssl=0"),
    ("skip-ssl", "DISABLED", "ssl=0"),
    ("ssl=OFF\nssl-verify-server-cert\nssl-ca=/ca.pem", "VERIFY_IDENTITY", "ssl-verify-server-cert"),
    ("enable-ssl-verify-server-cert\nssl-ca=/ca.pem\nskip-ssl-verify-server-cert", "VERIFY_CA", "ssl-ca=/ca.pem"),
    ("ssl-ca=/ca.pem", "VERIFY_CA", "ssl-ca=/ca.pem"),
    ("ssl-cert=/me.pem", "REQUIRED", "ssl-cert=/me.pem"),
    ("ssl-mode=DISABLED\nssl-ca=/ca.pem", "VERIFY_CA", "ssl-ca=/ca.pem"),  # the strongest line wins
    ("ssl-mode=verify_identity\nssl=1\nssl-ca=/ca.pem", "VERIFY_IDENTITY", "ssl-mode=verify_identity"),
])
def test_tls_lines_mean_the_strongest_ssl_mode_they_ask_for(tmp_path: Path, lines: str, mode: str, why: str) -> None:
    settings = _settings(tmp_path, f"[client]\nuser=u\n{lines}\n")
    assert settings.mysql.ssl_mode.upper() == mode
    where = tmp_path / ".my.cnf"
    number = next(i for i, line in enumerate(f"[client]\nuser=u\n{lines}".splitlines(), 1)
                  if line.replace("skip-", "").startswith(why.split("=")[0]))
    assert settings.source_of("mysql.ssl_mode") == f"option file {where}:{number}: {why}"


def test_flags_still_win_over_the_option_file(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "[client]\nssl-verify-server-cert\nssl-ca=/ca.pem\n", ssl_mode="REQUIRED")
    assert (settings.mysql.ssl_mode, settings.source_of("mysql.ssl_mode")) == ("REQUIRED", "flag --ssl-mode")


def test_a_ca_without_a_mode_verifies_whoever_names_it(tmp_path: Path) -> None:
    # Before #26 --ssl-ca alone meant PREFERRED: TLS without looking at the certificate.
    settings = _settings(tmp_path, "[client]\nuser=u\n", ssl_ca="/ca.pem")
    assert (settings.mysql.ssl_mode, settings.source_of("mysql.ssl_mode")) == (
        "VERIFY_CA", "implied by mysql.ssl_ca (from flag --ssl-ca)")
    assert _settings(tmp_path, "[client]\n", ssl_cert="/me.pem").mysql.ssl_mode == "REQUIRED"
    assert _settings(tmp_path, "[client]\n").mysql.ssl_mode == "PREFERRED"


def test_a_line_that_is_no_option_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / ".my.cnf").write_text("[client\nuser=u\n")
    with pytest.raises(ConfigError, match=r"option file .*\.my\.cnf:1: '\[client' is not a group header"):
        load_settings({}, env={"HOME": str(tmp_path)}, cwd=tmp_path)
    (tmp_path / ".my.cnf").write_text("user=u\n[client]\n")
    with pytest.raises(ConfigError, match=r"\.my\.cnf:1: option 'user=u' before any \[group\]"):
        load_settings({}, env={"HOME": str(tmp_path)}, cwd=tmp_path)
