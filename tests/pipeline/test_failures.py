"""The last error of a stage (`<state>/errors/<stage>.json`): recorded where a stage fails, shown by status until
the stage succeeds or commits work again, never holding a secret.

The whole story against a real server and a real `cdc tail` is test_status.py's
test_a_failing_tail_is_shown_by_status_until_it_succeeds; these cover the rules around it.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

from cdc.config import load_settings
from cdc.errors import LockedError, PositionError, TransientError
from cdc.pipeline.failures import current_failures, known_secrets, read_failure, record_failure, redact
from cdc.state import StateDir
from tests.pipeline.cli import run
from tests.pipeline.conftest import BINLOG, checkpoint
from tests.pipeline.test_status import WRONG_PASSWORD, server_args, status_json
from tests.rig import MariaDB


def test_a_failure_stands_until_the_stage_commits_work(state: StateDir) -> None:
    checkpoint(state, "tail", file=BINLOG, pos=4, gtid=None, last_segment=None, server_uuid="u")
    first = record_failure(state, "tail", TransientError("lost the connection to db1:3306"), command="cdc tail", now=100)
    assert first is not None and (first.exit_code, first.failures, first.error) == (10, 1, "TransientError")
    assert stat.S_IMODE(state.error_path("tail").stat().st_mode) == 0o600
    again = record_failure(state, "tail", TransientError("lost it again"), command="cdc tail", now=200)
    assert again is not None and again.failures == 2  # no work committed in between: in a row
    assert current_failures(state) == {"tail": again}

    checkpoint(state, "tail", file=BINLOG, pos=900, gtid=None, last_segment=None, server_uuid="u")  # tail moved on
    assert current_failures(state) == {}  # the record is history (a run stopped by Ctrl-C does not remove it)
    assert read_failure(state, "tail") == again
    later = record_failure(state, "tail", PositionError("binlog purged"), command="cdc run", now=300)
    assert later is not None and (later.failures, later.exit_code) == (1, 5)


def test_what_is_never_recorded(tmp_path: Path) -> None:
    missing = StateDir(tmp_path / "typo")
    assert record_failure(missing, "tail", TransientError("x"), command="cdc tail") is None
    assert not missing.root.exists()  # a mistyped --state-dir is not created for an error record
    state = StateDir(tmp_path / "state").ensure()
    # exit 6 means another run of the stage holds its lock: that one is running fine
    assert record_failure(state, "tail", LockedError("another `cdc tail` is running"), command="cdc tail") is None
    assert record_failure(state, "../x", TransientError("x"), command="cdc tail") is None
    assert not state.errors.exists()


def test_no_secret_is_written(state: StateDir) -> None:
    settings = load_settings({"state_dir": str(state.root)}, env={"CDC_MYSQL_PASSWORD": "hunter2-pw"}, cwd=state.root)
    env = {"AWS_SECRET_ACCESS_KEY": "AKsecretvalue", "SNOWFLAKE_PASSWORD": "sf-pw-1", "PWD": "/home/op", "X": "abc"}
    secrets = known_secrets(settings, env)
    assert set(secrets) == {"hunter2-pw", "AKsecretvalue", "sf-pw-1"}  # $PWD is a directory, not a password
    assert redact("a hunter2-pw b AKsecretvalue /home/op", secrets) == "a *** b *** /home/op"
    error = RuntimeError("driver said: password 'hunter2-pw' rejected")  # a bug's own text is redacted too
    failure = record_failure(state, "snapshot", error, command="cdc snapshot", secrets=secrets)
    assert failure is not None and failure.message == "RuntimeError: driver said: password '***' rejected"
    assert failure.exit_code == 1 and "hunter2" not in state.error_path("snapshot").read_text()


def test_a_stage_command_records_its_failure_and_status_shows_it(state: StateDir) -> None:
    result = run("ship", "--to", "s3", "--state-dir", str(state.root))  # no bucket configured: exit 3
    assert result.exit_code == 3
    record = json.loads(state.error_path("ship-s3").read_text())
    assert (record["stage"], record["command"], record["exit_code"], record["error"]) == (
        "ship-s3", "cdc ship --to s3", 3, "ConfigError")
    assert record["message"] == "ship --to s3 needs a bucket" and record["hint"].startswith("pass --bucket")

    code, doc = status_json("--offline", "--state-dir", str(state.root))
    assert code == 0  # status reports a failing stage; it does not fail itself
    shown = {s["stage"]: s for s in doc["stages"]}["ship-s3"]
    assert shown["last_error"]["exit_code"] == 3 and shown["last_error"]["message"] == record["message"]
    table = run("status", "--offline", "--state-dir", str(state.root))
    assert "ship-s3 failed at" in table.stdout.replace("\n", " ")

    assert run("ship", "--to", "nowhere", "--state-dir", str(state.root)).exit_code == 2  # no stage: not recorded
    assert sorted(p.name for p in state.errors.iterdir()) == ["ship-s3.json"]


def test_an_unreadable_record_is_skipped_with_a_note(state: StateDir) -> None:
    state.errors.mkdir()
    state.error_path("tail").write_text("{not json")
    state.error_path("ship-s3").write_text('{"version": 99}')
    code, doc = status_json("--offline", "--state-dir", str(state.root))
    assert code == 0 and all(s["last_error"] is None for s in doc["stages"])
    assert sum("ignored:" in note for note in doc["notes"]) == 2


def test_cdc_run_records_the_stage_that_failed_and_clears_it(mariadb: MariaDB, state: StateDir) -> None:
    args = ["run", "--stages", "tail", "--from-now", "--state-dir", str(state.root), *server_args(mariadb)]
    result = run(*args, env={"CDC_MYSQL_PASSWORD": WRONG_PASSWORD})
    assert result.exit_code == 1
    record = json.loads(state.error_path("tail").read_text())
    assert (record["command"], record["exit_code"]) == ("cdc run", 1) and "access denied" in record["message"]
    assert "n0t-the" not in state.error_path("tail").read_text()
    assert run(*args).exit_code == 0
    assert not state.error_path("tail").exists()
