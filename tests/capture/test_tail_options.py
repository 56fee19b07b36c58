"""Large transactions spill, a crash between seal and checkpoint is recovered, filters, --stdout, --json."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cdc.capture import txn
from cdc.capture.rowblock import line_template
from cdc.capture.txn import TransactionBuffer, split_line
from cdc.changelog import encode_line, list_segments
from tests.capture.conftest import binlog_start, changelog_bytes, changelog_lines, tail_once
from tests.hash_key import hmac_hex
from tests.rig import MariaDB


def test_transaction_buffer_spills_and_completes_lines_exactly(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(txn, "_SPILL_CHUNK", 37)  # read back in chunks that end inside lines
    buffer = TransactionBuffer(tmp_path / "tmp", spill_bytes=500)
    expected = []
    for row in range(50):
        body = {"after": {"id": row, "s": "tab\there\nnl"}, "before": None, "db": "d", "key": {"id": row}, "op": "c",
                "position": f"0000000001:000000000100:b{row:012d}"}
        src = {"file": "mariadb-bin.000001", "gtid": "0-1-5", "pos": 100, "row": row, "server_id": 1}
        buffer.add(body["position"], line_template(*split_line(body, src, "t\"1")), 1)
        full = {**body, "src": {**src, "xid": 77}, "table": 't"1', "ts": "2023-11-14T22:13:20Z", "v": 1}
        expected.append(encode_line(full))
    assert buffer.spilled and list((tmp_path / "tmp").glob("txn-*.spill"))
    blocks = list(buffer.complete(77, 1_700_000_000))
    assert b"".join(blocks) == b"".join(expected) and all(block.endswith(b"\n") for block in blocks)
    buffer.clear()
    assert not list((tmp_path / "tmp").glob("*"))


def test_a_2000_row_statement_spills_and_matches(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.big (id INT PRIMARY KEY, pad VARCHAR(255))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.big SELECT seq, REPEAT('x', 200) FROM `{fresh_db}`.seq_1_to_2000")
    tail_once(mariadb, tmp_path / "spilled", fresh_db, start, spill_bytes=64 * 1024)
    tail_once(mariadb, tmp_path / "memory", fresh_db, start)
    lines = changelog_lines(tmp_path / "spilled")
    assert len(lines) == 2001 and len({line["src"]["pos"] for line in lines[1:]}) > 20  # dozens of row events
    assert changelog_bytes(tmp_path / "spilled") == changelog_bytes(tmp_path / "memory")


def test_segment_sealed_but_not_checkpointed_is_not_written_twice(mariadb: MariaDB, fresh_db: str,
                                                                   tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    state = tmp_path / "state"
    tail_once(mariadb, state, fresh_db, start)
    old_checkpoint = (state / "tail.json").read_bytes()
    for key in range(5):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES ({key})")
    tail_once(mariadb, state, fresh_db, segment_bytes=1)  # five one-transaction segments
    # The crash: segments sealed, tail.json still the old one.
    (state / "tail.json").write_bytes(old_checkpoint)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (9)")
    tail_once(mariadb, state, fresh_db)
    tail_once(mariadb, tmp_path / "clean", fresh_db, start)
    assert changelog_bytes(state) == changelog_bytes(tmp_path / "clean")
    assert json.loads((state / "tail.json").read_text())["last_segment"] == list_segments(state / "changelog")[-1].name


def test_filters_exclude_and_hash_columns(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.people (id INT PRIMARY KEY, email VARCHAR(50), ssn CHAR(11))")
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.audit (id INT PRIMARY KEY)")
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.tmp_x (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.people VALUES (1, 'a@example.com', '123-45-6789')")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.audit VALUES (1)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.tmp_x VALUES (1)")
    from cdc.capture import Filters, StartRequest, TailOptions, run_tail
    from tests.capture.conftest import settings_for

    filters = Filters(tables=(f"{fresh_db}.*",), exclude_tables=("*.tmp_*",),
                      exclude_columns=(f"{fresh_db}.people.ssn",), hash_columns=(f"{fresh_db}.people.email",))
    run_tail(settings_for(mariadb, tmp_path), TailOptions(StartRequest(position=start), filters=filters))
    rows = [line for line in changelog_lines(tmp_path) if line["op"] != "ddl"]
    assert [(line["table"], line["after"]) for line in rows] == [
        ("people", {"id": 1, "email": hmac_hex(b"a@example.com")}),
        ("audit", {"id": 1}),
    ]
    assert b"123-45-6789" not in changelog_bytes(tmp_path) and b"a@example.com" not in changelog_bytes(tmp_path)


def test_stdout_and_json(cli: Callable[..., Any], mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    piped = cli("tail", "--stdout", "--databases", fresh_db, "--start-position", start)
    assert piped.exit_code == 0, piped.output
    assert piped.stdout.encode() == changelog_bytes(tmp_path / "state")
    shutil.rmtree(tmp_path / "state")
    scripted = cli("tail", "--json", "--databases", fresh_db, "--start-position", start)
    summary = json.loads(scripted.stdout)
    assert (summary["transactions"], summary["rows"], summary["origin"]) == (2, 1, "--start-position")
    assert summary["end"] == summary["target"]
    assert orjson.loads(changelog_bytes(tmp_path / "state").splitlines()[1])["after"] == {"id": 1}


def test_start_gtid_starts_after_that_transaction(cli: Callable[..., Any], mariadb: MariaDB, fresh_db: str) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    gtid = str(mariadb.variable("gtid_binlog_pos")).split(",")[-1]
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2)")
    result = cli("tail", "--stdout", "--databases", fresh_db, "--start-gtid", gtid)
    assert result.exit_code == 0, result.output
    assert [orjson.loads(line)["key"] for line in result.stdout.splitlines()] == [{"id": 2}]


def test_rename_across_column_rules_stops_tail(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    """A table renamed to a name its exclude/hash rules do not match would be written in clear: refused (#30)."""
    import pytest

    from cdc.capture import Filters, StartRequest, TailOptions, run_tail
    from cdc.errors import DataError
    from tests.capture.conftest import settings_for

    start = binlog_start(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.people (id INT PRIMARY KEY, ssn CHAR(11))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.people VALUES (1, '123-45-6789')")
    mariadb.execute(f"RENAME TABLE `{fresh_db}`.people TO `{fresh_db}`.persons")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.persons VALUES (2, '987-65-4321')")
    filters = Filters(databases=(fresh_db,), exclude_columns=(f"{fresh_db}.people.ssn",))
    with pytest.raises(DataError, match="exclude_columns/hash_columns differ"):
        run_tail(settings_for(mariadb, tmp_path), TailOptions(StartRequest(position=start), filters=filters))
    assert b"987-65-4321" not in changelog_bytes(tmp_path)
