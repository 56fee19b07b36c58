"""Golden files pin every stage's checkpoint, byte for byte: tests/checkpoints/golden/<file>.v<version>.json.

For each stage: the golden file of its current version reads as the expected dataclass, and that dataclass
writes exactly the golden bytes (mode 0600, like every checkpoint); golden files of older versions read
through their migration. A change of shape must bump the version, keep a migration from the old one and
add a golden file for the new. (tests/checkpoints/test_stage_runs.py runs the real stages against them.)
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from cdc.checkpoints import (
    PIPELINE,
    STAGE_CHECKPOINTS,
    ApplyCheckpoint,
    Checkpoint,
    CheckpointView,
    Handover,
    MergeCheckpoint,
    ResnapshotCheckpoint,
    ResnapshotTable,
    ShipKinesisCheckpoint,
    ShipS3Checkpoint,
    SnapshotCheckpoint,
    SnapshotStatus,
    TableState,
    TailCheckpoint,
)
from cdc.errors import PositionError
from cdc.state import StateDir

GOLDEN = Path(__file__).parent / "golden"
SEGMENT = "seg-0000000007-000000001234-b000000000000.jsonl"

# The golden file of each stage's current version and the dataclass it holds.
CURRENT: dict[str, Checkpoint] = {
    "snapshot.v1.json": SnapshotCheckpoint(
        "done", Handover("mariadb-bin.000003", 1234, "0-1-57"),
        {"shop.orders": TableState("shop", "orders", True, [3, "x"], 3, 2)}, 3, "2026-11-22T07:00:01Z", 1, "mariadb",
        0.004, 1),
    "tail.v2.json": TailCheckpoint(
        "mariadb-bin.000002", 2211, "0-2-4300", "seg-0000000008-000000000321-b000000000000.jsonl",
        "mariadb-fedcba9876543210fedcba9876543210", "0-2-4300,1-1-17", 6, ("1-1-18",)),
    "ship-kinesis.v1.json": ShipKinesisCheckpoint("kinesis:orders", SEGMENT, 12, 4200),
    "ship-s3.v2.json": ShipS3Checkpoint(
        "s3://lake/cdc", SEGMENT, 12, 3, 4200,
        {"compression": "gzip", "first": "seg-0000000007-000000005678-b000000000000.jsonl",
         "last": "seg-0000000007-000000009012-b000000000000.jsonl", "roll_size": 128 * 2**20}),
    "merge.v1.json": MergeCheckpoint(SEGMENT, "b000000000007", "0000000007:000000001234:b000000000003"),
    "snowflake-apply.v1.json": ApplyCheckpoint("b000000000007", "2026-11-22T07:00:09Z"),
    # Beside the pipeline (`cdc resnapshot`), not one of its stages.
    "resnapshot.v1.json": ResnapshotCheckpoint(
        "r20261126071500-1a2b3c4d", "running", "2026-11-26T07:15:00Z", 4,
        (ResnapshotTable("shop", "orders", ("mariadb-bin.000003", 1234), [20, "x"], False, False, 20, 2, 90,
                         {"1": None, "2": [10, "x"]}),
         ResnapshotTable("shop", "items", est_rows=5))),
}
# Golden files of older versions and what they read as today.
OLDER: dict[str, CheckpointView] = {
    # v1 knew no GTID state (tail asks the server for it at `pos`) and no --rebase offset.
    "tail.v1.json": TailCheckpoint("mariadb-bin.000007", 9901, "0-1-4242", SEGMENT,
                                   "mariadb-0123456789abcdef0123456789abcdef"),
    # v1 shipped one segment per batch and pinned nothing.
    "ship-s3.v1.json": ShipS3Checkpoint("s3://lake/cdc", SEGMENT, 12, 12, 4200, None),
}


def has_golden_shape(path: Path, name: str) -> bool:
    """`path` (written by a real stage run) has the golden file's keys, each of the golden value's JSON type or null."""
    written, golden = json.loads(path.read_text()), json.loads((GOLDEN / name).read_text())
    return bool(written.keys() == golden.keys() and all(
        written[k] is None or golden[k] is None or type(written[k]) is type(golden[k]) for k in golden))


def kind_of(name: str) -> type[CheckpointView]:
    stem = name.split(".v")[0]
    return next(k for k in (*STAGE_CHECKPOINTS, ResnapshotCheckpoint) if k.FILE == stem)


def state_with(tmp_path: Path, name: str) -> StateDir:
    """A state directory holding the golden file `name` as its stage's checkpoint."""
    shutil.copy(GOLDEN / name, tmp_path / f"{name.split('.v')[0]}.json")
    return StateDir(tmp_path)


def test_every_stage_has_a_golden_file_of_its_current_version() -> None:
    for kind in STAGE_CHECKPOINTS:
        name = f"{kind.FILE}.v{kind.VERSION}.json"
        assert name in CURRENT and (GOLDEN / name).is_file(), name
        assert type(CURRENT[name]) is kind
    assert {p.name for p in GOLDEN.glob("*.json")} == {*CURRENT, *OLDER, "server.v1.json"}


@pytest.mark.parametrize("name", sorted(CURRENT))
def test_the_golden_file_reads_as_the_dataclass(tmp_path: Path, name: str) -> None:
    assert kind_of(name).read(state_with(tmp_path, name)) == CURRENT[name]


@pytest.mark.parametrize("name", sorted(CURRENT))
def test_the_dataclass_writes_the_golden_bytes(tmp_path: Path, name: str) -> None:
    state = StateDir(tmp_path / "state")
    CURRENT[name].write(state)
    path = CURRENT[name].path(state)
    assert path.read_bytes() == (GOLDEN / name).read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # checkpoints may name servers: private, as ever
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


@pytest.mark.parametrize("name", sorted(OLDER))
def test_an_older_golden_file_reads_through_its_migration(tmp_path: Path, name: str) -> None:
    assert kind_of(name).read(state_with(tmp_path, name)) == OLDER[name]


def test_the_later_stages_read_the_snapshot_status_and_hand_over(tmp_path: Path) -> None:
    state = state_with(tmp_path, "snapshot.v1.json")
    assert SnapshotStatus.read(state) == SnapshotStatus("done", Handover("mariadb-bin.000003", 1234, "0-1-57"))
    (tmp_path / "snapshot.json").write_text('{"version": 1, "status": "running"}')  # a hand-made file: no hand-over
    status = SnapshotStatus.read(state)
    assert status is not None and (status.is_done, status.handover) == (False, None)


def test_a_tail_checkpoint_without_skip_gtids_has_no_such_key() -> None:
    assert "skip_gtids" not in TailCheckpoint("b.000001", 4).to_dict()


@pytest.mark.parametrize(("body", "needle"), [
    ('{"version": 2, "pos": 4}', "file is missing (a string)"),
    ('{"version": 2, "file": "b.000001", "pos": "12"}', "pos = '12' is not a integer"),
    ('{"version": 2, "file": "b.000001", "pos": true}', "pos = True is not a integer"),
    ('{"version": 2, "file": "b.000001", "pos": 4, "gtid_state": "0-1"}', "gtid_state '0-1'"),
    ('{"version": 2, "file": "b.000001", "pos": 4, "skip_gtids": [1]}', "skip_gtids = [1] is not a list of strings"),
    ('{"version": 3, "file": "b.000001", "pos": 4}', "has version 3; this cdc understands up to 2"),
])
def test_a_wrong_field_names_the_file_and_the_field(tmp_path: Path, body: str, needle: str) -> None:
    (tmp_path / "tail.json").write_text(body)
    with pytest.raises(PositionError) as caught:
        TailCheckpoint.read(StateDir(tmp_path))
    assert caught.value.message.startswith(f"checkpoint {tmp_path / 'tail.json'} ")
    assert needle in caught.value.message


def test_a_nested_field_is_named_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "snapshot.json").write_text('{"version": 1, "status": "done", "handover": {"file": 3}}')
    with pytest.raises(PositionError, match=r"is corrupt: handover\.file = 3 is not a string"):
        SnapshotStatus.read(StateDir(tmp_path))


def test_a_stage_that_has_not_run_has_no_checkpoint(tmp_path: Path) -> None:
    assert all(kind.read(StateDir(tmp_path)) is None for kind in (*STAGE_CHECKPOINTS, *PIPELINE))
