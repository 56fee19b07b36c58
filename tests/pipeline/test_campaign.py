"""Fault campaign, end to end through the real CLI: kill -9 of every stage at random moments while a
randomized workload writes and the server is rotated, restarted, frozen and has its replication
connection killed; afterwards `cdc run --until-now` and `cdc verify` must find every table equal.

CI runs the short campaign; the full one (>= 50 kills) is marked slow and run by hand:

    bash scripts/test.sh -m slow tests/pipeline/test_campaign.py -s

It prints its figures (kills per stage, faults, rows compared, differences), which docs/fault-campaign.md records.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cdc.source.schema_reads import read_table_schema
from cdc.spark import read_lake_table
from tests.capture.workload import create_all_types_table, expected_rows, prepare_session, run_workload
from tests.pipeline.campaign import FAULTS, ROOT, Tally, Writer, cdc_argv, run_and_kill, server_fault
from tests.pipeline.run_rig import cdc_run, write_config
from tests.spark.workload import lake_value

TABLE = "all_types"
# (command, earliest and latest kill): a `cdc` process needs a second or two to import and connect before it
# works, and a stage that starts Spark needs several more; the windows reach past a typical run so that some
# runs finish and the kills land in every phase of the others.
STAGES: list[tuple[tuple[str, ...], float, float]] = [
    (("run", "--until-now"), 3.0, 45.0),
    (("tail", "--follow", "--read-timeout", "3"), 1.5, 8.0),
    (("tail", "--until-now"), 1.0, 6.0),
    (("ship", "--to", "s3"), 1.0, 6.0),
    (("ship", "--to", "kinesis"), 1.0, 6.0),
    (("spark-merge",), 4.0, 35.0),
    (("snowflake-apply", "--until-now"), 1.5, 12.0),
]


@pytest.fixture
def campaign_setup(tmp_path: Path, mariadb_factory: Any, aws_env: dict[str, str], bucket: str,  # noqa: F811
                   stream: str, snowflake_env: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    server = mariadb_factory()
    db = "campaign"
    server.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    with server.connect(autocommit=False) as conn:
        create_all_types_table(conn, db)
        run_workload(conn, db, seed=3, transactions=30)  # a table with history before the snapshot
    config = write_config(tmp_path / "cdc.toml", server, db, aws_env, bucket, tmp_path / "state")
    config.write_text(config.read_text().replace("[aws]\n", f'[aws]\nstream = "{stream}"\n'))
    # Runbook steps 4 and 5 before replication starts: standalone stages refuse to run without them (apply
    # without bootstrapped tables, tail without a start). Kills during a snapshot: tests/snapshot/.
    for step in (("snowflake-bootstrap", "--from-mysql"), ("snapshot",)):
        done = subprocess.run(cdc_argv(config, *step), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    return {"server": server, "db": db, "config": config, "state": tmp_path / "state"}


def run_campaign(setup: dict[str, Any], kills: int, seed: int, every_fault: bool = False,
                 latest_kill: float = 60.0) -> Tally:
    """Kill `kills` stage runs; after a kill, a server fault 3 times in 10 (`every_fault`: first each kind once).

    `latest_kill` caps every stage's kill window (the CI campaign keeps its time down with it)."""
    server, config = setup["server"], setup["config"]
    rng, tally = random.Random(seed), Tally()
    forced = list(FAULTS) if every_fault else []
    with Writer(server, setup["db"], TABLE, seed=seed) as writer:
        while tally.total_kills < kills:
            args, earliest, latest = rng.choice(STAGES)
            run_and_kill(config, args, rng.uniform(earliest, min(latest, latest_kill)), tally)
            if forced or rng.random() < 0.3:
                server_fault(server, rng, tally, forced.pop() if forced else None)
    tally.writes = {"commits": writer.commits, "rollbacks": writer.rollbacks, "connection faults": writer.faults}
    return tally


def finish_and_verify(setup: dict[str, Any]) -> int:
    """`cdc run --until-now`, then the test's own comparison of the lake and `cdc verify`; rows compared."""
    code, _, err = cdc_run(setup["config"], "--until-now", timeout=600)
    assert code == 0, err
    compared = assert_lake_equals_source(setup)
    verified = _verify(setup["config"])
    assert verified["returncode"] == 0, verified
    report = json.loads(verified["stdout"])
    checked = {(t["table"], t["target"]): (t["status"], t["source_rows"], t["target_rows"]) for t in report["tables"]}
    table = f"{setup['db']}.{TABLE}"
    assert checked == {(table, "lake"): ("OK", compared, compared), (table, "snowflake"): ("OK", compared, compared)}
    return compared


def assert_lake_equals_source(setup: dict[str, Any]) -> int:
    server, db = setup["server"], setup["db"]
    with server.connect() as conn:
        prepare_session(conn)
        columns = {c.name: c for c in read_table_schema(conn, db, TABLE).columns}
        source = expected_rows(conn, db, TABLE)
    lake = read_lake_table(setup["state"] / "lake", db, TABLE)
    assert lake is not None, "spark-merge never wrote the lake table"
    got = {key: {n: row[n] for n in columns} for key, row in lake.by_key().items()}
    want = {tuple(lake_value(columns["id"], v) for v in key):
            {n: lake_value(columns[n], v) for n, v in row.items()} for key, row in source.items()}
    assert sorted(got) == sorted(want), "the lake's keys differ from the source's"
    differing = [key for key in want if got[key] != want[key]]
    assert not differing, f"{len(differing)} row(s) differ, e.g. {differing[:3]}"
    return len(want)


def _verify(config: Path) -> dict[str, Any]:
    done = subprocess.run(cdc_argv(config, "verify", "--json"), cwd=ROOT, capture_output=True, text=True, timeout=600)
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-2000:]}


def test_short_campaign_leaves_every_table_equal(campaign_setup: dict[str, Any]) -> None:
    tally = run_campaign(campaign_setup, kills=5, seed=11, every_fault=True, latest_kill=12.0)
    compared = finish_and_verify(campaign_setup)
    assert tally.total_kills == 5 and compared > 0
    assert set(tally.faults) == set(FAULTS)


@pytest.mark.slow
def test_full_campaign_leaves_every_table_equal(campaign_setup: dict[str, Any]) -> None:
    started = time.monotonic()
    tally = run_campaign(campaign_setup, kills=50, seed=2026)
    compared = finish_and_verify(campaign_setup)
    print("\ncampaign:", json.dumps({"kills": tally.kills, "total_kills": tally.total_kills,
                                     "stage_runs_finished": tally.finished, "server_faults": tally.faults,
                                     "workload": tally.writes,
                                     "rows_compared": compared, "differences": 0,
                                     "minutes": round((time.monotonic() - started) / 60, 1)}))
    assert tally.total_kills >= 50
