"""`cdc prune` and `cdc run`'s retention of the change log: only what every reader has passed goes, and a reader
whose changes are gone refuses to start instead of skipping them (cdc.pipeline.prune, cdc.changelog)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cdc.changelog import PRUNED_MARKER, list_segments, pruned_through
from cdc.checkpoints import ApplyCheckpoint, MergeCheckpoint, ShipKinesisCheckpoint, ShipS3Checkpoint, TailCheckpoint
from cdc.config import AWSSettings, Settings
from cdc.errors import ExitCode, PositionError
from cdc.pipeline.local import read_local
from cdc.pipeline.prune import plan_prune, prune
from cdc.pipeline.run import prune_readers
from cdc.snowflake.folded import read_folded
from cdc.snowflake.sealed import refuse_pruned
from cdc.state import StateDir
from tests.pipeline.cli import run
from tests.pipeline.conftest import BINLOG, change, checkpoint, sealed_batch, write_segments
from tests.pipeline.run_rig import assert_replicated, cdc_run, create_source, more_writes, write_config
from tests.rig import MariaDB

DAY = 86400.0


def segments(state: StateDir, count: int) -> list[Path]:
    return write_segments(state, ([change(100 + 10 * n, n)] for n in range(count)))


def age(paths: list[Path], seconds: float) -> None:
    then = time.time() - seconds
    for path in paths:
        os.utime(path, (then, then))


def readers(state: StateDir, *, kinesis: Path, merge: Path, tail: Path) -> None:
    ShipKinesisCheckpoint("kinesis:orders", kinesis.name, 1, 1).write(state)
    MergeCheckpoint(merge.name, "b000001", None).write(state)
    TailCheckpoint(BINLOG, 999, last_segment=tail.name, server_uuid="u").write(state)


def test_only_segments_every_reader_passed_and_older_than_keep_go(state: StateDir) -> None:
    sealed = segments(state, 7)
    age(sealed, 2 * DAY)
    age(sealed[2:3], 60)  # sealed a minute ago: kept by --keep 24h although every reader passed it
    readers(state, kinesis=sealed[4], merge=sealed[5], tail=sealed[6])

    plan = plan_prune(state, keep=DAY, expected=["spark-merge"])
    # sealed[4] is the horizon and a checkpoint names it; sealed[5] and [6] are after it
    assert [p.name for p in plan.segments] == [sealed[0].name, sealed[1].name, sealed[3].name]
    assert (plan.horizon, plan.held_by, plan.kept) == (sealed[4].name, "ship-kinesis", 4)
    result = prune(state, plan)
    assert result.deleted == 3 and result.freed == plan.bytes > 0
    assert [p.name for p in list_segments(state.changelog)] == [p.name for p in (sealed[2], *sealed[4:])]
    assert pruned_through(state.changelog) == sealed[3].name

    # The readers that were counted read on; one that would start before the marker is refused, whoever it is.
    assert [p.name for p in list_segments(state.changelog, sealed[4].name, reader="ship-kinesis")] == \
        [sealed[5].name, sealed[6].name]
    for after in (None, sealed[1].name):
        with pytest.raises(PositionError, match=f"ship-s3 .*up to {sealed[3].name} was pruned"):
            list_segments(state.changelog, after, reader="ship-s3")


def test_a_second_prune_only_moves_the_marker_forward(state: StateDir) -> None:
    sealed = segments(state, 5)
    age(sealed, 2 * DAY)
    readers(state, kinesis=sealed[2], merge=sealed[3], tail=sealed[4])
    prune(state, plan_prune(state, keep=DAY))
    assert pruned_through(state.changelog) == sealed[1].name
    ShipKinesisCheckpoint("kinesis:orders", sealed[4].name, 1, 1).write(state)
    MergeCheckpoint(sealed[4].name, "b000002", None).write(state)
    result = prune(state, plan_prune(state, keep=DAY))
    assert [p.name for p in result.plan.segments] == [sealed[2].name, sealed[3].name]
    assert pruned_through(state.changelog) == sealed[3].name
    assert prune(state, plan_prune(state, keep=DAY)).deleted == 0
    assert pruned_through(state.changelog) == sealed[3].name


def test_a_stopped_prune_leaves_the_rest_behind_the_marker_for_the_next(state: StateDir) -> None:
    sealed = segments(state, 5)
    age(sealed, 2 * DAY)
    readers(state, kinesis=sealed[3], merge=sealed[3], tail=sealed[4])
    stop = threading.Event()
    stop.set()
    stopped = prune(state, plan_prune(state, keep=DAY), stop=stop)
    assert stopped.deleted == 0 and pruned_through(state.changelog) == sealed[2].name
    assert [p.name for p in list_segments(state.changelog, sealed[3].name, reader="spark-merge")] == [sealed[4].name]
    assert prune(state, plan_prune(state, keep=DAY)).deleted == 3


def seal_batches(state: StateDir, count: int) -> list[str]:
    """`count` sealed batches as spark-merge leaves them: a folder of Parquet per table, and the manifest."""
    ids = []
    for number in range(1, count + 1):
        batch = f"b{number:012d}"
        for table in ("shop.a", "shop.b"):
            (state.batch_dir(batch) / table).mkdir(parents=True)
            (state.batch_dir(batch) / table / "part-00000.parquet").write_bytes(b"PAR1" * 256)
        sealed_batch(state, batch, (f"seg-{number}", f"seg-{number}"))
        ids.append(batch)
    return ids


def test_applied_batches_lose_their_data_files_then_their_folders(state: StateDir) -> None:
    """The applied batches' data files go; so do the folders of those before the one the apply checkpoint names,
    their manifests folded into batches/folded.json."""
    ids = seal_batches(state, 4)
    age([state.manifest_path(b) for b in ids], 2 * DAY)
    ApplyCheckpoint.applied(ids[1], time.time()).write(state)
    MergeCheckpoint("seg-4", ids[3], None).write(state)

    plan = plan_prune(state, keep=DAY, expected=["snowflake-apply"])
    assert (plan.batches.batches, plan.batches.bytes, plan.batches.folds) == (ids[:2], 2 * 2 * 1024, ids[:1])
    result = prune(state, plan)
    assert (result.batches_pruned, result.batches_freed, result.batches_folded) == (2, 4096, 1)
    assert not state.batch_dir(ids[0]).exists() and read_folded(state).through == ids[0]
    assert [sorted(os.listdir(state.batch_dir(b))) for b in ids[1:]] == [["manifest.json"]] + [
        ["manifest.json", "shop.a", "shop.b"]] * 2
    assert state.batches_pruned() == (ids[1], ids[1])
    assert read_local(state).last_segment("snowflake-apply") == "seg-2"  # read from the kept manifest
    with pytest.raises(PositionError, match=f"batch {ids[0]} .*data files were pruned"):
        refuse_pruned(state, ids[0])
    refuse_pruned(state, ids[2])
    assert prune(state, plan_prune(state, keep=DAY, expected=["snowflake-apply"])).batches_pruned == 0


@pytest.mark.parametrize("apply_expected", [True, False])
def test_batches_without_an_apply_checkpoint(state: StateDir, apply_expected: bool) -> None:
    """snowflake-apply configured but not run yet: every batch waits for it. Neither: nothing reads the batches,
    and what spark-merge sealed (older than keep) goes."""
    ids = seal_batches(state, 3)
    age([state.manifest_path(b) for b in ids[:2]], 2 * DAY)
    MergeCheckpoint("seg-3", ids[2], None).write(state)
    plan = plan_prune(state, keep=DAY, expected=["snowflake-apply"] if apply_expected else [])
    if apply_expected:
        assert plan.batches.batches == [] and plan.batches.reason == "snowflake-apply has not applied a batch yet"
    else:
        assert plan.batches.batches == ids[:2]  # the third is younger than keep


def test_a_stopped_batch_prune_is_taken_up_again(state: StateDir) -> None:
    ids = seal_batches(state, 2)
    age([state.manifest_path(b) for b in ids], 2 * DAY)
    ApplyCheckpoint.applied(ids[1], time.time()).write(state)
    stop = threading.Event()
    stop.set()
    assert prune(state, plan_prune(state, keep=DAY), stop=stop).batches_pruned == 0
    assert state.batches_pruned() == (ids[1], None)
    with pytest.raises(PositionError):
        refuse_pruned(state, ids[0])  # the marker came first: a batch it covers is refused even before it goes
    assert prune(state, plan_prune(state, keep=DAY)).batches_pruned == 2
    assert state.batches_pruned() == (ids[1], ids[1])


@pytest.mark.parametrize("case", ["no reader", "configured reader without checkpoint", "snapshot unfinished",
                                  "re-snapshot unfinished"])
def test_nothing_goes_while_a_reader_or_a_snapshot_may_still_need_it(state: StateDir, case: str) -> None:
    sealed = segments(state, 4)
    age(sealed, 2 * DAY)
    expected: list[str] = []
    if case != "no reader":
        readers(state, kinesis=sealed[2], merge=sealed[2], tail=sealed[3])
    if case == "configured reader without checkpoint":
        expected = [ShipS3Checkpoint.STAGE]
    if case == "snapshot unfinished":
        checkpoint(state, "snapshot", status="running", handover={"file": BINLOG, "pos": 4, "gtid": None})
    if case == "re-snapshot unfinished":
        checkpoint(state, "resnapshot", run="r20261205120000-1a2b3c4d", status="running",
                   started_at="2026-12-05T12:00:00Z", next_chunk=1, tables=[])
    plan = plan_prune(state, keep=0.0, expected=expected)
    assert plan.segments == [] and plan.reason is not None and plan.kept == 4
    assert prune(state, plan).deleted == 0 and not (state.changelog / PRUNED_MARKER).exists()


def test_a_corrupt_marker_stops_the_readers(state: StateDir) -> None:
    segments(state, 1)
    (state.changelog / PRUNED_MARKER).write_text('{"version": 1, "through": 7}', encoding="utf-8")
    with pytest.raises(PositionError, match="pruned.json is corrupt"):
        list_segments(state.changelog, reader="spark-merge")


def test_cdc_prune_dry_run_then_prune_then_a_new_reader_is_refused(state: StateDir, tmp_path: Path) -> None:
    sealed = segments(state, 4)
    age(sealed, 2 * DAY)
    readers(state, kinesis=sealed[2], merge=sealed[2], tail=sealed[3])
    base = ["--state-dir", str(state.root)]

    dry = run("prune", *base, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    document: dict[str, Any] = json.loads(dry.stdout)
    assert (document["dry_run"], document["segments"], document["held_by"]) == (True, 2, "ship-kinesis")
    assert len(list_segments(state.changelog)) == 4

    done = run("prune", *base, "--keep", "1d")
    assert done.exit_code == 0, done.output
    assert "deleted 2 segments" in done.stderr and len(list_segments(state.changelog)) == 2

    # A destination never shipped to would start from the log's beginning: exit 5 before any call to AWS.
    refused = run("ship", *base, "--to", "s3://lake/cdc", "--endpoint-url", "http://127.0.0.1:9", "--region", "us-east-1")
    assert refused.exit_code == ExitCode.POSITION, refused.output
    assert "ship-s3 has no checkpoint" in refused.stderr and "was pruned" in refused.stderr

    assert run("prune", *base, "--keep", "soon").exit_code == ExitCode.USAGE
    assert run("prune", *base, "--reader", "tail").exit_code == ExitCode.USAGE


def test_cdc_prune_waits_for_the_configured_readers_unless_told_which(state: StateDir, tmp_path: Path) -> None:
    """spark-merge is always configured: a pipeline that only ships to Kinesis names its readers."""
    sealed = segments(state, 3)
    age(sealed, 2 * DAY)
    ShipKinesisCheckpoint("kinesis:orders", sealed[2].name, 3, 3).write(state)
    base = ["--state-dir", str(state.root), "--keep", "0s", "--json"]
    held = json.loads(run("prune", *base).stdout)
    assert held["segments"] == 0 and "spark-merge has not read the change log yet" in held["reason"]
    done = json.loads(run("prune", *base, "--reader", "ship-kinesis").stdout)
    assert (done["deleted"], done["held_by"]) == (2, "ship-kinesis")


def test_run_prunes_what_the_chain_read_and_stays_exact(
        tmp_path: Path, mariadb: MariaDB, fresh_db: str, aws_env: dict[str, str], bucket: str,
        snowflake_env: dict[str, str], sf: Any) -> None:
    """`cdc run` with `[changelog] keep = "0s"`: each run prunes what ship-s3, spark-merge and snowflake-apply have
    all passed, and the applied batches' files; the next run goes on from there, and Snowflake equals MySQL row
    for row."""
    create_source(mariadb, fresh_db)
    state = StateDir(tmp_path / "state")
    config = write_config(tmp_path / "cdc.toml", mariadb, fresh_db, aws_env, bucket, state.root)
    config.write_text(config.read_text(encoding="utf-8") + '\n[changelog]\nkeep = "0s"\n', encoding="utf-8")

    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    first = pruned_through(state.changelog)
    assert first is not None, "nothing was pruned"
    assert all(p.name > first for p in list_segments(state.changelog))
    more_writes(mariadb, fresh_db)
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    assert_replicated(mariadb, fresh_db, sf)
    second = pruned_through(state.changelog)
    assert second is not None and second > first
    # Only what a checkpoint names is left, besides what came after the readers.
    assert len(list_segments(state.changelog)) <= 2
    # Of the applied batches, only the one the apply checkpoint names is left, as its manifest; the others' are
    # folded into batches/folded.json.
    batches = state.sealed_batches()
    assert batches == [state.batches_pruned()[1]] and os.listdir(state.batch_dir(batches[0])) == ["manifest.json"]
    folded = read_folded(state).through
    assert folded is not None and folded < batches[0]
    shown = run("status", "--config", str(config), "--offline", "--json")
    assert json.loads(shown.stdout)["kept"] == {"segments": len(list_segments(state.changelog)),
                                                "pruned_through": second, "batches": 1,
                                                "batches_folded_through": folded}, shown.stdout

    # A target that lacks the history (here: its bookkeeping emptied) is refused, not half-built from what is left.
    sf.cursor().execute('DELETE FROM "_CDC_APPLIED_BATCHES"')
    done = subprocess.run([sys.executable, "-m", "cdc", "snowflake-apply", "--config", str(config)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == ExitCode.POSITION, done.stderr
    assert f"batch {folded} is not in this Snowflake target" in done.stderr and "pruned" in done.stderr


def test_a_column_renamed_after_its_tables_batches_were_folded_arrives_exact(
        tmp_path: Path, mariadb: MariaDB, fresh_db: str, aws_env: dict[str, str], bucket: str,
        snowflake_env: dict[str, str], sf: Any) -> None:
    """A table untouched since its batches were folded away, then a column renamed and one row updated: apply's
    look-back finds the table's last schema position in folded.json, so the values move to the new name (without
    it, the new column would be filled for the updated row only)."""
    create_source(mariadb, fresh_db)
    mariadb.execute("CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR(40))", database=fresh_db)
    mariadb.execute("INSERT INTO notes VALUES (1, 'one'), (2, 'two'), (3, NULL)", database=fresh_db)
    state = StateDir(tmp_path / "state")
    config = write_config(tmp_path / "cdc.toml", mariadb, fresh_db, aws_env, bucket, state.root)
    config.write_text(config.read_text(encoding="utf-8") + '\n[changelog]\nkeep = "0s"\n', encoding="utf-8")
    assert cdc_run(config, "--until-now")[0] == 0
    more_writes(mariadb, fresh_db)  # notes untouched: its batches go in this run's prune
    assert cdc_run(config, "--until-now")[0] == 0
    assert all(f"{fresh_db}.notes" not in json.loads(state.manifest_path(b).read_text(encoding="utf-8"))["tables"]
               for b in state.sealed_batches())
    assert f"{fresh_db}.notes" in read_folded(state).tables

    mariadb.execute("ALTER TABLE notes RENAME COLUMN body TO text", database=fresh_db)
    mariadb.execute("UPDATE notes SET text = 'two!' WHERE id = 2", database=fresh_db)
    code, _, err = cdc_run(config, "--until-now")
    assert code == 0, err
    assert_replicated(mariadb, fresh_db, sf)
    rows = sf.cursor().execute('SELECT "ID", "TEXT" FROM "NOTES" ORDER BY "ID"').fetchall()
    assert [tuple(r) for r in rows] == [tuple(r) for r in mariadb.execute(
        "SELECT id, text FROM notes ORDER BY id", database=fresh_db)] == [(1, "one"), (2, "two!"), (3, None)]


def test_a_run_waits_for_the_destinations_configured_even_when_it_skips_them() -> None:
    """`cdc run --skip-stage ship-s3` with a bucket configured: a ship-s3 that has not run yet still holds the log
    back (else it would be refused once it runs); a run that only ships does not wait for spark-merge."""
    shipping = Settings(aws=AWSSettings(bucket="lake"))
    assert prune_readers(shipping, ["tail", "spark-merge"]) == ["ship-s3", "spark-merge"]
    assert prune_readers(shipping, ["tail", "ship-s3"]) == ["ship-s3"]
    assert prune_readers(Settings(), ["tail", "spark-merge"]) == ["spark-merge"]
