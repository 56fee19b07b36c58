"""`cdc run` end to end: real MariaDB, moto's S3, Spark local, fakesnow; `cdc` run as a user runs it.

Spark start-up dominates the time, so each scenario makes as few `cdc run`s as it can.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from cdc.errors import ExitCode
from cdc.state import StateDir
from tests.pipeline.cli import run
from tests.pipeline.run_rig import (
    TABLES,
    Background,
    assert_replicated,
    cdc_run,
    create_source,
    more_writes,
    source_rows,
    target_rows,
    write_config,
)
from tests.rig import MariaDB
from tests.rig._process import wait_until
from tests.security.modes import assert_private_state

CHAIN = ["snapshot", "tail", "ship-s3", "spark-merge", "snowflake-bootstrap", "snowflake-apply"]


@pytest.fixture
def setup(tmp_path: Path, mariadb: MariaDB, fresh_db: str, aws_env: dict[str, str], bucket: str,  # noqa: F811
          snowflake_env: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    create_source(mariadb, fresh_db)
    state = tmp_path / "state"
    config = write_config(tmp_path / "cdc.toml", mariadb, fresh_db, aws_env, bucket, state)
    return {"config": config, "state": state, "db": fresh_db, "bucket": bucket}


def stages(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["stage"]: line for line in lines if line["event"] == "stage"}


def s3_keys(s3: Any, bucket: str) -> list[str]:  # noqa: F811
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def applied_batches(sf: Any) -> list[str]:  # noqa: F811
    cursor = sf.cursor()
    cursor.execute('SELECT "BATCH_ID" FROM "_CDC_APPLIED_BATCHES" ORDER BY 1')
    return [row[0] for row in cursor.fetchall()]


def test_until_now_replicates_then_catches_up_then_changes_nothing(
        setup: dict[str, Any], mariadb: MariaDB, sf: Any, s3: Any) -> None:  # noqa: F811
    """Started under umask 000, as a careless shell would: every file the runs write is still private (#26)."""
    code, lines, err = cdc_run(setup["config"], "--until-now", umask=0o000)
    assert code == 0, err
    first = stages(lines)
    assert list(first) == CHAIN and lines[-1]["event"] == "summary" and lines[-1]["complete"] is True
    assert first["snapshot"]["status"] == "done" and first["snapshot"]["count"] == 24
    assert first["spark-merge"]["status"] == "done" and first["snowflake-apply"]["status"] == "done"
    assert_replicated(mariadb, setup["db"], sf)

    more_writes(mariadb, setup["db"])
    code, lines, err = cdc_run(setup["config"], umask=0o000)  # --until-now is the default
    assert code == 0, err
    second = stages(lines)
    assert second["snapshot"]["status"] == "skipped" and second["tail"]["count"] > 0
    assert [second[s]["status"] for s in CHAIN[2:]] == ["done", "done", "nothing new", "done"]
    assert_replicated(mariadb, setup["db"], sf)
    assert source_rows(mariadb, setup["db"], "customers")[-1][0] == 100  # the PK change really happened

    before = (s3_keys(s3, setup["bucket"]), applied_batches(sf), target_rows(sf, "customers"))
    code, lines, err = cdc_run(setup["config"], umask=0o000)
    assert code == 0, err
    third = stages(lines)
    assert [third[s]["status"] for s in CHAIN] == ["skipped"] + ["nothing new"] * 5
    assert (s3_keys(s3, setup["bucket"]), applied_batches(sf), target_rows(sf, "customers")) == before
    assert applied_batches(sf) == ["b000000000001", "b000000000002"]
    assert_private_state(setup["state"])  # snapshot chunks, segments, lake and batch files, checkpoints


def test_kill_9_during_spark_merge_then_rerun_is_exact(
        setup: dict[str, Any], mariadb: MariaDB, sf: Any, s3: Any) -> None:  # noqa: F811
    state = StateDir(setup["state"])
    running = Background(setup["config"], "--until-now")
    assert wait_until(lambda: running.has(stage="ship-s3", status="done"), timeout=120), running.lines
    assert wait_until(lambda: bool(running.children()), timeout=60)  # the Spark JVM: merge is under way
    time.sleep(1.0)
    os.kill(running.process.pid, signal.SIGKILL)
    assert running.finish()[0] == -signal.SIGKILL
    assert state.read_checkpoint("merge", 1) is None, "the kill came too late to test anything"
    assert not running.has(stage="spark-merge")
    shipped = s3_keys(s3, setup["bucket"])

    more_writes(mariadb, setup["db"])  # the rerun must also carry changes made after the crash
    code, lines, err = cdc_run(setup["config"])
    assert code == 0, err
    assert stages(lines)["spark-merge"]["status"] == "done"
    assert_replicated(mariadb, setup["db"], sf)
    assert applied_batches(sf) == ["b000000000001"]  # one batch: the crashed run's was never sealed
    keys = s3_keys(s3, setup["bucket"])
    assert set(shipped) <= set(keys)  # re-shipping wrote the same keys, nothing beside them
    manifests = [k for k in keys if "/_manifests/" in k]  # one per shipped batch of segments: together, all of them
    covered = [n for k in manifests for n in json.loads(s3.get_object(Bucket=setup["bucket"], Key=k)["Body"].read())[
        "segment_names"]]
    assert sorted(covered) == sorted(p.name for p in (setup["state"] / "changelog").glob("seg-*.jsonl"))


def test_failing_stage_stops_the_chain_with_its_exit_code(
        setup: dict[str, Any], s3: Any) -> None:  # noqa: F811
    s3.delete_bucket(Bucket=setup["bucket"])
    state = StateDir(setup["state"])
    result = run("run", "--config", str(setup["config"]), "--json")
    assert result.exit_code == ExitCode.FAILURE
    message = " ".join(result.stderr.split())
    assert "cdc run: stage ship-s3 failed: S3 bucket" in message and "not found" in message
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["stage"], e["status"]) for e in events] == [("snapshot", "done"), ("tail", "nothing new"),
                                                          ("ship-s3", "failed")]
    assert (state.read_checkpoint("snapshot", 1) or {})["status"] == "done"
    assert state.read_checkpoint("tail", 2) is not None
    for later in ("ship-s3", "merge", "snowflake-apply"):
        assert state.read_checkpoint(later, 1) is None
    assert not (setup["state"] / "batches").exists()


def test_a_stage_locked_by_a_standalone_run_fails_naming_it(setup: dict[str, Any]) -> None:
    with StateDir(setup["state"]).ensure().lock("tail"):
        result = run("run", "--config", str(setup["config"]), "--stages", "tail", "--from-now")
    assert result.exit_code == ExitCode.LOCKED
    assert "cdc run: stage tail failed: another `cdc tail` is running" in " ".join(result.stderr.split())


@pytest.mark.parametrize(("args", "message"), [
    (("--stages", "tail,shipp"), "--stages 'shipp' is not a stage"),
    (("--skip-stage", "nope"), "--skip-stage 'nope' is not a stage"),
    (("--stages", "snapshot", "--no-snapshot"), "--no-snapshot contradicts --stages snapshot"),
    (("--stages", "tail", "--skip-stage", "tail"), "no stage left to run"),
])
def test_bad_stage_choice_is_a_usage_error(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = run("run", "--state-dir", str(tmp_path / "state"), *args)
    assert result.exit_code == ExitCode.USAGE
    assert message in result.stderr
    assert not (tmp_path / "state").exists()


def test_follow_picks_up_a_write_and_stops_on_sigterm(
        setup: dict[str, Any], mariadb: MariaDB, sf: Any) -> None:  # noqa: F811
    running = Background(setup["config"], "--follow", "--poll-interval", "0.5")
    try:
        assert wait_until(lambda: running.has(stage="snowflake-apply", status="done"), timeout=180), running.lines
        assert_replicated(mariadb, setup["db"], sf)
        more_writes(mariadb, setup["db"])
        written = time.monotonic()
        expected = {table: source_rows(mariadb, setup["db"], table) for table in TABLES}
        # Both tables: the writes are separate transactions, and a cycle may fall between them.
        assert wait_until(lambda: {t: target_rows(sf, t) for t in TABLES} == expected, timeout=240, interval=0.5)
        latency = time.monotonic() - written
        running.process.send_signal(signal.SIGTERM)
        code, err = running.finish(timeout=120)
    finally:
        if running.process.poll() is None:
            running.process.kill()
    assert code == 0, err
    # About one cycle (seconds on an idle machine); the bound leaves room for a loaded 2-core test machine.
    assert latency < 120, f"a write took {latency:.1f}s to reach Snowflake"
    summary = running.lines[-1]
    assert summary["event"] == "summary" and summary["stopped"] == "stopped by signal" and summary["cycles"] >= 2
    assert any(line["event"] == "cycle" for line in running.lines)
    # A cycle pays no fixed costs it can skip (#25): no bootstrap while the schema history is unchanged, no decode
    # worker started for a cycle's few rows.
    later = [line for line in running.lines if line["event"] == "stage" and line["cycle"] > 1]
    assert any(line["stage"] == "snowflake-bootstrap" and line["detail"].get("reason") == "schema history unchanged"
               for line in later), later
    workers = [line["detail"]["decode_workers"] for line in later if line["stage"] == "tail" and line["detail"]]
    assert workers and set(workers) == {0}, later


def test_live_view_shows_each_stage_where_it_got() -> None:
    from io import StringIO

    from rich.console import Console
    from rich.live import Live

    from cdc.commands.run import _View
    from cdc.pipeline.run import StageResult
    from cdc.pipeline.run_stages import StageProgress

    screen = StringIO()
    with Live(console=Console(file=screen, force_terminal=True, width=160, color_system=None)) as live:
        view = _View(as_json=False, live=live)
        view.progress(StageProgress("tail", "mariadb-bin.000003:4096", 1200, 850.0, 3.0))
        view.stage(StageResult("tail", 1, "done", "mariadb-bin.000003:8192", 2500, "rows", 2.0, 0.0))
        view.stage(StageResult("ship-s3", 1, "done", "seg-000001.jsonl", 2500, "records", 0.5))
    shown = screen.getvalue()
    for text in ("mariadb-bin.000003:4096", "850/s", "3s", "mariadb-bin.000003:8192", "2,500 rows", "1,250/s",
                 "seg-000001.jsonl", "5,000/s"):
        assert text in shown, text


def test_no_snapshot_needs_a_start_and_a_start_means_no_snapshot(
        tmp_path: Path, mariadb: MariaDB, fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("CDC_MYSQL_DATABASES", fresh_db)  # other tests' writes on the session server stay out
    base = ("run", "-h", mariadb.host, "-P", str(mariadb.port), "-u", "root", "--state-dir", str(state), "--json")
    refused = run(*base, "--no-snapshot")
    assert refused.exit_code == ExitCode.POSITION
    assert "cdc run: stage tail failed: tail has no checkpoint" in " ".join(refused.stderr.split())
    started = run(*base, "--no-snapshot", "--from-now")
    assert started.exit_code == 0, started.stderr
    summary = json.loads(started.stdout.splitlines()[-1])
    assert summary["stages"] == ["tail", "spark-merge"]  # nothing configured downstream but the local merge
    assert summary["last"]["tail"]["detail"]["origin"] == "--from-now"
    assert not (state / "snapshot.json").exists()
    # Without --no-snapshot, a start option alone also means "no snapshot"; once tail has a checkpoint, it continues.
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    mariadb.execute("INSERT INTO t VALUES (1), (2)", database=fresh_db)
    again = run(*base, "--stages", "snapshot,tail", "--from-now")
    assert again.exit_code == 0, again.stderr
    lines = [json.loads(line) for line in again.stdout.splitlines()]
    assert [(x["stage"], x["status"], x["count"]) for x in lines[:2]] == [("snapshot", "skipped", 0),
                                                                          ("tail", "done", 2)]
    assert lines[1]["detail"]["origin"] == "checkpoint"


def test_allow_no_pk_lets_the_chain_snapshot_a_keyless_table(
        tmp_path: Path, mariadb: MariaDB, fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #24: `cdc run` could never copy a table without a primary key; with --allow-no-pk it copies every copy."""
    state = tmp_path / "state"
    monkeypatch.setenv("CDC_MYSQL_DATABASES", fresh_db)
    mariadb.execute("CREATE TABLE bag (a INT, b TEXT)", database=fresh_db)
    mariadb.execute("INSERT INTO bag VALUES (1, 'x'), (1, 'x'), (NULL, NULL)", database=fresh_db)
    base = ("run", "-h", mariadb.host, "-P", str(mariadb.port), "-u", "root", "--state-dir", str(state), "--json",
            "--stages", "snapshot")
    refused = run(*base)
    assert refused.exit_code == ExitCode.PRECONDITION and "--allow-no-pk" in refused.stderr
    copied = run(*base, "--allow-no-pk")
    assert copied.exit_code == 0, copied.stderr
    first = json.loads(copied.stdout.splitlines()[0])
    assert (first["stage"], first["status"], first["count"]) == ("snapshot", "done", 3)


@pytest.mark.parametrize(("toml", "options", "chain"), [
    ("", {}, ["snapshot", "tail", "spark-merge"]),
    ('[aws]\nbucket = "b"\nstream = "s"\n[snowflake]\nconnection = "c"\n', {}, [
        "snapshot", "tail", "ship-s3", "ship-kinesis", "spark-merge", "snowflake-bootstrap", "snowflake-apply"]),
    ('[aws]\nbucket = "b"\n', {"stages": ("ship,tail",)}, ["tail", "ship-s3"]),  # an alias: configured members
    ("", {"stages": ("ship",)}, ["ship-s3", "ship-kinesis"]),  # none configured: they run and say what is missing
    ('[aws]\nstream = "s"\n', {"skip": ("snapshot", "spark-merge")}, ["tail", "ship-kinesis"]),
    ("", {"snapshot": False}, ["tail", "spark-merge"]),
])
def test_chain_follows_the_configuration(tmp_path: Path, toml: str, options: dict[str, Any], chain: list[str]) -> None:
    from cdc.config import load_settings
    from cdc.pipeline.run import RunOptions, plan_stages

    (tmp_path / "cdc.toml").write_text(toml, encoding="utf-8")
    settings = load_settings(config_path=tmp_path / "cdc.toml", env={})
    assert plan_stages(settings, RunOptions(**options), env={}) == chain


def test_a_signal_stops_until_now_between_stages_incomplete(tmp_path: Path, mariadb: MariaDB, fresh_db: str) -> None:
    import threading

    from cdc.capture import StartRequest
    from cdc.config import load_settings
    from cdc.pipeline.run import RunOptions, run_pipeline

    settings = load_settings({"mysql.host": mariadb.host, "mysql.port": mariadb.port, "mysql.user": "root",
                              "mysql.databases": (fresh_db,), "state_dir": str(tmp_path / "state")}, env={})
    stop, seen = threading.Event(), []

    def signal_after_tail(result: Any) -> None:  # as SIGTERM arriving while tail works
        seen.append((result.stage, result.status))
        stop.set()

    summary = run_pipeline(settings, RunOptions(stages=("tail,spark-merge",), start=StartRequest(from_now=True)),
                           stop=stop, on_stage=signal_after_tail)
    assert seen == [("tail", "nothing new")]  # spark-merge never started
    assert (summary.complete, summary.stopped, summary.cycles) == (False, "stopped by signal", 1)
    assert StateDir(tmp_path / "state").read_checkpoint("tail", 2) is not None
