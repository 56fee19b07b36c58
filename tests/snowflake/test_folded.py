"""The schema positions cdc prune keeps of the batches whose folders it removed (cdc.snowflake.folded): apply's
look-back finds in them what it found in the manifests themselves."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from cdc.errors import PositionError
from cdc.pipeline.prune import plan_prune, prune
from cdc.pipeline.prune_batches import prune_batches
from cdc.snowflake import apply, bootstrap
from cdc.snowflake.folded import FOLDED, Folded, Held, fold, look_back, read_folded
from cdc.snowflake.sealed import list_batches, refuse_folded
from cdc.snowflake.staging import Batch
from cdc.state import StateDir, write_json_atomic
from tests.snowflake.batches import record_schema, row, value, write_batch
from tests.snowflake.stand_in import rows


def manifest(tables: dict[str, str]) -> dict[str, object]:
    return {"version": 1, "segments": ["seg-1", "seg-1"],
            "tables": {name: {"rows": 1, "schema_position": position} for name, position in tables.items()}}


def history(seed: int, count: int = 40) -> list[Batch]:
    """Batches over a few names whose schema positions only grow, a name given up (RENAME away) and later reused
    by another table: the cases lineage look-backs meet."""
    rng = random.Random(seed)
    positions = {"shop.a": 100, "shop.b": 100, "shop.old": 100, "shop.new": 100}
    found = []
    for number in range(1, count + 1):
        tables = {}
        for name in rng.sample(sorted(positions), rng.randint(0, 3)):
            if rng.random() < 0.2:  # a DDL on it: a later position (zero-padded: positions compare as strings)
                positions[name] += rng.randint(1, 50)
            tables[name] = f"binlog.000001:{positions[name]:010d}"
        batch_id = f"b{number:012d}"
        found.append(Batch(batch_id, Path(batch_id), manifest(tables)))
    return found


HELD: list[list[Held]] = [
    [("shop.a", "", None)],
    [("shop.new", "binlog.000001:0000000150", None), ("shop.old", "", "binlog.000001:0000000150")],
    [("shop.old", "binlog.000001:0000000120", "binlog.000001:0000000180")],
    [("shop.b", "binlog.000001:9999999999", None)],  # never there
]


@pytest.mark.parametrize("seed", range(6))
def test_a_look_back_finds_the_same_position_whatever_was_folded(seed: int) -> None:
    batches = history(seed)
    for cut in range(0, len(batches) + 1, 3):
        folded = Folded()
        for batch in batches[:cut]:
            folded.add(batch.batch_id, batch.manifest)
        for held in HELD:
            # Only batches after the folded ones are ever applied: a folded one's folder is gone.
            for before in [b.batch_id for b in batches[cut:]] + ["b999999999999"]:
                assert look_back(batches[cut:], folded, held, before) == look_back(batches, Folded(), held, before), \
                    (cut, held, before)


def test_the_fold_file_round_trips_and_folding_again_changes_nothing(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.batches.mkdir()
    batches = history(7, count=12)
    fold(state, [(b.batch_id, b.manifest) for b in batches[:8]])
    once = read_folded(state)
    fold(state, [(b.batch_id, b.manifest) for b in batches[4:8]])  # a prune killed before its folders went
    assert read_folded(state) == once and once.through == batches[7].batch_id
    assert (state.batches / FOLDED).stat().st_mode & 0o077 == 0


def test_a_corrupt_fold_file_is_refused_by_name(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    write_json_atomic(state.batches / FOLDED, {"version": 1, "through": 7, "tables": {}})
    with pytest.raises(PositionError, match="folded.json is corrupt"):
        read_folded(state)


def test_a_target_lacking_the_folded_batches_is_refused(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.batches.mkdir()
    refuse_folded(read_folded(state).through, set())  # nothing folded: any target will do
    fold(state, [("b000000000003", manifest({"shop.a": "p1"}))])
    through = read_folded(state).through
    refuse_folded(through, {"b000000000001", "b000000000003"})
    with pytest.raises(PositionError, match="batch b000000000003 is not in this Snowflake target"):
        refuse_folded(through, {"b000000000001"})


def test_a_kept_listing_lets_go_of_the_batches_whose_folders_went(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    for number in range(1, 5):
        write_json_atomic(state.manifest_path(f"b{number:012d}"), manifest({"shop.a": "p1"}))
    known: dict[str, Batch] = {}
    assert len(list_batches(state, known=known)) == 4 and len(known) == 4
    for number in (1, 2):
        for path in state.batch_dir(f"b{number:012d}").iterdir():
            path.unlink()
        state.batch_dir(f"b{number:012d}").rmdir()
    assert [b.batch_id for b in list_batches(state, known=known)] == ["b000000000003", "b000000000004"]
    assert sorted(known) == ["b000000000003", "b000000000004"]


def test_an_applier_fetches_and_keeps_only_the_batches_after_the_folded_ones(sf: Any, tmp_path: Path) -> None:
    """The bookkeeping table gains a row per batch for ever, a long run's sealed batches a folder each: a new
    Applier fetched every id ever applied, and a kept one added each to what it held. Those before the newest
    folded batch are never listed again: neither fetched nor kept, and the target stays exact."""
    schema = record_schema(tmp_path, "shop", "items")
    options = bootstrap.Options()
    bootstrap.run(sf, bootstrap.targets_for([schema], options), options)
    ids = [f"b{n:012d}" for n in range(1, 6)]
    for n in (1, 2, 3):
        write_batch(tmp_path, n, {"shop.items": [row(n, n, "c", **value(n))]})
    state = StateDir(tmp_path)
    assert apply.run(sf, state).applied == ids[:3]
    assert prune(state, plan_prune(state, keep=0, expected=["snowflake-apply"])).batches_folded == 2
    applier = apply.Applier(sf, state)
    try:
        assert applier.start() == set(ids[1:3])  # from the newest folded one on
        write_batch(tmp_path, 4, {"shop.items": [row(1, 4, "u", **value(40))]})
        assert apply.run(sf, state, applier=applier).applied == [ids[3]]
        assert prune(state, plan_prune(state, keep=0, expected=["snowflake-apply"])).batches_folded == 1
        write_batch(tmp_path, 5, {"shop.items": [row(2, 5, "d")]})
        assert apply.run(sf, state, applier=applier).applied == [ids[4]]
        assert applier.applied == set(ids[2:])
    finally:
        applier.close()
    assert rows(sf, 'SELECT "ID", "NAME" FROM "ITEMS" ORDER BY "ID"') == [(1, value(40)["name"]), (3, value(3)["name"])]


def test_batches_folded_by_a_prune_killed_before_their_folders_went_are_not_applied_again(sf: Any,
                                                                                        tmp_path: Path) -> None:
    """folded.json is written before the folders go: a prune killed in between leaves folded batches on disk. A new
    Applier does not fetch their ids, a kept one lets go of them: neither takes them for batches to apply (their
    data files are gone: that was exit 5, until the next prune)."""
    schema = record_schema(tmp_path, "shop", "items")
    options = bootstrap.Options()
    bootstrap.run(sf, bootstrap.targets_for([schema], options), options)
    for n in (1, 2, 3):
        write_batch(tmp_path, n, {"shop.items": [row(n, n, "c", **value(n))]})
    state = StateDir(tmp_path)
    kept = apply.Applier(sf, state)
    try:
        assert apply.run(sf, state, applier=kept).applied == [f"b{n:012d}" for n in (1, 2, 3)]
        plan = plan_prune(state, keep=0, expected=["snowflake-apply"]).batches
        prune_batches(state, plan)  # the data files go; then the fold, and the kill before any folder goes
        fold(state, [(batch, json.loads(state.manifest_path(batch).read_text())) for batch in plan.folds])
        assert state.batch_dir("b000000000001").is_dir()
        for applier in (kept, None):
            again = apply.run(sf, state, applier=applier)
            assert (again.applied, again.skipped) == ([], []), applier
    finally:
        kept.close()
    assert rows(sf, 'SELECT "ID" FROM "ITEMS" ORDER BY "ID"') == [(1,), (2,), (3,)]
