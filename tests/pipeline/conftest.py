"""Hand-made state directories (checkpoints and segments written per docs/formats.md) and a clean environment."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from cdc.changelog import SegmentWriter, encode_line, position_string
from cdc.state import StateDir, write_json_atomic

BINLOG = "mariadb-bin.000003"
# The cache of the user running the suite, read before any test moves HOME: see clean_env.
SHARED_CACHE = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """No developer ~/.my.cnf, cdc.toml or CDC_* variable may leak into a test.

    The cache stays shared: Spark's class archive there (cdc/spark/session.py) is no setting, only start-up
    speed, and with a HOME of its own every test's JVMs started without it. A test against a server (one that
    may start `cdc run`) finds the archive there (spark_class_archive records it if missing); the fast lane
    starts no JVM for it.
    """
    if request.node.get_closest_marker("mariadb"):
        request.getfixturevalue("spark_class_archive")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", SHARED_CACHE)
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("CDC_") or n == "MYSQL_PWD"]:
        monkeypatch.delenv(name)


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state").ensure()


def change(pos: int, row: int = 0, *, ts: str = "2026-11-22T07:00:01Z", gtid: str | None = None,
           file: str = BINLOG, op: str = "c") -> dict[str, Any]:
    return {"after": {"id": row}, "before": None, "db": "shop", "key": {"id": row}, "op": op,
            "position": position_string(file, pos, row, snapshot=op == "r"),
            "src": {"file": file, "gtid": gtid, "pos": pos, "row": row, "server_id": 1, "xid": None},
            "table": "t", "ts": ts, "v": 1}


def write_segments(state: StateDir, groups: Iterable[list[dict[str, Any]]]) -> list[Path]:
    """One sealed segment per group of changes."""
    writer = SegmentWriter(state.changelog, "test")
    sealed = []
    for group in groups:
        for line in group:
            writer.write(line["position"], encode_line(line))
        path = writer.seal()
        assert path is not None
        sealed.append(path)
    return sealed


def checkpoint(state: StateDir, stem: str, **fields: Any) -> None:
    state.write_checkpoint(stem, {"version": 1, **fields})


def sealed_batch(state: StateDir, batch: str, segments: tuple[str, str]) -> None:
    write_json_atomic(state.root / "batches" / batch / "manifest.json",
                      {"version": 1, "batch_id": batch, "segments": list(segments), "tables": {}})
