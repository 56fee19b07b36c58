"""Network faults between cdc and its servers (issue #27): a FaultProxy (tests/rig/faultproxy.py) drops, stalls,
half-closes and resets connections at random moments while a workload writes; the real CLI must notice a dead
link within its read timeout, reconnect, and end with targets equal to the source, nothing doubled or lost.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc import sinks
from tests.capture.conftest import changelog_lines
from tests.capture.workload import TABLE, create_all_types_table, expected_rows, replay, run_workload
from tests.pipeline.campaign import Writer
from tests.pipeline.netfaults import cdc_env, reconnect_delays, spawn_cdc, stop, wait_for_tail
from tests.rig import MotoServer
from tests.rig.faultproxy import Chaos, FaultProxy
from tests.sinks.changes import lines_of, make_changes, read_s3_lines, write_changelog

READ_TIMEOUT = 2.0
# A dead binlog stream is noticed after READ_TIMEOUT seconds of silence (no event, no heartbeat), or twice that
# when tail was just then waiting on a lag or schema query (bounded by READ_TIMEOUT too); the first reconnect
# follows within half a second (backoff), so the proxy sees a new connection within this bound.
DETECTION_BOUND = 2 * READ_TIMEOUT + 1.5


def test_tail_follow_through_a_faulty_network_replays_to_select_star(mariadb_factory: Any, tmp_path: Path) -> None:
    server = mariadb_factory()
    db = "netfaults"
    server.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    file, pos = server.binlog_position()
    with server.connect(autocommit=False) as conn:
        create_all_types_table(conn, db)
        run_workload(conn, db, seed=1, transactions=20)
    state = tmp_path / "state"
    with FaultProxy(server.host, server.port) as proxy:
        tail = spawn_cdc(cdc_env(proxy), "tail", "--follow", "--json", "--read-timeout", str(READ_TIMEOUT),
                         "--reconnect-timeout", "120", "--start-position", f"{file}:{pos}", "--databases", db,
                         "--state-dir", str(state))
        try:
            # Faults once tail follows (a first checkpoint); faults while it starts: the test after this one.
            assert wait_for_tail(state, server, timeout=60) is not None, "tail did not start"
            with Writer(server, db, TABLE, seed=27), \
                    Chaos(proxy, random.Random(27), calm_seconds=(1.5, 4.0), drop_seconds=2 * READ_TIMEOUT) as chaos:
                time.sleep(30)
            caught_up = wait_for_tail(state, server, timeout=60)
        finally:
            out, err = stop(tail)
    assert caught_up is not None, f"tail did not catch up within 60s of the network healing: {err[-5000:]}"
    assert tail.returncode == 0, err[-3000:]
    summary = json.loads(out.splitlines()[-1])
    lines = changelog_lines(state)
    positions = [line["position"] for line in lines]
    assert positions == sorted(set(positions)), "a change was written twice or out of order"
    with server.connect() as conn:
        assert replay(lines, db, TABLE) == expected_rows(conn, db, TABLE)
    assert set(chaos.counts()) == {"drop", "stall", "half-close", "reset"}, chaos.log
    assert summary["reconnects"] >= chaos.counts()["reset"], (summary, chaos.log)
    delays = reconnect_delays(chaos.log, proxy.accepted)
    print(f"\ntail: faults {chaos.counts()}, reconnects {summary['reconnects']}, drop noticed and reconnected after "
          f"{[round(d, 1) for d in delays]} s, {len(lines)} lines, {summary['transactions']} transactions")
    assert max(delays) <= DETECTION_BOUND, (delays, chaos.log)


# The next connections tail opens, each reset once the server sent it this many bytes: in the handshake, in the
# first queries of the start-up (server facts, the start position's GTID state), and further on in it.
STARTUP_RESETS = [0, 200, 700, 2500, 8000]


# tail --follow retries its start-up itself; run --follow retries the cycle whose tail --until-now failed (exit 10).
STARTS = {"tail": (("tail", "--follow", "--read-timeout", str(READ_TIMEOUT)), "retrying tail's start-up"),
          "run": (("run", "--follow", "--stages", "tail"), "retrying the cycle")}


@pytest.mark.parametrize("command", sorted(STARTS))
def test_follow_comes_up_through_resets_during_its_start_up(mariadb_factory: Any, tmp_path: Path,
                                                            command: str) -> None:
    """A link lost while tail starts (facts, start position, schemas) is retried like a lost stream."""
    argv, retried = STARTS[command]
    server = mariadb_factory()
    db = "netstart"
    server.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    file, pos = server.binlog_position()
    with server.connect(autocommit=False) as conn:
        create_all_types_table(conn, db)
        run_workload(conn, db, seed=2, transactions=10)
    state = tmp_path / "state"
    with FaultProxy(server.host, server.port) as proxy:
        proxy.reset_next(STARTUP_RESETS)
        tail = spawn_cdc(cdc_env(proxy, CDC_MYSQL_DATABASES=db), *argv, "--json", "--start-position",
                         f"{file}:{pos}", "--state-dir", str(state))
        try:
            started = wait_for_tail(state, server, timeout=90)
            if started is not None:  # then changes made while it streams
                with server.connect(autocommit=False) as conn:
                    run_workload(conn, db, seed=3, transactions=10, first_key=10_000)
            caught_up = started is not None and wait_for_tail(state, server, timeout=60) is not None
        finally:
            out, err = stop(tail)
    assert tail.returncode == 0, err[-3000:]
    assert caught_up, err[-3000:]
    assert len(proxy.accepted) > len(STARTUP_RESETS), (proxy.accepted, err[-3000:])
    retries = [line for line in err.splitlines() if retried in line]
    assert len(retries) >= 2, err[-3000:]
    lines = changelog_lines(state)
    positions = [line["position"] for line in lines]
    assert positions == sorted(set(positions)), "a change was written twice or out of order"
    with server.connect() as conn:
        assert replay(lines, db, TABLE) == expected_rows(conn, db, TABLE)


# CI ships through the faulty link to S3; Kinesis too with -m slow (63 s on a slow 2-core machine).
@pytest.mark.parametrize("kind", ["s3", pytest.param("kinesis", marks=pytest.mark.slow)])
def test_ship_through_a_faulty_link_delivers_every_record(aws_env: dict[str, str], moto_server: MotoServer,
                                                          stream: str, kinesis: Any, s3: Any, bucket: str,
                                                          tmp_path: Path, kind: str) -> None:
    """ship reruns (exit 10 after botocore's retries) until done: S3 ends with every line exactly once (a retried
    PUT rewrites the same key), Kinesis with every record at least once and exactly once per position."""
    state = tmp_path / "state"
    # Enough input that every fault kind strikes while ship works: 6,000 changes shipped in under 2 s here, before
    # the stall and the drop came. Kinesis ships slower under faults (40,000 changes met ~60 faults in 80-140 s,
    # the suite's longest test), so half of that still meets each kind many times.
    changes = make_changes(40_000 if kind == "s3" else 20_000, big_every=300 if kind == "s3" else 0, big_size=20_000)
    write_changelog(state / "changelog", changes, per_segment=100)
    host, port = moto_server.endpoint_url.removeprefix("http://").split(":")
    codes = []
    with FaultProxy(host, int(port)) as proxy:
        target = ["--to", "kinesis", "--stream", stream] if kind == "kinesis" else [
            "--to", f"s3://{bucket}/faulty", "--roll-size", "1"]
        argv = ["ship", *target, "--state-dir", str(state), "--endpoint-url", proxy.url]
        with Chaos(proxy, random.Random(kind), calm_seconds=(0.1, 0.5), stall_seconds=(0.5, 3.0),
                   drop_seconds=2.0) as chaos:
            while not codes or codes[-1] != 0:
                assert len(codes) < 30, f"ship did not finish in 30 runs: exit codes {codes}"
                ship = spawn_cdc(dict(os.environ), *argv)
                out, err = ship.communicate(timeout=600)
                assert ship.returncode in (0, 10), err[-3000:]
                codes.append(ship.returncode)
    print(f"\nship {kind}: exit codes {codes}, faults {chaos.counts()}")
    assert len(chaos.log) >= 4, chaos.log
    expected = lines_of(changes)
    if kind == "s3":
        assert read_s3_lines(s3, bucket, "faulty/")[0] == expected  # nothing missing, nothing doubled
        return
    received = list(sinks.read_stream(kinesis, stream))
    assert set(received) == set(expected)  # nothing missing, nothing foreign
    by_position = {orjson.loads(data)["position"]: data for data in received}  # the consumer's dedup
    assert Counter(by_position.values()) == expected
