"""Hand-made state directories (checkpoints and segments written per docs/formats.md) and a clean environment."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from cdc.changelog import SegmentWriter, encode_line, position_string
from cdc.state import StateDir, write_json_atomic

BINLOG = "mariadb-bin.000003"


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer ~/.my.cnf, cdc.toml or CDC_* variable may leak into a test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for name in [n for n in __import__("os").environ if n.startswith("CDC_") or n == "MYSQL_PWD"]:
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
