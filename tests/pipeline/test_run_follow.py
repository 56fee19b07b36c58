"""`cdc run --follow` keeps tail running beside the later stages (issue #25): real MariaDB, moto, Spark, fakesnow.

A commit made while a cycle's spark-merge runs must be sealed before that merge ends, not wait for the next
cycle's start; and the run still ends exact.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cdc.changelog import list_segments
from cdc.errors import ExitCode
from tests.pipeline.campaign import ROOT, cdc_argv
from tests.pipeline.run_rig import (
    TABLES,
    Background,
    assert_replicated,
    create_source,
    insert_customer,
    source_rows,
    target_rows,
    write_config,
)
from tests.rig import MariaDB
from tests.rig._process import wait_until


@pytest.fixture
def setup(tmp_path: Path, mariadb: MariaDB, fresh_db: str, aws_env: dict[str, str], bucket: str,
          snowflake_env: dict[str, str]) -> dict[str, Any]:
    create_source(mariadb, fresh_db)
    state = tmp_path / "state"
    config = write_config(tmp_path / "cdc.toml", mariadb, fresh_db, aws_env, bucket, state)
    return {"config": config, "state": state, "db": fresh_db}


class _Watch:
    """When each sealed segment and each `--json` line of the run was first seen (time.monotonic(), every 10 ms)."""

    def __init__(self, running: Background, changelog: Path) -> None:
        self.running, self.changelog = running, changelog
        self.segments: dict[str, float] = {}
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.stop.wait(0.01):
            now = time.monotonic()
            for line in self.running.lines[len(self.lines):]:
                self.lines.append((now, line))
            for path in list_segments(self.changelog) if self.changelog.is_dir() else []:
                self.segments.setdefault(path.name, now)

    def merges(self, after: float) -> list[tuple[float, float]]:
        """(start, end) of every spark-merge that merged something and started after `after`."""
        return [(seen - line["seconds"], seen) for seen, line in self.lines
                if line.get("stage") == "spark-merge" and line["status"] == "done" and seen - line["seconds"] > after]


def _write(mariadb: MariaDB, db: str, stop: threading.Event) -> None:
    key = 1000
    while not stop.wait(0.1):  # ten commits a second: segments to seal whatever stage runs
        insert_customer(mariadb, db, key)
        key += 1


def test_rows_committed_during_a_merge_are_sealed_before_it_ends(
        setup: dict[str, Any], mariadb: MariaDB, sf: Any) -> None:
    running = Background(setup["config"], "--follow", "--poll-interval", "0.5")
    writing = threading.Event()
    writer = threading.Thread(target=_write, args=(mariadb, setup["db"], writing), daemon=True)
    watch = _Watch(running, setup["state"] / "changelog")
    try:
        assert wait_until(lambda: running.has(stage="snowflake-apply", status="done"), timeout=180), running.lines
        began = time.monotonic()
        writer.start()
        assert wait_until(lambda: len(watch.merges(began)) >= 3, timeout=240), running.lines
        writing.set()
        writer.join()
        # The thread holds tail's lock for the whole run: a standalone tail on the state directory is refused.
        standalone = subprocess.run(cdc_argv(setup["config"], "tail", "--until-now"), cwd=ROOT, capture_output=True,
                                    text=True, timeout=120)
        assert standalone.returncode == ExitCode.LOCKED, standalone.stderr
        expected = {table: source_rows(mariadb, setup["db"], table) for table in TABLES}
        assert wait_until(lambda: {t: target_rows(sf, t) for t in TABLES} == expected, timeout=240, interval=0.5)
        running.process.send_signal(signal.SIGTERM)
        code, err = running.finish(timeout=120)
    finally:
        writing.set()
        watch.stop.set()
        if running.process.poll() is None:
            running.process.kill()
    assert code == 0, err
    merges = watch.merges(began)
    # The cycle loop sealed segments only in its tail stage, before ship and merge: never while a merge ran.
    sealed_meanwhile = [name for name, seen in watch.segments.items() if any(s < seen < e for s, e in merges)]
    assert sealed_meanwhile, (merges, watch.segments)
    assert_replicated(mariadb, setup["db"], sf)
    verified = subprocess.run(cdc_argv(setup["config"], "verify", "--json"), cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    checked = {(t["table"].split(".")[-1], t["target"]): t["status"] for t in json.loads(verified.stdout)["tables"]}
    assert checked == {(t, target): "OK" for t in TABLES for target in ("lake", "snowflake")}
    # Every row tail captured is in one tail line, per cycle and the last one at the end; the summary adds them up.
    summary = running.lines[-1]
    tail_lines = [line for line in running.lines if line.get("stage") == "tail"]
    assert summary["event"] == "summary" and summary["stopped"] == "stopped by signal"
    assert sum(line["count"] for line in tail_lines) == summary["totals"]["tail"] > 0
    assert tail_lines[-1]["status"] == "stopped" and tail_lines[-1]["cycle"] == summary["cycles"]
    # From the second cycle on, ship runs beside the merge; its line is reported once the merge is done.
    ship_and_merge = [line for line in running.lines if line.get("stage") in ("ship-s3", "spark-merge")]
    later = sorted({line["cycle"] for line in ship_and_merge if line["cycle"] > 1})
    assert later and [line["stage"] for line in ship_and_merge if line["cycle"] > 1] == \
        ["spark-merge", "ship-s3"] * len(later), [(x["cycle"], x["stage"], x["status"]) for x in ship_and_merge]
