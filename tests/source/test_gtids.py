"""Where a captured GTID state resumes on another server: the scan over SHOW BINLOG EVENTS rows.

MariaDB's path runs against real servers in tests/capture/test_tail_rebase.py; here the same scan is fed the
rows MySQL 8 prints (Previous_gtids, 'SET @@SESSION.GTID_NEXT= ...'), and MariaDB cases a single replication
stream cannot produce on demand (domains interleaved differently on the two servers).
"""

from __future__ import annotations

from typing import Any

import pytest

from cdc.errors import PositionError
from cdc.gtid import GtidSet
from cdc.source.binlog import Position
from cdc.source.gtids import EventRow, Resume, find_resume, locate, state_at

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
NEW = "0a0b0c0d-0000-1111-2222-333344445555"


def mysql_file(name: str, previous: str, gtids: list[str]) -> list[EventRow]:
    """A MySQL 8 binlog file as SHOW BINLOG EVENTS prints it: one single-row transaction per GTID."""
    rows = [EventRow(name, 4, "Format_desc", 126, "Server ver: 8.0.36, Binlog ver: 4"),
            EventRow(name, 126, "Previous_gtids", 197, previous)]
    pos = 197
    for gtid in gtids:
        info = "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'" if gtid == "anonymous" else f"SET @@SESSION.GTID_NEXT= '{gtid}'"
        kind = "Anonymous_Gtid" if gtid == "anonymous" else "Gtid"
        for event, size, text in ((kind, 79, info), ("Query", 80, "BEGIN"), ("Table_map", 60, "table_id: 91 (shop.t)"),
                                  ("Write_rows", 50, "table_id: 91 flags: STMT_END_F"), ("Xid", 31, "COMMIT /* xid=7 */")):
            rows.append(EventRow(name, pos, event, pos + size, text))
            pos += size
    return rows


def mariadb_file(name: str, gtid_list: str, gtids: list[str]) -> list[EventRow]:
    rows = [EventRow(name, 4, "Format_desc", 256, "Server ver: 10.11.19-MariaDB-log, Binlog ver: 4"),
            EventRow(name, 256, "Gtid_list", 299, f"[{gtid_list}]"),
            EventRow(name, 299, "Binlog_checkpoint", 344, name)]
    pos = 344
    for gtid in gtids:
        for event, size, text in (("Gtid", 42, f"BEGIN GTID {gtid} cid=12"), ("Table_map", 55, "table_id: 18 (d.t)"),
                                  ("Write_rows_v1", 51, "table_id: 18 flags: STMT_END_F"), ("Xid", 31, "COMMIT /* xid=9 */")):
            rows.append(EventRow(name, pos, event, pos + size, text))
            pos += size
    return rows


def start_of(rows: list[EventRow], gtid: str) -> Position:
    row = next(r for r in rows if r.kind == "Gtid" and gtid in r.info)
    return Position(row.file, row.pos)


def test_mysql_resumes_at_the_first_transaction_not_captured() -> None:
    rows = mysql_file("binlog.000002", f"{UUID}:1-40", [f"{UUID}:{n}" for n in range(41, 46)] + [f"{NEW}:1", f"{NEW}:2"])
    resume = find_resume(rows, GtidSet.parse(f"{UUID}:1-45"), GtidSet.parse(f"{UUID}:1-40"), "the new server")
    assert resume == Resume(start_of(rows, f"{NEW}:1"))


def test_mysql_caught_up_resumes_at_the_end() -> None:
    rows = mysql_file("binlog.000002", f"{UUID}:1-40", [f"{UUID}:41"])
    resume = find_resume(rows, GtidSet.parse(f"{UUID}:1-41"), GtidSet.parse(f"{UUID}:1-40"), "the new server")
    assert resume == Resume(Position("binlog.000002", rows[-1].end))


def test_mysql_transactions_captured_out_of_order_are_skipped_after_the_resume_point() -> None:
    rows = mysql_file("binlog.000001", "", [f"{UUID}:1", f"{UUID}:3", f"{UUID}:2", f"{UUID}:4"])
    resume = find_resume(rows, GtidSet.parse(f"{UUID}:1-2"), GtidSet(), "the new server")
    assert resume == Resume(start_of(rows, f"{UUID}:3"), (f"{UUID}:2",))


@pytest.mark.parametrize(("seen", "gtids"), [(f"{UUID}:1-2", [f"{UUID}:1", "anonymous", f"{UUID}:2"]),
                                             ("", ["anonymous", f"{UUID}:1"])])
def test_mysql_anonymous_transactions_before_the_resume_point_cannot_be_matched(seen: str, gtids: list[str]) -> None:
    rows = mysql_file("binlog.000001", "", gtids)
    with pytest.raises(PositionError, match="anonymous transaction at binlog.000001:"):
        find_resume(rows, GtidSet.parse(seen), GtidSet(), "the new server")


def test_mysql_state_at_a_position_after_an_anonymous_transaction_is_unknown() -> None:
    rows = mysql_file("binlog.000001", "", [f"{UUID}:1", "anonymous", f"{UUID}:2"])
    conn = FakeMySQL(f"{UUID}:1-2", {"binlog.000001": rows})
    assert state_at(conn, False, start_of(rows, f"{UUID}:1")) == GtidSet()  # type: ignore[arg-type]
    assert state_at(conn, False, start_of(rows, f"{UUID}:2")) is None  # type: ignore[arg-type]


def test_mysql_a_captured_transaction_missing_from_the_binlogs_is_named() -> None:
    rows = mysql_file("binlog.000001", "", [f"{UUID}:1", f"{UUID}:3"])
    with pytest.raises(PositionError) as caught:
        find_resume(rows, GtidSet.parse(f"{UUID}:1-3"), GtidSet(), "the new server")
    assert f"lack transactions cdc already captured: {UUID}:2" in caught.value.message


def test_mariadb_domains_interleaved_differently_resume_early_and_skip_what_was_captured() -> None:
    # The old primary applied 0-1-5 and 1-1-3 before cdc's checkpoint; the new one wrote 1-1-3 after 0-1-6.
    rows = mariadb_file("mariadb-bin.000001", "0-1-4,1-1-2", ["0-1-5", "0-1-6", "1-1-3", "0-2-7"])
    resume = find_resume(rows, GtidSet.parse("0-1-5,1-1-3"), GtidSet.parse("0-1-4,1-1-2"), "the new server")
    assert resume == Resume(start_of(rows, "0-1-6"), ("1-1-3",))


def test_mariadb_same_sequence_from_another_server_is_another_history() -> None:
    rows = mariadb_file("mariadb-bin.000001", "", ["0-1-1", "0-3-2", "0-3-3"])
    with pytest.raises(PositionError, match="has 0-3-2 at mariadb-bin.000001:.* where cdc captured 0-1-2"):
        find_resume(rows, GtidSet.parse("0-1-2"), GtidSet(), "the new server")


def test_mariadb_passing_a_domain_without_its_last_captured_transaction_is_refused() -> None:
    rows = mariadb_file("mariadb-bin.000001", "", ["0-1-1", "0-1-3"])
    with pytest.raises(PositionError, match="has 0-1-3 at .* but never 0-1-2"):
        find_resume(rows, GtidSet.parse("0-1-2"), GtidSet(), "the new server")


class FakeMySQL:
    """A connection that answers the statements a MySQL 8 server would; it records what it was asked."""

    def __init__(self, executed: str, files: dict[str, list[EventRow]]) -> None:
        self.executed, self.files = executed, files
        self.sql: list[str] = []

    def cursor(self, *_: Any) -> FakeCursor:
        return FakeCursor(self)


class FakeCursor:
    def __init__(self, conn: FakeMySQL) -> None:
        self.conn = conn
        self.rows: list[dict[str, Any]] = []

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def execute(self, sql: str, params: Any = None) -> None:
        self.conn.sql.append(sql if params is None else f"{sql} {params}")
        if sql == "SELECT @@GLOBAL.gtid_executed AS g":
            self.rows = [{"g": self.conn.executed}]
        elif sql == "SHOW BINARY LOGS":
            self.rows = [{"Log_name": name, "File_size": 0} for name in self.conn.files]
        elif sql == "SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s":
            file, start, limit = params
            rows = [r for r in self.conn.files[file] if r.pos >= start][:limit]
            self.rows = [{"Log_name": r.file, "Pos": r.pos, "Event_type": r.kind, "End_log_pos": r.end, "Info": r.info}
                         for r in rows]
        else:
            raise AssertionError(f"unexpected statement {sql}")

    def fetchall(self) -> list[dict[str, Any]]:
        return self.rows

    def __iter__(self) -> Any:
        return iter(self.rows)


def test_mysql_locate_starts_in_the_last_file_inside_the_captured_state() -> None:
    files = {"binlog.000001": mysql_file("binlog.000001", "", [f"{UUID}:{n}" for n in range(1, 11)]),
             "binlog.000002": mysql_file("binlog.000002", f"{UUID}:1-10", [f"{UUID}:11", f"{NEW}:1"]),
             "binlog.000003": mysql_file("binlog.000003", f"{NEW}:1,{UUID}:1-11", [f"{NEW}:2"])}
    conn = FakeMySQL(f"{UUID}:1-11,\n{NEW}:1-2", files)
    assert locate(conn, False, GtidSet.parse(f"{UUID}:1-11"), "the new server") == Resume(  # type: ignore[arg-type]
        start_of(files["binlog.000002"], f"{NEW}:1"))
    # The first file is read for its header only (it starts before the captured state's end).
    assert [sql for sql in conn.sql if "'binlog.000001'" in sql] == [
        "SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s ('binlog.000001', 4, 6)"]
    assert state_at(conn, False, start_of(files["binlog.000002"], f"{NEW}:1")) == GtidSet.parse(  # type: ignore[arg-type]
        f"{UUID}:1-11")


def test_mysql_locate_refuses_what_the_server_does_not_have_or_purged() -> None:
    files = {"binlog.000007": mysql_file("binlog.000007", f"{UUID}:1-20", [f"{UUID}:21"])}
    with pytest.raises(PositionError, match=f"does not have every transaction cdc already captured: {UUID}:22-23"):
        locate(FakeMySQL(f"{UUID}:1-21", files), False, GtidSet.parse(f"{UUID}:1-23"), "the new server")  # type: ignore[arg-type]
    with pytest.raises(PositionError, match=f"its oldest binlog binlog.000007 starts after {UUID}:16-20"):
        locate(FakeMySQL(f"{UUID}:1-21", files), False, GtidSet.parse(f"{UUID}:1-15"), "the new server")  # type: ignore[arg-type]


def test_a_scan_longer_than_a_page_reads_page_after_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cdc.source.gtids._PAGE", 4)
    files = {"binlog.000001": mysql_file("binlog.000001", "", [f"{UUID}:{n}" for n in range(1, 9)] + [f"{NEW}:1"])}
    conn = FakeMySQL(f"{UUID}:1-8,{NEW}:1", files)
    resume = locate(conn, False, GtidSet.parse(f"{UUID}:1-8"), "the new server")  # type: ignore[arg-type]
    assert resume == Resume(start_of(files["binlog.000001"], f"{NEW}:1"))
    assert len([sql for sql in conn.sql if sql.startswith("SHOW BINLOG EVENTS")]) > 10


def test_mysql_tagged_gtids_resume_as_their_own_sequence() -> None:
    """MySQL 8.3+: `uuid:tag:n` is another transaction than `uuid:n`; Previous_gtids spells the tags inside."""
    gtids = [f"{UUID}:41", f"{UUID}:batch:3", f"{UUID}:42", f"{UUID}:batch:4"]
    rows = mysql_file("binlog.000002", f"{UUID}:1-40:batch:1-2", gtids)
    seen = GtidSet.parse(f"{UUID}:1-41:batch:1-3")
    resume = find_resume(rows, seen, GtidSet.parse(f"{UUID}:1-40:batch:1-2"), "the new server")
    assert resume == Resume(start_of(rows, f"{UUID}:42"))
    later = GtidSet.parse(f"{UUID}:1-41:batch:1-4")  # a tagged transaction captured after the resume point: skipped
    assert find_resume(rows, later, GtidSet.parse(f"{UUID}:1-40:batch:1-2"), "x") == Resume(
        start_of(rows, f"{UUID}:42"), (f"{UUID}:batch:4",))
