"""GTID failover through the whole chain (issue #27): `cdc run --follow` with every stage, `[mysql] hosts` listing a
primary and its read-only replica; the primary is killed (kill -9) mid-workload and the replica promoted.

The run keeps going by itself: its tail moves to the promoted replica by GTIDs, and ship, spark-merge and
snowflake-bootstrap/apply carry on. Once it has caught up, the lake and Snowflake equal SELECT * of the new
primary row for row, and `cdc verify` pointed at it (docs/guide.md#failover, step 4) says OK.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc.source.schema_reads import read_table_schema
from tests.capture.test_tail_rebase import checkpoint, lines_in_order, primary_and_replica
from tests.capture.workload import TABLE, create_all_types_table, expected_rows, prepare_session, run_workload
from tests.pipeline.campaign import ROOT, Writer, cdc_argv
from tests.pipeline.netfaults import cdc_env
from tests.pipeline.run_rig import Background, write_config
from tests.pipeline.test_campaign import assert_lake_equals_source
from tests.rig import MariaDB
from tests.rig._process import wait_until
from tests.snowflake.test_pipeline import _snowflake_rows, _snowflake_value, _typed

DB = "shop"


def failover_config(tmp_path: Path, primary: MariaDB, replica: MariaDB, aws_env: dict[str, str], bucket: str,
                    stream: str) -> Path:
    """cdc.toml for every stage (ship to S3 and Kinesis, Spark, Snowflake) with `hosts` instead of host/port."""
    config = write_config(tmp_path / "cdc.toml", primary, DB, aws_env, bucket, tmp_path / "state")
    text = config.read_text().replace(f'host = "{primary.host}"\nport = {primary.port}\n',
                                      f'hosts = ["{primary.host}:{primary.port}", "{replica.host}:{replica.port}"]\n')
    config.write_text(text.replace("[aws]\n", f'[aws]\nstream = "{stream}"\n'))
    return config


def cycles_done(run: Background) -> int:
    """The last cycle `run --follow` finished (every stage of it)."""
    return max((line["cycle"] for line in list(run.lines) if line.get("event") == "cycle"), default=0)


def wait_for(condition: Callable[[], bool], run: Background, timeout: float, what: str) -> None:
    def done() -> bool:
        if run.process.poll() is not None:
            raise AssertionError(f"run --follow ended ({run.process.returncode}) while waiting for {what}: "
                                 f"{run.finish(10)[1][-3000:]}")
        return condition()
    assert wait_until(done, timeout, interval=0.2), f"{what}: not within {timeout:.0f}s"


def assert_snowflake_equals_source(server: MariaDB, sf: Any) -> int:
    with server.connect() as conn:
        prepare_session(conn)
        encoded = expected_rows(conn, DB, TABLE)
        schema = read_table_schema(conn, DB, TABLE)
    assert schema is not None and encoded
    want = {key: _typed({c.name: _snowflake_value(c, row[c.name]) for c in schema.columns})
            for key, row in encoded.items()}
    assert _snowflake_rows(sf, schema) == want
    return len(want)


def test_run_follow_through_a_kill_9_failover_ends_equal_in_lake_and_snowflake(
        tmp_path: Path, mariadb_factory: Callable[..., MariaDB], aws_env: dict[str, str], bucket: str, stream: str,
        snowflake_env: dict[str, str], sf: Any) -> None:
    primary, replica = primary_and_replica(mariadb_factory, **{"read-only": 1})
    primary.execute(f"CREATE DATABASE {DB}")
    with primary.connect() as conn:
        create_all_types_table(conn, DB)
        run_workload(conn, DB, seed=3, transactions=30)
    config, state = failover_config(tmp_path, primary, replica, aws_env, bucket, stream), tmp_path / "state"
    run = Background(config, "--follow", "--poll-interval", "0.5")
    try:
        with Writer(primary, DB, TABLE, seed=5, pause=0.05) as writer:
            # Every stage has done a cycle (snapshot, Spark started, Snowflake tables made) with the workload on.
            wait_for(lambda: run.has(event="stage", stage="snowflake-apply", status="done"), run, 240,
                     "a first batch in Snowflake")
            wait_for(lambda: sum(line["op"] != "r" for line in lines_in_order(state)) > 200, run, 60,
                     "changes captured")
            # The run frozen, the replica gets everything its tail can have read; the primary dies mid-workload.
            run.process.send_signal(signal.SIGSTOP)
            replica.wait_for_gtids(str(primary.variable("gtid_binlog_pos")))
            primary.kill()
            assert wait_until(lambda: writer.faults > 0, 10, 0.1)  # it was writing when the primary died
        replica.promote()
        run.process.send_signal(signal.SIGCONT)
        with replica.connect() as conn:
            run_workload(conn, DB, seed=9, transactions=40, first_key=50_000)
        wait_for(lambda: checkpoint(state)["gtid_state"] == replica.variable("gtid_binlog_pos"), run, 120,
                 "tail at the new primary's last transaction")
        last = max((line["cycle"] for line in list(run.lines) if "cycle" in line), default=0)
        wait_for(lambda: cycles_done(run) > last, run, 120, "a whole cycle after tail caught up")
        run.process.send_signal(signal.SIGTERM)
        code, err = run.finish(60)
    finally:
        if run.process.poll() is None:  # a failed wait: the run and its Spark JVM must not outlive the test
            for pid in [*run.children(), run.process.pid]:
                os.kill(pid, signal.SIGKILL)
            run.process.wait(30)
    assert code == 0, err[-3000:]
    text = " ".join(err.split())
    assert f"tail moves from {primary.host}:{primary.port} to {replica.host}:{replica.port}" in text \
        or f"rebased onto {replica.host}:{replica.port}" in text, text[-3000:]
    lines = lines_in_order(state)
    assert {line["src"]["server_id"] for line in lines if line["op"] != "r"} == {1, 2}

    rows = assert_lake_equals_source({"server": replica, "db": DB, "state": state})
    assert assert_snowflake_equals_source(replica, sf) == rows
    verified = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, env=cdc_env(replica), capture_output=True,
                              text=True, timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr[-3000:]
    report = json.loads(verified.stdout)
    assert {(t["target"], t["status"], t["source_rows"], t["target_rows"]) for t in report["tables"]} == {
        ("lake", "OK", rows, rows), ("snowflake", "OK", rows, rows)}
