"""Golden files pin checkpoint versions (tail.json v1 and v2, snapshot.json, server.json v1; ship-s3.json v1 and v2): what
the real stages write today has exactly their shape, and what an older cdc wrote in that shape still resumes at the
right place. (tests/checkpoints pins every stage's file byte for byte through cdc.checkpoints.)

A change of shape must bump the version, keep a reader for the old one and add a golden file for the new.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cdc import sinks
from cdc.capture.start import Start, StartRequest, resolve_start
from cdc.checkpoints import ShipS3Checkpoint, TailCheckpoint
from cdc.config import AWSSettings
from cdc.sinks.common import read_ship_checkpoint
from cdc.sinks.s3_batches import Batch, pending_batch
from cdc.snapshot.checkpoint import read_checkpoint as read_snapshot
from cdc.snapshot.run import SnapshotRequest, run_snapshot
from cdc.source.binlog import Position
from cdc.state import StateDir
from tests.capture.conftest import binlog_start, tail_once
from tests.rig import MariaDB
from tests.snapshot.support import make_settings

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str, version: int = 1) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{name}.v{version}.json").read_text())


CURRENT = {"tail": 2, "snapshot": 1, "server": 1}  # the version each file is written in today


def shape(value: Any) -> Any:
    """The structure of a document: keys and JSON types (null and a value of some type count as one)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return "list"
    if value is None:
        return "nullable"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def same_shape(written: Any, pinned: Any) -> bool:
    if isinstance(pinned, dict):
        return isinstance(written, dict) and written.keys() == pinned.keys() and all(
            same_shape(written[k], pinned[k]) for k in pinned)
    return "nullable" in (written, pinned) or written == pinned


def test_what_tail_and_snapshot_write_has_the_golden_shape(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.orders (id INT, k VARCHAR(5), PRIMARY KEY (id, k))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.orders VALUES (1, 'a'), (2, 'b'), (3, 'x')")
    state = tmp_path / "state"
    run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest(chunk_size=2))
    tail_once(mariadb, state, fresh_db)
    for name in ("tail", "snapshot", "server"):
        written = json.loads((state / f"{name}.json").read_text())
        if name == "snapshot":  # "tables" is keyed by table name: compare the one entry with the golden one
            written["tables"] = {"shop.orders": written["tables"].pop(f"{fresh_db}.orders"), **written["tables"]}
        pinned = golden(name, CURRENT[name])
        if name == "tail":  # skip_gtids is written only while a --rebase still has captured transactions ahead
            pinned.pop("skip_gtids")
        assert same_shape(shape(written), shape(pinned)), (name, written)


def test_golden_v1_checkpoints_still_resume_where_they_say(tmp_path: Path) -> None:
    for name in ("tail", "snapshot", "server"):
        shutil.copy(GOLDEN / f"{name}.v1.json", tmp_path / f"{name}.json")
    state = StateDir(tmp_path)
    tail = TailCheckpoint.read(state)
    assert tail is not None and tail.to_dict() == {**golden("tail"), "version": 2, "gtid_state": None, "seq_offset": 0}
    start = resolve_start(state, StartRequest(), None, golden("tail")["server_uuid"], rebase=False)  # type: ignore[arg-type]
    assert (start.position, start.gtid, start.last_segment, start.origin) == (
        Position("mariadb-bin.000007", 9901), "0-1-4242", "seg-0000000007-000000001234-b000000000000.jsonl",
        "checkpoint")
    # v1 has no GTID state (tail asks the server for it at this position) and no --rebase offset.
    assert (start.gtid_state, start.seq_offset, start.skip_gtids) == (None, 0, ())
    snapshot = read_snapshot(state)
    assert snapshot is not None and snapshot.to_dict() == golden("snapshot")
    assert (snapshot.status, snapshot.handover.file, snapshot.handover.pos) == ("done", "mariadb-bin.000003", 1234)
    assert snapshot.tables["shop.orders"].last_key == [3, "x"]
    server = state.read_server()
    assert server is not None and server.to_dict() == golden("server")


def test_golden_v2_tail_checkpoint_resumes_with_its_gtid_state_and_offset(tmp_path: Path) -> None:
    shutil.copy(GOLDEN / "tail.v2.json", tmp_path / "tail.json")
    v2 = golden("tail", 2)
    start = resolve_start(StateDir(tmp_path), StartRequest(), None, v2["server_uuid"], rebase=False)  # type: ignore[arg-type]
    assert start == Start(Position("mariadb-bin.000002", 2211), "0-2-4300", v2["last_segment"], "checkpoint",
                          "0-2-4300,1-1-17", 6, ("1-1-18",), foreign=False)


@pytest.mark.parametrize("name", ["tail", "snapshot"])
def test_snapshot_hand_over_in_a_golden_file_starts_tail(name: str, tmp_path: Path) -> None:
    if name == "snapshot":  # no tail.json yet: tail's first run starts at the snapshot's hand-over
        shutil.copy(GOLDEN / "snapshot.v1.json", tmp_path / "snapshot.json")
        start = resolve_start(StateDir(tmp_path), StartRequest(), None, "any", rebase=False)  # type: ignore[arg-type]
        assert (start.position, start.gtid, start.origin) == (Position("mariadb-bin.000003", 1234), "0-1-57", "snapshot")
    else:  # a tail checkpoint wins over the snapshot
        for stage in ("tail", "snapshot"):
            shutil.copy(GOLDEN / f"{stage}.v1.json", tmp_path / f"{stage}.json")
        start = resolve_start(StateDir(tmp_path), StartRequest(), None, golden("tail")["server_uuid"], rebase=False)  # type: ignore[arg-type]
        assert start.origin == "checkpoint"


def _ship_s3(version: int) -> dict[str, Any]:
    return json.loads((GOLDEN / f"ship-s3.v{version}.json").read_text())


def test_what_ship_s3_pins_before_uploading_has_the_golden_v2_shape(aws_env: dict[str, str], moto_server: Any,
                                                                    bucket: str, tmp_path: Path) -> None:
    from tests.sinks.changes import make_changes, write_changelog

    write_changelog(tmp_path / "changelog", make_changes(300), per_segment=100)
    aws = AWSSettings(region=moto_server.region, endpoint_url=moto_server.endpoint_url)

    def crash(progress: sinks.Progress) -> None:  # stop after the first upload: the batch is still pending
        if progress.requests:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sinks.ship(StateDir(tmp_path), sinks.open_sink(aws, sinks.ShipTarget(to=f"s3://{bucket}/g")), on_progress=crash)
    written = json.loads((tmp_path / "ship-s3.json").read_text())
    assert same_shape(shape(written), shape(_ship_s3(2))), written


def test_golden_ship_s3_checkpoints_resume_where_they_say(tmp_path: Path) -> None:
    v1, v2 = _ship_s3(1), _ship_s3(2)
    sink = sinks.open_sink(AWSSettings(region="us-east-1"), sinks.ShipTarget(to="s3://lake/cdc"))
    names = [v1["last_segment"], v2["pending"]["first"], "seg-0000000007-000000007000-b000000000000.jsonl",
             v2["pending"]["last"], "seg-0000000007-000000009999-b000000000000.jsonl"]
    (tmp_path / "changelog").mkdir()
    for name in names:
        (tmp_path / "changelog" / name).write_bytes(b"{}\n")
    state = StateDir(tmp_path)
    shutil.copy(GOLDEN / "ship-s3.v1.json", tmp_path / "ship-s3.json")
    migrated = read_ship_checkpoint(state, sink)
    assert isinstance(migrated, ShipS3Checkpoint)
    assert migrated.to_dict() == {**v1, "version": 2, "pending": None, "batches": 12}  # v1: one batch per segment
    assert pending_batch(state.changelog, migrated, tmp_path / "ship-s3.json") is None  # nothing pinned: plan anew
    shutil.copy(GOLDEN / "ship-s3.v2.json", tmp_path / "ship-s3.json")
    checkpoint = read_ship_checkpoint(state, sink)
    assert isinstance(checkpoint, ShipS3Checkpoint) and checkpoint.to_dict() == v2
    batch = pending_batch(state.changelog, checkpoint, tmp_path / "ship-s3.json")
    assert batch == Batch(tuple(tmp_path / "changelog" / n for n in names[1:4]), 128 * 2**20, "gzip")
    assert batch.id == f"{names[1][:-6]}_{names[3][:-6]}"
