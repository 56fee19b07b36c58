"""Every file cdc writes holds rows or positions: 0600 in 0700 directories, whatever the umask it was started
with — checkpoints, schema history, snapshot chunks, change-log segments, lake and batch files (#26)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.state import StateDir
from tests.pipeline.run_rig import create_source, more_writes, write_config
from tests.rig import MariaDB

ROOT = Path(__file__).resolve().parents[2]


def _run(config: Path, umask: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cdc", "run", "--config", str(config), "--json", "--until-now"],
                          cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: os.umask(umask))


def _open_modes(root: Path) -> dict[str, str]:
    """Every entry under root (root included) whose mode is not 0700 (directory) / 0600 (file)."""
    found = {}
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        wanted = 0o700 if stat.S_ISDIR(mode) else 0o600
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)) or stat.S_IMODE(mode) != wanted:
            found[str(path.relative_to(root.parent))] = oct(mode)
    return found


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
def test_state_directory_is_private_whatever_the_umask(umask: int, tmp_path: Path, mariadb: MariaDB, fresh_db: str,
                                                       aws_env: dict[str, str], bucket: str,
                                                       snowflake_env: dict[str, str],
                                                       spark_class_archive: Path) -> None:
    create_source(mariadb, fresh_db)
    state = tmp_path / "state"
    config = write_config(tmp_path / "cdc.toml", mariadb, fresh_db, aws_env, bucket, state)
    first = _run(config, umask)  # snapshot (chunks), tail, ship, spark-merge (lake, batches), apply
    assert first.returncode == 0, first.stderr
    more_writes(mariadb, fresh_db)
    second = _run(config, umask)  # tail writes segments of binlog changes, spark-merge merges them into the lake
    assert second.returncode == 0, second.stderr
    stages = {line["stage"]: line["status"] for line in map(json.loads, second.stdout.splitlines())
              if line["event"] == "stage"}
    assert stages["tail"] == "done" and stages["spark-merge"] == "done", stages

    kinds = {p.relative_to(state).parts[0] for p in state.iterdir()}
    assert {"changelog", "schema", "lake", "batches", "locks", "tail.json", "merge.json"} <= kinds, kinds
    assert list((state / "lake").rglob("*.parquet")) and list((state / "batches").rglob("*.parquet"))
    assert list((state / "changelog").iterdir())
    assert _open_modes(state) == {}


def test_an_existing_open_state_directory_is_narrowed_by_the_stage_that_uses_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)  # made by an older cdc under umask 022
    StateDir(state).ensure()  # what snapshot, tail, spark-merge and run do first
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
