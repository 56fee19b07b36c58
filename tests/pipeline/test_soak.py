"""Soak (issue #27): `cdc run --follow` under a steady workload, every link to a server through a FaultProxy
with faults at random moments, and kill -9 of the run (then a restart) at intervals. RSS, open fds, threads and
the state directory's size per MiB of change log are sampled from /proc and must stay bounded; at the end
the lake and Snowflake must equal SELECT * and `cdc verify` must report OK.

CI runs a short soak (SOAK_SECONDS, default 90); the long one (SOAK_LONG_SECONDS, default 1800) by hand:

    SOAK_LONG_SECONDS=1800 bash scripts/test.sh -n 0 -m slow tests/pipeline/test_soak.py -s
    .venv/bin/python benchmarks/bench_soak.py --minutes 30      # the same, with its table of samples
    .venv/bin/python benchmarks/bench_soak.py --minutes 16 --kill-every 0   # one run left alone: its own growth

It prints the samples as a table and a JSON line of figures, which docs/fault-campaign.md records.
"""

from __future__ import annotations

import json
import os
import random
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from cdc.changelog import pruned_through
from cdc.snowflake.folded import read_folded
from cdc.state import StateDir
from tests.pipeline.campaign import Writer
from tests.pipeline.soak import Supervisor, assert_bounded, soak, table
from tests.pipeline.test_campaign import TABLE, campaign_setup, finish_and_verify  # noqa: F401  (a fixture)
from tests.rig.faultproxy import Chaos, FaultProxy

SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "90"))
SOAK_LONG_SECONDS = float(os.environ.get("SOAK_LONG_SECONDS", "1800"))
# The long soak's kill -9 interval; 0: none, one `cdc run --follow` for the whole soak (its own growth measured).
SOAK_KILL_EVERY = float(os.environ.get("SOAK_KILL_EVERY", "300"))
# The links faults strike (every proxy stays in place): mysql, aws, snowflake.
SOAK_FAULTY_LINKS = tuple(os.environ.get("SOAK_FAULTY_LINKS", "mysql,aws,snowflake").split(","))


def _proxied(setup: dict[str, Any], tmp_path: Path, stack: ExitStack) -> tuple[dict[str, FaultProxy], dict[str, str]]:
    """Proxies in front of MariaDB, moto and fakesnow; cdc.toml and a connections.toml pointed through them."""
    server, config = setup["server"], setup["config"]
    text = config.read_text()
    endpoint = re.search(r'endpoint_url = "http://([^:"]+):(\d+)"', text)
    assert endpoint, text
    home = Path(os.environ["SNOWFLAKE_HOME"])
    connections = (home / "connections.toml").read_text()
    snow_host = re.search(r'host = "([^"]+)"', connections)
    snow_port = re.search(r"port = (\d+)", connections)
    assert snow_host and snow_port, connections
    proxies = {
        "mysql": stack.enter_context(FaultProxy(server.host, server.port)),
        "aws": stack.enter_context(FaultProxy(endpoint[1], int(endpoint[2]))),
        "snowflake": stack.enter_context(FaultProxy(snow_host[1], int(snow_port[1]))),
    }
    text = text.replace(f"port = {server.port}", f"port = {proxies['mysql'].port}")
    config.write_text(text.replace(endpoint[0], f'endpoint_url = "{proxies["aws"].url}"'))
    proxied_home = tmp_path / "snowflake-home"
    proxied_home.mkdir(mode=0o700)
    (proxied_home / "connections.toml").write_text(
        connections.replace(snow_host[0], f'host = "{proxies["snowflake"].host}"')
        .replace(snow_port[0], f"port = {proxies['snowflake'].port}"))
    (proxied_home / "connections.toml").chmod(0o600)
    env = dict(os.environ) | {"SNOWFLAKE_HOME": str(proxied_home)}
    os.environ["SNOWFLAKE_HOME"] = str(proxied_home)  # for the final run and verify of finish_and_verify
    return proxies, env


def run_soak(setup: dict[str, Any], tmp_path: Path, seconds: float, *, sample_every: float, kill_every: float,
             calm: tuple[float, float], seed: int, keep: str | None = None) -> dict[str, Any]:
    """The soak, then the final run and verify: its figures (the samples' table printed). keep: the runs prune the
    change log and the applied batches by it (`[changelog] keep`); the state is then not judged per MiB of change
    log, which pruning shrinks."""
    rng = random.Random(seed)
    if keep is not None:
        config = setup["config"]
        config.write_text(config.read_text() + f'\n[changelog]\nkeep = "{keep}"\n')
    with ExitStack() as stack:
        proxies, env = _proxied(setup, tmp_path, stack)
        supervisor = Supervisor(setup["config"], env, setup["state"], tmp_path / "runs.log")
        chaos = {name: Chaos(proxy, random.Random(rng.random()), calm_seconds=calm, drop_seconds=3.0,
                             stall_seconds=(1.0, 5.0)) for name, proxy in proxies.items() if name in SOAK_FAULTY_LINKS}
        with Writer(setup["server"], setup["db"], TABLE, seed=seed, pause=0.1) as writer:
            with ExitStack() as faults:
                for one in chaos.values():
                    faults.enter_context(one)
                soak(supervisor, seconds, sample_every=sample_every, kill_every=kill_every)
            stopped = supervisor.stop()
        compared = finish_and_verify(setup)
    print("\n" + table(supervisor.samples))
    figures = {"seconds": seconds, "kills": supervisor.kills, "runs_ended_by_themselves": supervisor.exits,
               "last_run_exit": stopped, "network_faults": {name: one.counts() for name, one in chaos.items()},
               "workload": {"commits": writer.commits, "rollbacks": writer.rollbacks},
               "rows_compared": compared, "differences": 0, "samples": len(supervisor.samples)}
    print("soak:", json.dumps(figures))
    assert_bounded(supervisor.samples, per_changelog_mib=keep is None)
    assert stopped == 0, (tmp_path / "runs.log").read_text()[-5000:]
    # A run --follow never gives up on a fault of the network: it retries (exit 10 only after 5 minutes of it).
    assert supervisor.exits == [], (tmp_path / "runs.log").read_text()[-5000:]
    return figures


# 123 s on a slow 2-core machine: with the fault campaign (-m slow); CI keeps the short campaign.
@pytest.mark.slow
def test_short_soak_stays_bounded_and_exact(campaign_setup: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    # One kill half-way: a cycle with Spark's start-up takes 30-40 s on a busy 2-core machine.
    figures = run_soak(campaign_setup, tmp_path, SOAK_SECONDS, sample_every=3.0, kill_every=SOAK_SECONDS / 2,
                       calm=(8.0, 15.0), seed=27)
    assert figures["kills"] >= 1 and figures["rows_compared"] > 0


@pytest.mark.slow
def test_short_soak_pruning_as_it_goes_stays_exact(campaign_setup: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    """The runs prune what every reader has passed (keep 0s: a prune every 10 s) while faults strike and the run is
    killed: the lake, Snowflake and `cdc verify` still agree with the source, and the log was pruned."""
    figures = run_soak(campaign_setup, tmp_path, SOAK_SECONDS, sample_every=3.0, kill_every=SOAK_SECONDS / 2,
                       calm=(8.0, 15.0), seed=29, keep="0s")
    state = StateDir(campaign_setup["state"])
    assert figures["kills"] >= 1 and figures["rows_compared"] > 0
    assert pruned_through(state.changelog) is not None and state.batches_pruned()[1] is not None
    assert read_folded(state).through is not None  # the applied batches' folders went too


@pytest.mark.slow
def test_long_soak_stays_bounded_and_exact(campaign_setup: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    figures = run_soak(campaign_setup, tmp_path, SOAK_LONG_SECONDS, sample_every=20.0, kill_every=SOAK_KILL_EVERY,
                       calm=(20.0, 60.0), seed=2027)
    assert figures["kills"] >= (SOAK_LONG_SECONDS // SOAK_KILL_EVERY - 1 if SOAK_KILL_EVERY > 0 else 0)
