"""The state directory: atomic checkpoints, the per-stage lock, corrupt files, the server identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cdc.errors import ExitCode, LockedError, PositionError
from cdc.state import ServerIdentity, StateDir, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
# Holds a stage's lock until its stdin closes; prints "held" once it has it.
HOLDER = (
    "import sys\nfrom cdc.state import StateDir\n"
    "with StateDir(sys.argv[1]).lock(sys.argv[2]):\n    print('held', flush=True)\n    sys.stdin.read()\n"
)


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = StateDir(tmp_path / "s")
    state.write_checkpoint("tail", {"version": 1, "file": "b.000001", "pos": 4})
    path = state.checkpoint_path("tail")
    assert json.loads(path.read_text()) == {"file": "b.000001", "pos": 4, "version": 1}
    assert [p.name for p in path.parent.iterdir()] == ["tail.json"]

    def crash(src: str, dst: str) -> None:  # the rename never happens, as in a crash just before it
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        state.write_checkpoint("tail", {"version": 1, "file": "b.000002", "pos": 4})
    assert json.loads(path.read_text())["file"] == "b.000001"
    assert [p.name for p in path.parent.iterdir()] == ["tail.json"]


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """Another process holding the ship-s3 lock of a state directory."""
    root = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), "ship-s3"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield root, proc.pid
    finally:
        proc.communicate(timeout=10)  # closes stdin: the holder releases and exits


def ship_args(root: Path) -> list[str]:
    return ["ship", "--to", "s3", "--bucket", "b", "--region", "us-east-1",
            "--endpoint-url", "http://127.0.0.1:9", "--state-dir", str(root)]


AWS_DUMMY = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_PROFILE": None}  # None: unset in the run


def test_second_holder_gets_locked_error(lock_holder: tuple[Path, int]) -> None:
    root, pid = lock_holder
    with pytest.raises(LockedError) as caught:
        with StateDir(root).lock("ship-s3"):
            pass
    assert caught.value.message == f"another `cdc ship-s3` is running on state directory {root} (pid {pid})"
    with StateDir(root).lock("tail"):  # other stages are not blocked
        pass


def test_locked_stage_exits_6_through_the_cli(lock_holder: tuple[Path, int], monkeypatch: pytest.MonkeyPatch) -> None:
    from cdc.commands.main import app

    root, pid = lock_holder
    monkeypatch.chdir(root.parent)
    result = CliRunner().invoke(app, ship_args(root), env={**AWS_DUMMY, "HOME": str(root.parent)})
    assert result.exit_code == ExitCode.LOCKED, result.output
    assert f"(pid {pid})" in result.stderr


def test_corrupt_checkpoint_names_the_file_and_exits_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cdc.commands.main import app

    state = StateDir(tmp_path / "state").ensure()
    path = state.checkpoint_path("ship-s3")
    path.write_text('{"version": 1, "last_seg')
    with pytest.raises(PositionError) as caught:
        state.read_checkpoint("ship-s3", 1)
    assert caught.value.message.startswith(f"checkpoint {path} is corrupt")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ship_args(state.root), env={**AWS_DUMMY, "HOME": str(tmp_path)})
    assert result.exit_code == ExitCode.POSITION, result.output
    assert f"checkpoint {path} is corrupt" in " ".join(result.stderr.split())


def test_checkpoint_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.write_checkpoint("tail", {"version": 9})
    with pytest.raises(PositionError, match="has version 9; this cdc understands up to 1"):
        state.read_checkpoint("tail", 1)


def test_server_identity_refuses_another_server(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    first = ServerIdentity("uuid-a", 1, "mariadb", "10.11.19")
    other = ServerIdentity("uuid-b", 1, "mariadb", "10.11.19")
    state.bind_server(first)
    state.bind_server(first)
    with pytest.raises(PositionError) as caught:
        state.bind_server(other)
    assert caught.value.message == (f"state directory {tmp_path} belongs to server {first.describe()}, "
                                    f"but this connection reached {other.describe()}")
    assert caught.value.exit_code == ExitCode.POSITION
    assert state.read_server() == first
    state.bind_server(other, rebase=True)
    assert state.read_server() == other


def test_corrupt_server_record_is_a_position_error(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "server.json", {"version": 1, "server_uuid": "x"})
    with pytest.raises(PositionError, match="server.json is corrupt"):
        StateDir(tmp_path).read_server()
