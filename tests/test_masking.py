"""Column rules: the masked schema downstream stages see, and rules fixed per state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.errors import ExitCode, UsageError
from cdc.masking import RULES_FILE, ColumnRules, bind_rules, masked_history, read_rules
from cdc.schema import Column, SchemaHistory, TableSchema
from cdc.state import StateDir
from tests.hash_key import KEY

PEOPLE = TableSchema("shop", "people", (
    Column("id", "int(11)", "int", nullable=False),
    Column("email", "varchar(200)", "varchar", charset="utf8mb4"),
    Column("score", "decimal(18,4)", "decimal", precision=18, scale=4),
    Column("ssn", "char(11)", "char", charset="ascii"),
), ("id",), position="000001:0000000004:0000")


def test_mask_drops_excluded_and_retypes_hashed_columns() -> None:
    rules = ColumnRules(exclude_columns=("shop.people.ssn",), hash_columns=("shop.*.email", "shop.people.score"))
    masked = rules.mask(PEOPLE)
    assert masked.column_names == ["id", "email", "score"]
    assert masked.column("email") == Column("email", "char(64)", "char", nullable=True, charset="ascii")
    assert masked.column("score").type == "char(64)" and masked.column("score").precision is None
    assert masked.column("id") == PEOPLE.column("id") and masked.primary_key == ("id",)
    assert rules.mask(TableSchema("other", "people", PEOPLE.columns, ("id",))) == \
        TableSchema("other", "people", PEOPLE.columns, ("id",))


def test_rules_refuse_a_column_both_excluded_and_hashed_and_bad_specs() -> None:
    with pytest.raises(UsageError, match="both excluded and hashed"):
        ColumnRules(("shop.people.ssn",), ("shop.people.ssn",))
    with pytest.raises(UsageError, match="not DB.TABLE.COLUMN"):
        ColumnRules(("people.ssn",))


def test_first_capture_fixes_the_rules_and_a_different_run_is_refused(tmp_path: Path) -> None:
    state = StateDir(tmp_path).ensure()
    rules = ColumnRules(("shop.people.ssn",), ("shop.people.email",), KEY)
    bind_rules(state, rules)
    bind_rules(state, ColumnRules(("shop.people.ssn", "shop.people.ssn"), ("shop.people.email",), KEY))  # same set
    before = (tmp_path / RULES_FILE).read_bytes()
    with pytest.raises(UsageError) as refused:
        bind_rules(state, ColumnRules(("shop.people.ssn",)))  # a restart that forgot --hash-columns
    assert refused.value.exit_code == ExitCode.USAGE
    assert "hash_columns=['shop.people.email']" in refused.value.message and "hash_columns=[]" in refused.value.message
    assert (tmp_path / RULES_FILE).read_bytes() == before
    assert read_rules(state) == ColumnRules(("shop.people.ssn",), ("shop.people.email",))


def test_read_rules_of_an_uncaptured_state_is_empty_and_a_corrupt_file_is_an_error(tmp_path: Path) -> None:
    state = StateDir(tmp_path).ensure()
    assert read_rules(state) == ColumnRules()
    (tmp_path / RULES_FILE).write_text('{"version": 1, "exclude_columns": ["no-dots"], "hash_columns": []}')
    with pytest.raises(UsageError, match="corrupt"):
        read_rules(state)


def test_masked_history_is_what_downstream_sees_and_is_read_only(tmp_path: Path) -> None:
    state = StateDir(tmp_path).ensure()
    SchemaHistory(state.schema).record(PEOPLE)
    bind_rules(state, ColumnRules(("shop.people.ssn",), ("shop.people.score",), KEY))
    history = masked_history(state)
    assert history.latest("shop", "people").column_names == ["id", "email", "score"]
    assert SchemaHistory(state.schema).latest("shop", "people") == PEOPLE  # capture keeps the real types
    with pytest.raises(RuntimeError, match="read-only"):
        history.record(PEOPLE)


def test_rules_on_key_columns_are_refused_and_a_table_without_a_key_is_keyed_by_every_column() -> None:
    with pytest.raises(UsageError, match=r"key column\(s\) \['id'\]"):
        ColumnRules(hash_columns=("shop.people.id",)).check_key(PEOPLE)
    ColumnRules(("shop.people.ssn",), ("shop.people.email",)).check_key(PEOPLE)  # non-key columns are fine
    keyless = TableSchema("shop", "log", PEOPLE.columns, ())
    with pytest.raises(UsageError, match=r"key column\(s\) \['email'\]"):
        ColumnRules(hash_columns=("shop.log.email",)).check_key(keyless)
