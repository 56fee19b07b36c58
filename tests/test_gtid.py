"""GTID sets of both flavours: parse and print, add one transaction, containment, what is missing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.errors import UsageError
from cdc.gtid import GtidSet

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
OTHER = "0a0b0c0d-0000-1111-2222-333344445555"


@pytest.mark.parametrize(("text", "printed"), [
    ("", ""),
    ("0-1-57", "0-1-57"),
    ("1-2-9,0-1-57", "0-1-57,1-2-9"),
    ("0-1-57,0-2-60,0-1-12", "0-2-60"),  # gtid_binlog_state lists a domain once per server: the highest counts
    (f"{UUID.upper()}:1-5:7,\n{OTHER}:3", f"{OTHER}:3,{UUID}:1-5:7"),
    (f"{UUID}:1-5:6-9", f"{UUID}:1-9"),
    (UUID.replace("-", "") + ":4", f"{UUID}:4"),
])
def test_parse_prints_canonically(text: str, printed: str) -> None:
    assert str(GtidSet.parse(text)) == printed
    assert GtidSet.parse(printed) == GtidSet.parse(text)


@pytest.mark.parametrize("text", ["0-1", "zz:1-5", f"{UUID}:5-3", f"{UUID}:", f"{UUID}:a-b", "0-1-x"])
def test_malformed_sets_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="GTID set"):
        GtidSet.parse(text)


def test_mariadb_domains_hold_positions() -> None:
    state = GtidSet.parse("0-1-57")
    state.add("1-2-3")
    state.add("0-2-58")  # a new primary goes on in the domain with its own server id
    assert str(state) == "0-2-58,1-2-3"
    assert state.contains_gtid("0-1-12") and state.contains_gtid("0-2-58") and not state.contains_gtid("0-1-59")
    assert state.contains(GtidSet.parse("0-1-40,1-2-3")) and not state.contains(GtidSet.parse("2-1-1"))
    assert GtidSet.parse("0-1-90").describe_missing(GtidSet.parse("0-1-95,3-1-2")) == (
        "domain 0 seq 91..95 (up to 0-1-95), domain 3 seq 1..2 (up to 3-1-2)")
    assert GtidSet.parse("0-1-94").describe_missing(GtidSet.parse("0-1-95")) == "0-1-95"


def test_mysql_sets_hold_intervals() -> None:
    state = GtidSet.parse(f"{UUID}:1-57:60-70")
    for number in (58, 59):
        state.add(f"{UUID}:{number}")
    state.add("00000000-0000-0000-0000-000000000000:0")  # an anonymous transaction is in no set
    state.add(None)
    assert str(state) == f"{UUID}:1-70"
    state.remove(f"{UUID}:30")
    assert str(state) == f"{UUID}:1-29:31-70"
    assert GtidSet.parse(f"{UUID}:1-10").describe_missing(GtidSet.parse(f"{UUID}:5-12,{OTHER}:1")) == (
        f"{OTHER}:1, {UUID}:11-12")


@settings(deadline=None)  # 400 set operations an example: a loaded 2-core machine takes over 200 ms for some
@given(st.sets(st.integers(1, 200)), st.sets(st.integers(1, 200)))
def test_mysql_set_arithmetic_matches_python_sets(held: set[int], wanted: set[int]) -> None:
    have = GtidSet()
    for number in sorted(held, key=lambda n: (n * 7919) % 211):  # any order
        have.add(f"{UUID}:{number}")
    want = GtidSet()
    for number in wanted:
        want.add(f"{UUID}:{number}")
    assert all(have.contains_gtid(f"{UUID}:{n}") == (n in held) for n in range(1, 201))
    assert have.contains(want) == wanted.issubset(held)
    assert GtidSet.parse(str(have)) == have
    missing = have.missing(want)
    assert {n for n in range(1, 201) if missing.contains_gtid(f"{UUID}:{n}")} == wanted - held


@pytest.mark.parametrize(("text", "printed"), [
    # MySQL 8.3+ tagged GTIDs: a tag names the intervals after it; the untagged ones print first, tags sorted.
    (f"{UUID}:1-5:Batch_1:1-3:7", f"{UUID}:1-5:batch_1:1-3:7"),
    (f"{UUID}:zeta:4:alpha:1-2:9", f"{UUID}:alpha:1-2:9:zeta:4"),
    (f"{UUID}:t:1-2,{OTHER}:1-9,{UUID}:1-4:t:3", f"{OTHER}:1-9,{UUID}:1-4:t:1-3"),
    (f"{UUID}:_x:5", f"{UUID}:_x:5"),
])
def test_tagged_mysql_sets_parse_and_print_as_mysql_does(text: str, printed: str) -> None:
    assert str(GtidSet.parse(text)) == printed
    assert GtidSet.parse(printed) == GtidSet.parse(text)


@pytest.mark.parametrize("text", [f"{UUID}:tag", f"{UUID}:1-3:tag", f"{UUID}:1tag:3", f"{UUID}:{'t' * 33}:1"])
def test_a_tag_without_intervals_or_with_a_bad_name_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match="GTID set"):
        GtidSet.parse(text)


def test_tagged_gtids_are_their_own_sequence() -> None:
    state = GtidSet.parse(f"{UUID}:1-10:batch:1-3")
    assert state.contains_gtid(f"{UUID}:batch:3") and not state.contains_gtid(f"{UUID}:batch:4")
    assert state.contains_gtid(f"{UUID}:BATCH:2")  # tags are case-insensitive
    state.add(f"{UUID}:batch:4")
    state.add(f"{UUID}:other:1")
    assert str(state) == f"{UUID}:1-10:batch:1-4:other:1"
    assert not state.contains(GtidSet.parse(f"{UUID}:batch:1-5"))
    assert GtidSet.parse(f"{UUID}:1-10").describe_missing(state) == f"{UUID}:batch:1-4, {UUID}:other:1"
    state.remove(f"{UUID}:batch:2")
    assert str(state) == f"{UUID}:1-10:batch:1:3-4:other:1"
    assert GtidSet.parse(f"{UUID}:1-3,{OTHER}:1-2:a:1").missing(GtidSet.parse(f"{OTHER}:1-5:a:1-2")) == \
        GtidSet.parse(f"{OTHER}:3-5:a:2")
