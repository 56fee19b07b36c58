"""bootstrap + apply against fakesnow (server mode, the real connector): exact target contents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.config import SnowflakeSettings
from cdc.errors import DataError, PreconditionError
from cdc.snowflake import apply, bootstrap
from cdc.snowflake.connect import connect
from cdc.state import StateDir
from tests.checkpoints.test_golden import has_golden_shape
from tests.snowflake.batches import HOSTILE, position, record_schema, row, value, write_batch
from tests.snowflake.stand_in import rows

COLS = '"ID", "NAME", "AMOUNT", "BIG", "SEEN", "RAW", "TAGS", "DOC"'


def _bootstrap(conn: Any, state: Path, **options: Any) -> bootstrap.Plan:
    schema = record_schema(state, "shop", "items")
    opts = bootstrap.Options(**options)
    return bootstrap.run(conn, bootstrap.targets_for([schema], opts), opts)


def _expected(i: int, n: int, op: str) -> tuple[Any, ...]:
    v = value(i)
    doc = v["doc"].replace(" ", "")  # VARIANT comes back in compact JSON text
    tags = "[" + ",".join(f'"{t}"' for t in v["tags"]) + "]"
    return (i, v["name"], v["amount"], int(v["big"]), v["seen"], bytearray(v["raw"]), tags, doc, position(n), op)


def _scenario(state: Path) -> None:
    """Batch 1 inserts 1..8 (every hostile string); batch 2 deletes 1, updates 2, moves key 3 to 30."""
    write_batch(state, 1, {"shop.items": [row(i, i, "c", **value(i)) for i in range(1, 9)]})
    write_batch(state, 2, {"shop.items": [row(1, 20, "d"), row(2, 21, "u", **value(12)),
                                          row(3, 22, "d"), row(30, 22, "u", **value(30))]})


def test_bootstrap_creates_and_second_run_changes_nothing(sf: Any, tmp_path: Path) -> None:
    first = _bootstrap(sf, tmp_path)
    assert first.created == ["ITEMS"] and first.added == []
    columns = rows(sf, "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'ITEMS' "
                   "ORDER BY ORDINAL_POSITION")
    assert [c[0] for c in columns] == ["ID", "NAME", "AMOUNT", "BIG", "SEEN", "RAW", "TAGS", "DOC",
                                       "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP"]
    second = _bootstrap(sf, tmp_path)
    assert (second.created, second.added, second.type_drift) == ([], [], [])


def test_apply_leaves_exact_rows_and_hostile_values_byte_exact(sf: Any, tmp_path: Path) -> None:
    _bootstrap(sf, tmp_path)
    _scenario(tmp_path)
    summary = apply.run(sf, StateDir(tmp_path))
    assert summary.applied == ["b000000000001", "b000000000002"]
    assert summary.transactional is False  # fakesnow cannot MERGE inside BEGIN..COMMIT: replay mode
    got = rows(sf, f'SELECT {COLS}, "_CDC_POSITION", "_CDC_OP" FROM "ITEMS" ORDER BY "ID"')
    expected = [_expected(i, i, "c") for i in range(4, 9)]
    expected.insert(0, _expected(12, 21, "u")[:0] + (2,) + _expected(12, 21, "u")[1:])
    expected.append((30,) + _expected(30, 22, "u")[1:])
    assert got == expected
    assert {r[1] for r in got} >= set(HOSTILE[4:8])  # NUL, injection text, "", quotes
    assert rows(sf, 'SELECT "BATCH_ID" FROM "_CDC_APPLIED_BATCHES" ORDER BY 1') == [("b000000000001",),
                                                                                 ("b000000000002",)]
    assert StateDir(tmp_path).read_checkpoint("snowflake-apply", 1)["last_batch"] == "b000000000002"
    assert has_golden_shape(StateDir(tmp_path).checkpoint_path("snowflake-apply"), "snowflake-apply.v1.json")
    again = apply.run(sf, StateDir(tmp_path))
    assert (again.applied, again.skipped, again.last_batch) == ([], [], "b000000000002")
    assert rows(sf, f'SELECT {COLS}, "_CDC_POSITION", "_CDC_OP" FROM "ITEMS" ORDER BY "ID"') == expected


def test_replayed_merge_is_harmless(sf: Any, tmp_path: Path) -> None:
    """A run killed after the MERGE but before the bookkeeping insert replays the batch: no change."""
    _bootstrap(sf, tmp_path)
    _scenario(tmp_path)
    apply.run(sf, StateDir(tmp_path))
    before = rows(sf, f'SELECT {COLS}, "_CDC_POSITION" FROM "ITEMS" ORDER BY "ID"')
    # As if killed between the last batch's MERGE and its bookkeeping insert (no transaction here).
    sf.cursor().execute("DELETE FROM \"_CDC_APPLIED_BATCHES\" WHERE \"BATCH_ID\" = 'b000000000002'")
    summary = apply.run(sf, StateDir(tmp_path))
    assert (summary.applied, summary.skipped) == (["b000000000002"], [])
    assert vars(summary.tables["shop.items"]) == {"inserted": 0, "updated": 0, "deleted": 0}
    assert rows(sf, f'SELECT {COLS}, "_CDC_POSITION" FROM "ITEMS" ORDER BY "ID"') == before


def test_soft_delete_flags_rows(sf: Any, tmp_path: Path) -> None:
    _bootstrap(sf, tmp_path, soft_delete=True)
    _scenario(tmp_path)
    write_batch(tmp_path, 3, {"shop.items": [row(1, 40, "c", **value(41))]})  # re-insert after delete
    apply.run(sf, StateDir(tmp_path))
    got = rows(sf, 'SELECT "ID", "NAME", "_CDC_DELETED", "_CDC_OP", "_CDC_POSITION" FROM "ITEMS" ORDER BY "ID"')
    assert [(r[0], r[2], r[3]) for r in got] == [
        (1, False, "c"), (2, False, "u"), (3, True, "d"), (4, False, "c"), (5, False, "c"), (6, False, "c"),
        (7, False, "c"), (8, False, "c"), (30, False, "u")]
    assert got[0][1] == value(41)["name"] and got[2][4] == position(22)
    deleted_at = rows(sf, 'SELECT "_CDC_DELETED_AT" IS NOT NULL FROM "ITEMS" WHERE "ID" = 3')
    assert deleted_at == [(True,)]


def test_history_versions_are_complete_and_non_overlapping(sf: Any, tmp_path: Path) -> None:
    _bootstrap(sf, tmp_path, history=True)
    _scenario(tmp_path)
    write_batch(tmp_path, 3, {"shop.items": [row(2, 50, "u", **value(52)), row(1, 51, "c", **value(1))]})
    apply.run(sf, StateDir(tmp_path))
    # NULL TIMESTAMP_TZ comes back as 1970-01-01 through fakesnow's server: ask with IS NULL in SQL.
    history = rows(sf, 'SELECT "ID", "_CDC_POSITION", "_CDC_VALID_FROM", "_CDC_VALID_TO", "_CDC_VALID_TO" IS NULL, '
                   '"_CDC_IS_CURRENT" FROM "ITEMS_HISTORY" ORDER BY "ID", "_CDC_POSITION"')
    versions: dict[int, list[tuple[Any, ...]]] = {}
    for r in history:
        versions.setdefault(r[0], []).append(r)
    assert {k: [v[1] for v in vs] for k, vs in versions.items()} == {
        1: [position(1), position(51)], 2: [position(2), position(21), position(50)], 3: [position(3)],
        4: [position(4)], 5: [position(5)], 6: [position(6)], 7: [position(7)], 8: [position(8)],
        30: [position(22)]}
    for key, vs in versions.items():
        for older, newer in zip(vs, vs[1:]):
            assert older[3] == newer[2] or (key == 1 and older[3] < newer[2]), (key, older, newer)
            assert older[5] is False
        last = vs[-1]
        assert last[5] is (key != 3) and last[4] is (key != 3)  # key 3 moved to 30: closed, not current


def test_apply_adds_a_missing_column(sf: Any, tmp_path: Path) -> None:
    """The table follows the schema history at the batch (issue #30): a column it lacks is added, not refused."""
    _bootstrap(sf, tmp_path)
    sf.cursor().execute('ALTER TABLE "ITEMS" DROP COLUMN "DOC"')
    _scenario(tmp_path)
    summary = apply.run(sf, StateDir(tmp_path))
    assert summary.evolved == ["add column ITEMS.DOC"] and summary.applied
    assert "DOC" in [r[0] for r in rows(sf, "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS "
                                           "WHERE TABLE_NAME = 'ITEMS'")]


def test_apply_needs_bootstrap(sf: Any, tmp_path: Path) -> None:
    _scenario(tmp_path)
    with pytest.raises(PreconditionError, match="has no _CDC_APPLIED_BATCHES table"):
        apply.run(connect(SnowflakeSettings()), StateDir(tmp_path))


def test_every_hostile_value_arrives_byte_exact(sf: Any, tmp_path: Path) -> None:
    """Each hostile string as text and as bytes, in its own row: quotes, trailing backslash, 'None', NUL, injection."""
    _bootstrap(sf, tmp_path)
    batch = [row(i, i, "c", name=text, raw=text.encode()) for i, text in enumerate(HOSTILE, start=1)]
    write_batch(tmp_path, 1, {"shop.items": batch})
    apply.run(sf, StateDir(tmp_path))
    got = rows(sf, 'SELECT "ID", "NAME", "RAW", "NAME" IS NULL FROM "ITEMS" ORDER BY "ID"')
    assert got == [(i, text, bytearray(text.encode()), False) for i, text in enumerate(HOSTILE, start=1)]
    assert {"O'Brien", "trailing\\", "None", "emoji 🎉", "nul\x00byte", "x'), ('99', 'injected"} <= {r[1] for r in got}


class _Recording:
    """A connection whose cursors note every statement they run (the real connector still runs it)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[str] = []

    def cursor(self) -> Any:
        cursor = self.conn.cursor()
        run = cursor.execute

        def execute(statement: str, *args: Any, **kwargs: Any) -> Any:
            self.statements.append(statement)
            return run(statement, *args, **kwargs)

        cursor.execute = execute
        return cursor


def test_every_statement_bootstrap_and_apply_run_parses_with_sqlglot(sf: Any, tmp_path: Path) -> None:
    """Not only the templates: the statements really sent (staging table, PUT, COPY, MERGE, bookkeeping...)."""
    import sqlglot
    from sqlglot import exp

    recording = _Recording(sf)
    _bootstrap(recording, tmp_path, history=True, soft_delete=True)
    _scenario(tmp_path)
    apply.run(recording, StateDir(tmp_path))
    kinds = set()
    for statement in recording.statements:
        parsed = sqlglot.parse_one(statement, read="snowflake")
        if statement.startswith("REMOVE @"):  # sqlglot has no grammar for REMOVE (a Command); fakesnow none either
            assert isinstance(parsed, exp.Command) and statement.endswith("/")
            continue
        assert not isinstance(parsed, exp.Command), statement[:120]
        kinds.add(type(parsed).__name__)
    assert {"Create", "Put", "Copy", "Merge", "Insert", "Update", "Drop", "Select"} <= kinds
    assert not any("OR REPLACE" in s.upper() for s in recording.statements)
    assert all("O'Brien" not in s and "injected" not in s for s in recording.statements)  # values never in SQL


def test_a_table_that_cannot_be_applied_names_batch_column_and_fix(sf: Any, tmp_path: Path) -> None:
    """A NOT NULL left on a non-key column (an older bootstrap) stops apply at that batch, saying how to go on."""
    _bootstrap(sf, tmp_path)
    sf.cursor().execute('ALTER TABLE "ITEMS" ALTER COLUMN "NAME" SET NOT NULL')
    write_batch(tmp_path, 1, {"shop.items": [row(1, 1, "c", **value(1))]})
    write_batch(tmp_path, 2, {"shop.items": [row(2, 2, "c")]})  # NAME is NULL
    with pytest.raises(DataError) as caught:
        apply.run(sf, StateDir(tmp_path))
    assert "batch b000000000002: MySQL table shop.items (Snowflake ITEMS)" in caught.value.message
    assert "NAME are NOT NULL" in caught.value.message
    assert caught.value.hint.startswith('ALTER TABLE "ITEMS" ALTER COLUMN "NAME" DROP NOT NULL')
    sf.cursor().execute('ALTER TABLE "ITEMS" ALTER COLUMN "NAME" DROP NOT NULL')
    assert apply.run(sf, StateDir(tmp_path)).applied == ["b000000000002"]


def test_keyless_batches_replace_every_copy_and_replay_harmlessly(sf: Any, tmp_path: Path) -> None:
    """Issue #24: a keyless table's batch names rows with their copy count (INSERT rows) or none (a DELETE).
    Rows are matched by every column, NULLs, VARIANT, ARRAY, BINARY and hostile text included."""
    schema = record_schema(tmp_path, "shop", "items", key=())
    opts = bootstrap.Options(soft_delete=True, history=True)
    plan = bootstrap.run(sf, bootstrap.targets_for([schema], opts), opts)
    assert plan.created == ["ITEMS"] and any("has no key" in n for n in plan.notes)
    bare = {"name": None, "amount": None, "big": None, "seen": None, "raw": None, "tags": None, "doc": None}
    write_batch(tmp_path, 1, {"shop.items": [row(1, 1, "c", **value(1))] * 3 + [row(2, 2, "c", **value(2))]
                              + [row(3, 3, "c", **bare)] * 2 + [row(4, 4, "c", **value(4))]})
    write_batch(tmp_path, 2, {"shop.items": [row(1, 5, "c", **value(1))] * 2 + [row(2, 6, "d", **value(2))]
                              + [row(3, 7, "d", **bare), row(5, 8, "c", **value(5))]})
    first = apply.run(sf, StateDir(tmp_path))
    assert first.applied == ["b000000000001", "b000000000002"]
    assert vars(first.tables["shop.items"]) == {"inserted": 10, "updated": 0, "deleted": 3 + 1 + 2}
    query = f'SELECT {COLS}, "_CDC_POSITION", "_CDC_OP" FROM "ITEMS" ORDER BY "ID", "_CDC_POSITION"'
    expected = [_expected(1, 5, "c")] * 2 + [_expected(4, 4, "c"), _expected(5, 8, "c")]
    assert rows(sf, query) == expected
    # As if killed after the DELETE and INSERT but before the bookkeeping insert: the replay changes nothing.
    sf.cursor().execute("DELETE FROM \"_CDC_APPLIED_BATCHES\" WHERE \"BATCH_ID\" = 'b000000000002'")
    again = apply.run(sf, StateDir(tmp_path))
    assert (again.applied, again.skipped) == (["b000000000002"], [])
    assert rows(sf, query) == expected


class _Resending(_Recording):
    """A connection whose cursors send each statement starting with `prefix` twice, as the connector does when a
    statement's answer is lost (an HTTP 500 or a reset link after the server ran it) and the server does not take
    the resent request for the one it ran: the second one meets what the first made."""

    def __init__(self, conn: Any, prefix: str = "CREATE TRANSIENT") -> None:
        super().__init__(conn)
        self.prefix = prefix

    def cursor(self) -> Any:
        cursor = super().cursor()
        run = cursor.execute

        def execute(statement: str, *args: Any, **kwargs: Any) -> Any:
            if statement.lstrip().upper().startswith(self.prefix):
                run(statement, *args, **kwargs)
            return run(statement, *args, **kwargs)

        cursor.execute = execute
        return cursor


def test_a_resent_staging_create_is_harmless(sf: Any, tmp_path: Path) -> None:
    """Seen in the soak with faults on the Snowflake link: the resent CREATE of a staging table failed as
    "already exists", a permanent error, and `cdc run --follow` ended."""
    _bootstrap(sf, tmp_path)
    _scenario(tmp_path)
    resending = _Resending(sf)
    summary = apply.run(resending, StateDir(tmp_path))
    assert summary.applied == ["b000000000001", "b000000000002"]
    # One staging table for the run (batch 2 reuses it after a TRUNCATE), its CREATE sent twice.
    assert sum(s.upper().startswith("CREATE TRANSIENT") for s in resending.statements) == 2
    assert [r[0] for r in rows(sf, 'SELECT "ID" FROM "ITEMS" ORDER BY "ID"')] == [2, 4, 5, 6, 7, 8, 30]


def test_a_resent_copy_is_caught_before_it_doubles_a_keyless_table(sf: Any, tmp_path: Path) -> None:
    """The 30-minute soak with faults on the Snowflake link had a batch's files loaded twice into its staging table
    (the keyed MERGE then failed). A keyless table's rows would have been inserted twice, silently. Apply must
    stop with a TransientError before merging anything, and a rerun must apply the batch exactly once."""
    from cdc.errors import TransientError

    schema = record_schema(tmp_path, "shop", "items", key=())
    opts = bootstrap.Options()
    bootstrap.run(sf, bootstrap.targets_for([schema], opts), opts)
    write_batch(tmp_path, 1, {"shop.items": [row(1, 1, "c", **value(1))] * 3 + [row(2, 2, "c", **value(2))]})
    with pytest.raises(TransientError) as caught:
        apply.run(_Resending(sf, "COPY INTO"), StateDir(tmp_path))
    assert "holds 8 rows, the batch 4" in caught.value.message
    assert rows(sf, 'SELECT COUNT(*) FROM "ITEMS"') == [(0,)]
    summary = apply.run(sf, StateDir(tmp_path))
    assert summary.applied == ["b000000000001"]
    assert rows(sf, 'SELECT "ID", COUNT(*) FROM "ITEMS" GROUP BY "ID" ORDER BY "ID"') == [(1, 3), (2, 1)]


def test_a_link_reset_mid_answer_is_transient_and_a_rerun_ends_exact(sf: Any, snowflake_env: dict[str, str],
                                                                     tmp_path: Path) -> None:
    """The soak with faults on the Snowflake link saw a reset in the middle of an answer end `cdc run --follow` with
    a traceback: the connector lets its HTTP library's ChunkedEncodingError through unwrapped. Every answer here is
    cut after 150 bytes, at login and at each statement: each must be a TransientError (exit 10, retried by run
    --follow), never a crash or a 'refused'; once the link heals, a rerun applies every batch exactly."""
    from cdc.errors import TransientError
    from tests.rig.faultproxy import FaultProxy

    _bootstrap(sf, tmp_path)
    _scenario(tmp_path)
    with FaultProxy(str(sf.host), int(sf.port)) as proxy:
        env = snowflake_env | {"SNOWFLAKE_HOST": proxy.host, "SNOWFLAKE_PORT": str(proxy.port)}
        proxy.reset_next([150] * 100)
        with pytest.raises(TransientError) as caught:  # the login itself
            connect(SnowflakeSettings(), env | {"SNOWFLAKE_LOGIN_TIMEOUT": "5"})
        assert "snow" not in caught.value.message  # the password is not echoed
        proxy.reset_next([])
        conn = connect(SnowflakeSettings(), env)
        hit = set()
        try:
            # The connection is kept alive across statements: a larger budget cuts a later statement's answer.
            for budget in (150, 3000, 9000):
                proxy.reset()  # the pooled idle connection: the next statement opens a doomed one
                proxy.reset_next([budget] + [150] * 100)
                with pytest.raises(TransientError) as caught:
                    apply.run(conn, StateDir(tmp_path))
                assert caught.value.exit_code == 10 and "did not answer" in caught.value.message
                hit.add(caught.value.message.split("`")[1])
            proxy.reset_next([])
            summary = apply.run(conn, StateDir(tmp_path))
        finally:
            conn.close()
    assert len(hit) == 3, hit  # three different statements were cut
    assert summary.applied == ["b000000000001", "b000000000002"]
    assert [r[0] for r in rows(sf, 'SELECT "ID" FROM "ITEMS" ORDER BY "ID"')] == [2, 4, 5, 6, 7, 8, 30]


def test_a_multi_table_batch_costs_three_statements_per_table_and_a_kept_applier_no_start(sf: Any,
                                                                                        tmp_path: Path) -> None:
    """Issue #25: a batch's round trips. Per table one staging CREATE (later batches: TRUNCATE), one COPY, one
    MERGE; per batch one PUT for every file, one COUNT query over the staging tables (a resent COPY) and the
    bookkeeping INSERT (+ REMOVE, which fakesnow refuses once: not asked again). Before: CREATE, PUT, COPY, MERGE
    and DROP per table. A kept Applier (cdc run --follow) pays start()'s reads once: its next run sends only the
    new batch's statements. Target rows stay exact throughout."""
    tables = [f"t{i}" for i in range(4)]
    schemas = [record_schema(tmp_path, "shop", t) for t in tables]
    opts = bootstrap.Options()
    bootstrap.run(sf, bootstrap.targets_for(schemas, opts), opts)
    write_batch(tmp_path, 1, {f"shop.{t}": [row(i, i, "c", **value(i)) for i in range(1, 4)] for t in tables})
    write_batch(tmp_path, 2, {f"shop.{t}": [row(1, 10, "d"), row(2, 11, "u", **value(12))] for t in tables})
    state = StateDir(tmp_path)
    applier = apply.Applier(sf, state)
    seen: list[int] = []
    first = apply.run(sf, state, applier=applier, on_batch=lambda *_: seen.append(applier.cursor.statements))
    assert first.applied == ["b000000000001", "b000000000002"]
    assert seen[1] - seen[0] == 3 * len(tables) + 3  # batch 2: PUT, 4 x (TRUNCATE, COPY, MERGE), COUNT, INSERT
    write_batch(tmp_path, 3, {f"shop.{t}": [row(3, 12, "u", **value(13)), row(4, 13, "c", **value(4))]
                              for t in tables[:3]})
    third = apply.run(sf, state, applier=applier)
    assert (third.applied, third.skipped) == (["b000000000003"], [])
    assert third.statements == 3 * 3 + 3  # no start(): no schema read, probe or bookkeeping read
    for t in tables:
        got = rows(sf, f'SELECT "ID", "NAME", "_CDC_POSITION" FROM "{t.upper()}" ORDER BY "ID"')
        touched = t != tables[3]
        assert got == [(2, value(12)["name"], position(11)),
                       (3, value(13 if touched else 3)["name"], position(12 if touched else 3))] + (
            [(4, value(4)["name"], position(13))] if touched else [])
    applier.close()
    assert not [r for r in rows(sf, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES") if r[0].startswith("_CDC_STG_")]


def test_a_run_reports_as_skipped_only_batches_after_its_checkpoint(sf: Any, tmp_path: Path) -> None:
    """Batches up to the apply checkpoint were applied by earlier runs: listing them as skipped in every run made
    each `cdc run --follow` apply line as long as the run's whole history (a batch every few seconds)."""
    _bootstrap(sf, tmp_path)
    _scenario(tmp_path)
    state = StateDir(tmp_path)
    assert apply.run(sf, state).applied == ["b000000000001", "b000000000002"]
    write_batch(tmp_path, 3, {"shop.items": [row(4, 30, "d")]})
    third = apply.run(sf, state)
    assert (third.applied, third.skipped, third.to_dict()["skipped"]) == (["b000000000003"], [], [])
    # As if another run applied batch 4 and was killed before its checkpoint: in the bookkeeping table, after ours.
    write_batch(tmp_path, 4, {"shop.items": [row(5, 31, "d")]})
    apply.run(sf, state)
    state.checkpoint_path("snowflake-apply").unlink()  # it never moves back: written anew as that run left it
    apply.advance_checkpoint(state, "b000000000003")
    fourth = apply.run(sf, state)
    assert (fourth.applied, fourth.skipped, fourth.last_batch) == ([], ["b000000000004"], "b000000000004")


def test_a_kept_applier_reads_only_the_new_batches_manifests(sf: Any, tmp_path: Path) -> None:
    """A sealed batch's manifest never changes: a kept Applier (`cdc run --follow`) reads each once. Reading all of
    them at every pass made each cycle's apply, and the run's pending-batch checks, as slow as the run was long
    (2,000 batches, under two hours of a busy --follow: 0.45-0.7 s a look, several looks a cycle)."""
    from cdc.pipeline.run_stages import pending_batches

    _bootstrap(sf, tmp_path)
    _scenario(tmp_path)
    state = StateDir(tmp_path)
    applier = apply.Applier(sf, state)
    try:
        assert apply.run(sf, state, applier=applier).applied == ["b000000000001", "b000000000002"]
        # Applied long ago, its manifest now unreadable: a run that read it again would stop on it.
        state.manifest_path("b000000000001").write_text("{not json", encoding="utf-8")
        write_batch(tmp_path, 3, {"shop.items": [row(4, 30, "d")]})
        assert pending_batches(state) == ["b000000000003"]
        assert apply.run(sf, state, applier=applier).applied == ["b000000000003"]
    finally:
        applier.close()
    assert [r[0] for r in rows(sf, 'SELECT "ID" FROM "ITEMS" ORDER BY "ID"')] == [2, 5, 6, 7, 8, 30]
