"""Logs of the long-running commands: --log-level / --log-format (flag, CDC_LOG_*, cdc.toml [log]), one handler on
stderr, JSON lines with the promised fields, third-party loggers kept at WARNING."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from cdc.commands import logs
from cdc.config import LogSettings, load_log_settings
from cdc.errors import ConfigError
from cdc.state import StateDir
from tests.pipeline.conftest import BINLOG, checkpoint

ROOT = Path(__file__).resolve().parents[2]
LONG_RUNNING = ("snapshot", "tail", "ship", "spark-merge", "snowflake-apply", "run", "wait")
PROMISED = {"ts", "level", "logger", "message"}


@pytest.fixture
def configured(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., None]]:
    """configure() for one test, undone after it."""
    def setup(**fields: Any) -> None:
        logs.configure(LogSettings(**fields), command="cdc.commands.test", env={})

    try:
        yield setup
    finally:
        logs.reset()


def _stuck_state(root: Path) -> Path:
    """A tail checkpoint that never reaches the position `wait` is asked for."""
    state = StateDir(root / "state").ensure()
    checkpoint(state, "tail", file=BINLOG, pos=4, gtid=None, last_segment=None, server_uuid="u")
    return state.root


def _cdc(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CDC_") and k != "MYSQL_PWD"}
    clean |= {"HOME": str(cwd), "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "cdc", *args], cwd=cwd, env=clean, capture_output=True, text=True,
                          timeout=120)


def _json_lines(stderr: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in stderr.splitlines()]  # every line one JSON object, nothing else
    for record in records:
        assert PROMISED <= set(record), record
        assert record["level"] in ("debug", "info", "warning", "error", "critical")
        assert record["ts"].endswith("Z") and datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
    return records


def test_every_stderr_line_of_a_real_command_is_one_json_object(tmp_path: Path) -> None:
    """`cdc wait` as a user runs it: the waiting notes and the final error (exit 9) as JSON records with fields."""
    state = _stuck_state(tmp_path)
    done = _cdc("wait", "--state-dir", str(state), "--position", f"{BINLOG}:999", "--stage", "tail", "--interval",
                "50ms", "--timeout", "300ms", "--log-format", "json", cwd=tmp_path)
    assert done.returncode == 9, done.stderr
    records = _json_lines(done.stderr)
    assert [r["level"] for r in records] == ["info", "error"]
    waiting, error = records
    assert waiting["logger"] == "cdc.commands.wait" and waiting["message"].startswith("waiting for tail: tail is at")
    assert (waiting["stage"], waiting["state"]) == ("tail", "tail behind")
    assert error["exit_code"] == 9 and "did not reach position" in error["message"]
    assert done.stdout == ""


def test_log_format_and_level_from_the_environment_and_cdc_toml(tmp_path: Path) -> None:
    state = _stuck_state(tmp_path)
    args = ("wait", "--state-dir", str(state), "--position", f"{BINLOG}:999", "--stage", "tail", "--interval", "50ms",
            "--timeout", "200ms")
    from_env = _cdc(*args, cwd=tmp_path, env={"CDC_LOG_FORMAT": "json"})
    assert from_env.returncode == 9 and len(_json_lines(from_env.stderr)) == 2
    (tmp_path / "cdc.toml").write_text('[log]\nformat = "json"\nlevel = "warning"\n')
    from_toml = _cdc(*args, cwd=tmp_path)
    assert from_toml.returncode == 9
    assert [r["level"] for r in _json_lines(from_toml.stderr)] == ["error"]  # the info note is below warning
    flag_wins = _cdc(*args, "--log-format", "text", "--log-level", "info", cwd=tmp_path)
    lines = flag_wins.stderr.splitlines()
    assert " INFO    cdc.commands.wait: waiting for tail" in lines[0] and lines[0].endswith(f"tail is at {BINLOG}:4")
    assert " ERROR   cdc.commands.wait: tail did not reach" in lines[1]
    bad = _cdc(*args, cwd=tmp_path, env={"CDC_LOG_LEVEL": "loud", "CDC_LOG_FORMAT": "json"})
    assert bad.returncode == 3
    (record,) = _json_lines(bad.stderr)  # the configuration error itself, in the format that could be told
    assert "log.level = 'loud' (from environment CDC_LOG_LEVEL) is not one of debug, info" in record["message"]
    assert _cdc(*args, "--log-level", "loud", cwd=tmp_path).returncode == 2  # a bad flag is a usage error


def test_log_settings_resolve_flag_env_toml_default(tmp_path: Path) -> None:
    assert load_log_settings(env={}, cwd=tmp_path) == LogSettings("info", "text", "30s")
    (tmp_path / "cdc.toml").write_text('[log]\nlevel = "debug"\nstatus_interval = 5\n')
    settings = load_log_settings(env={"CDC_LOG_FORMAT": "json"}, cwd=tmp_path)
    assert (settings.level, settings.format, settings.status_seconds()) == ("debug", "json", 5.0)
    settings = load_log_settings({"log.level": "error", "log.status_interval": "1m"}, env={}, cwd=tmp_path)
    assert (settings.level, settings.status_seconds()) == ("error", 60.0)
    with pytest.raises(ConfigError, match=r"log.status_interval = 'soon' \(from flag --status-interval\) is not a duration"):
        load_log_settings({"log.status_interval": "soon"}, env={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"log.format = 'xml' \(from environment CDC_LOG_FORMAT\)"):
        load_log_settings(env={"CDC_LOG_FORMAT": "xml"}, cwd=tmp_path)


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_long_running_command_takes_the_log_options(name: str, cli: Callable[..., Result]) -> None:
    text = " ".join(cli(name, "--help", env={"COLUMNS": "200"}).stdout.split())
    assert "--log-level" in text and "--log-format" in text
    assert ("--status-interval" in text) == (name in ("tail", "run", "wait"))


def test_json_record_fields_and_exceptions(configured: Callable[..., None], capsys: pytest.CaptureFixture[str]) -> None:
    configured(format="json")
    log = logging.getLogger("cdc.capture.tail")
    log.info("tail at %s", "b.000001:4", extra={"stage": "tail", "position": "b.000001:4", "lag_seconds": 1.5,
                                                 "rows": 3, "rows_per_second": 0.5})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("it failed")
    info, failed = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert list(info)[:4] == ["ts", "level", "logger", "message"]
    assert info == info | {"level": "info", "logger": "cdc.capture.tail", "message": "tail at b.000001:4",
                           "stage": "tail", "position": "b.000001:4", "lag_seconds": 1.5, "rows": 3,
                           "rows_per_second": 0.5}
    assert failed["level"] == "error" and "ValueError: boom" in failed["exc"]


def test_third_party_loggers_stay_at_warning_unless_debug(configured: Callable[..., None],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    names = ("py4j.clientserver", "botocore.credentials", "snowflake.connector.connection", "pymysqlreplication",
             "some.other.library")
    configured(level="info", format="json")
    for name in names:
        logging.getLogger(name).info("chatter")
        logging.getLogger(name).warning("trouble")
    logging.getLogger("cdc.spark.job").info("ours")
    logging.getLogger("cdc.spark.job").debug("ours, in detail")
    seen = [(r["logger"], r["message"]) for r in map(json.loads, capsys.readouterr().err.splitlines())]
    assert seen == [(name, "trouble") for name in names] + [("cdc.spark.job", "ours")]
    configured(level="debug", format="json")
    logging.getLogger("botocore.credentials").debug("detail")
    logging.getLogger("cdc.spark.job").debug("ours, in detail")
    assert [json.loads(line)["message"] for line in capsys.readouterr().err.splitlines()] == ["detail", "ours, in detail"]
    configured(level="error")
    logging.getLogger("cdc.spark.job").warning("not shown")
    logging.getLogger("botocore").warning("not shown")
    assert capsys.readouterr().err == ""


def test_levels_are_put_back_after_a_command(configured: Callable[..., None]) -> None:
    before = {name: logging.getLogger(name).level for name in ("", "cdc", "botocore")}
    configured(level="debug")
    logs.reset()
    assert {name: logging.getLogger(name).level for name in before} == before
    assert not logs.configured()
