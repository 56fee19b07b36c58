"""cdc snapshot against the session's throwaway MariaDB: exact values, hostile names, keys, locks, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cdc.changelog import decode_line, encode_line, list_segments, position_string, segment_name
from cdc.errors import PositionError, PreconditionError, UsageError
from cdc.schema import ForeignKey, SchemaHistory
from cdc.snapshot.run import SnapshotRequest, read_checkpoint, run_snapshot
from cdc.source.tables import prepare_session
from cdc.state import StateDir, read_json, write_json_atomic
from tests.capture import workload
from tests.rig import MariaDB
from tests.snapshot.support import app, changelog_lines, make_settings, mysql_args, state  # noqa: F401

HOSTILE_TABLE = "we`ird 'tab\"le' select ü"
HOSTILE_COLUMNS = ("k`1 key", "order", "naïve \"c\"")


def _hostile_table(mariadb: MariaDB, db: str, rows: int) -> None:
    k1, k2, c = (f"`{n.replace('`', '``')}`" for n in HOSTILE_COLUMNS)
    table = f"`{db}`.`{HOSTILE_TABLE.replace('`', '``')}`"
    mariadb.execute(f"CREATE TABLE {table} ({k1} INT NOT NULL, {k2} VARCHAR(20) NOT NULL, {c} TEXT, "
                    f"PRIMARY KEY ({k1}, {k2}))")
    values = [(i // 3, f"o'{i % 3}`", workload.HOSTILE_TEXT[i % len(workload.HOSTILE_TEXT)]) for i in range(rows)]
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", values)


def test_all_types_equal_the_oracle(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    with mariadb.connect() as conn:
        workload.create_all_types_table(conn, fresh_db)
        workload.run_workload(conn, fresh_db, seed=11, transactions=60)
        expected = workload.expected_rows(conn, fresh_db, workload.TABLE)
    settings = make_settings(mariadb, state, tables=(f"{fresh_db}.{workload.TABLE}",))

    summary = run_snapshot(settings, SnapshotRequest(chunk_size=7))

    lines = changelog_lines(state)
    assert workload.replay(lines, fresh_db, workload.TABLE) == expected
    for segment in list_segments(state / "changelog"):  # the hot loop's hand-built lines are canonical
        for raw in segment.read_bytes().splitlines(keepends=True):
            assert encode_line(decode_line(raw)) == raw
    assert len(lines) == len(expected) == summary.rows
    assert summary.chunks == -(-len(expected) // 7)
    sizes = [len(segment.read_bytes().splitlines()) for segment in list_segments(state / "changelog")]
    assert sizes == [7] * (len(expected) // 7) + ([len(expected) % 7] if len(expected) % 7 else [])
    h = summary.checkpoint.handover
    assert [line["position"] for line in lines] == [position_string(h.file, h.pos, n, snapshot=True)
                                                    for n in range(len(lines))]
    first = lines[0]
    assert first["op"] == "r" and first["before"] is None and first["v"] == 1
    assert first["key"] == {"id": first["after"]["id"]}
    assert first["src"] == {"file": h.file, "gtid": h.gtid, "pos": h.pos, "row": 0,
                            "server_id": int(mariadb.variable("server_id")), "xid": None}
    assert first["ts"] == summary.checkpoint.started_at and first["ts"].endswith("Z")
    checkpoint = read_json(state / "snapshot.json")
    assert checkpoint is not None and checkpoint["status"] == "done" and checkpoint["version"] == 1
    assert checkpoint["handover"] == {"file": h.file, "pos": h.pos, "gtid": h.gtid}
    assert (h.file, h.pos) == mariadb.binlog_position()  # nothing was written since
    schema = SchemaHistory(state / "schema").latest(fresh_db, workload.TABLE)
    assert schema is not None and schema.position == position_string(h.file, h.pos, 0, snapshot=True)
    assert schema.primary_key == ("id",) and len(schema.columns) == len(workload.COLUMNS) + 1


def test_one_select_is_cut_into_exact_chunks_across_read_blocks(mariadb: MariaDB, fresh_db: str,
                                                                state: Path) -> None:
    # 20,000 rows are several 256 KiB read blocks: chunk ends fall inside blocks, not only between them.
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(40))", database=fresh_db)
    mariadb.execute("INSERT INTO t SELECT seq, CONCAT('row ', seq) FROM seq_1_to_20000", database=fresh_db)
    settings = make_settings(mariadb, state, tables=(f"{fresh_db}.t",))

    summary = run_snapshot(settings, SnapshotRequest(chunk_size=3333))

    segments = list_segments(state / "changelog")
    assert [len(segment.read_bytes().splitlines()) for segment in segments] == [3333] * 6 + [2]
    lines = changelog_lines(state)
    assert [line["after"] for line in lines] == [{"id": i, "s": f"row {i}"} for i in range(1, 20_001)]
    h = summary.checkpoint.handover
    for segment, first in zip(segments, range(0, 20_000, 3333)):  # each named after its first line
        assert segment.name == segment_name(position_string(h.file, h.pos, first, snapshot=True))
    entry = read_json(state / "snapshot.json")["tables"][f"{fresh_db}.t"]
    assert (entry["rows"], entry["chunks"], entry["last_key"], entry["done"]) == (20_000, 7, [20_000], True)


def test_a_server_wide_statement_time_limit_does_not_apply_to_the_copy(mariadb: MariaDB) -> None:
    # The copy of a table is one SELECT that can run for hours; max_statement_time would cut it off.
    mariadb.execute("SET GLOBAL max_statement_time = 5")
    try:
        with mariadb.connect() as conn:
            prepare_session(conn)
            with conn.cursor() as cur:
                cur.execute("SELECT @@SESSION.max_statement_time")
                assert float(cur.fetchone()[0]) == 0
    finally:
        mariadb.execute("SET GLOBAL max_statement_time = 0")


@pytest.mark.parametrize("lock", ["global", "tables", "auto"])
def test_hostile_names_composite_key_and_lock_modes(mariadb: MariaDB, fresh_db: str, state: Path, lock: str) -> None:
    _hostile_table(mariadb, fresh_db, rows=40)
    settings = make_settings(mariadb, state, databases=(fresh_db,))

    summary = run_snapshot(settings, SnapshotRequest(chunk_size=6, lock=lock))

    lines = changelog_lines(state)
    k1, k2, c = HOSTILE_COLUMNS
    got = [(line["key"][k1], line["key"][k2], line["after"][c]) for line in lines]
    expected = [(i // 3, f"o'{i % 3}`", workload.HOSTILE_TEXT[i % len(workload.HOSTILE_TEXT)]) for i in range(40)]
    assert got == expected  # key order, all rows, exact text
    assert {line["table"] for line in lines} == {HOSTILE_TABLE}
    assert summary.checkpoint.lock == ("mariadb" if lock == "auto" else lock)
    assert summary.checkpoint.lock_seconds > 0 if lock != "auto" else summary.checkpoint.lock_seconds == 0
    assert summary.chunks == 7


def test_resume_adopts_a_sealed_segment_whose_checkpoint_never_advanced(
    mariadb: MariaDB, fresh_db: str, state: Path
) -> None:
    _hostile_table(mariadb, fresh_db, rows=10)
    settings = make_settings(mariadb, state, databases=(fresh_db,))
    run_snapshot(settings, SnapshotRequest(chunk_size=4))
    before = {p.name: p.stat().st_mtime_ns for p in list_segments(state / "changelog")}
    full = changelog_lines(state)
    # Rewind snapshot.json to just after the first chunk, as if killed between seal and checkpoint
    # of the second chunk: the second segment exists, the checkpoint does not know it.
    document = read_json(state / "snapshot.json")
    assert document is not None
    entry = document["tables"][f"{fresh_db}.{HOSTILE_TABLE}"]
    entry.update(done=False, rows=4, chunks=1, last_key=[full[3]["key"][k] for k in HOSTILE_COLUMNS[:2]])
    document.update(status="running", row_counter=4)
    write_json_atomic(state / "snapshot.json", document)

    summary = run_snapshot(settings, SnapshotRequest(chunk_size=4))

    assert summary.resumed and summary.rows == 10 and summary.chunks == 3
    assert changelog_lines(state) == full
    assert {p.name: p.stat().st_mtime_ns for p in list_segments(state / "changelog")} == before


def test_resume_rereads_remaining_chunks_in_a_new_snapshot(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    _hostile_table(mariadb, fresh_db, rows=12)
    settings = make_settings(mariadb, state, databases=(fresh_db,))
    run_snapshot(settings, SnapshotRequest(chunk_size=5))
    full = changelog_lines(state)
    for path in list_segments(state / "changelog")[1:]:
        path.unlink()  # as if killed after the first chunk's checkpoint
    document = read_json(state / "snapshot.json")
    assert document is not None
    entry = document["tables"][f"{fresh_db}.{HOSTILE_TABLE}"]
    entry.update(done=False, rows=5, chunks=1, last_key=[full[4]["key"][k] for k in HOSTILE_COLUMNS[:2]])
    document.update(status="running", row_counter=5)
    write_json_atomic(state / "snapshot.json", document)

    summary = run_snapshot(settings, SnapshotRequest(chunk_size=5))

    assert changelog_lines(state) == full  # same rows, same deterministic positions
    assert summary.checkpoint.resumes == 1
    assert read_checkpoint(StateDir(state)).status == "done"  # type: ignore[union-attr]


def test_second_run_after_done_changes_nothing(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    _hostile_table(mariadb, fresh_db, rows=3)
    settings = make_settings(mariadb, state, databases=(fresh_db,))
    first = run_snapshot(settings, SnapshotRequest())
    again = run_snapshot(settings, SnapshotRequest())
    assert again.status == "already-done" and again.checkpoint == first.checkpoint
    assert len(list_segments(state / "changelog")) == 1


def test_rerun_of_a_done_snapshot_with_other_arguments_is_refused_not_already_done(
        mariadb: MariaDB, mariadb_factory: Any, fresh_db: str, state: Path) -> None:
    """A finished snapshot said "already done" (exit 0) to another selection, a typo in --lock and another server."""
    _hostile_table(mariadb, fresh_db, rows=3)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.other (id INT PRIMARY KEY)")
    base = ["snapshot", *mysql_args(mariadb), "--state-dir", str(state)]
    done = CliRunner().invoke(app, [*base, "--tables", f"{fresh_db}.{HOSTILE_TABLE}"])
    assert done.exit_code == 0, done.output

    other = CliRunner().invoke(app, [*base, "--tables", f"{fresh_db}.other"])
    assert other.exit_code == 2, other.output
    said = " ".join(other.output.split())
    assert f"not in it: {fresh_db}.other" in said and "new state directory" in said

    typo = CliRunner().invoke(app, [*base, "--tables", f"{fresh_db}.{HOSTILE_TABLE}", "--lock", "globl"])
    assert typo.exit_code == 2 and "--lock 'globl' is not one of" in typo.output, typo.output

    same = CliRunner().invoke(app, [*base, "--tables", f"{fresh_db}.{HOSTILE_TABLE}", "--json"])
    assert same.exit_code == 0 and json.loads(same.stdout)["status"] == "already-done", same.output
    assert CliRunner().invoke(app, base).exit_code == 0  # a bare rerun: whatever snapshot.json holds

    elsewhere = mariadb_factory()
    foreign = CliRunner().invoke(app, ["snapshot", *mysql_args(elsewhere), "--state-dir", str(state)])
    assert foreign.exit_code == 5, foreign.output
    said = " ".join(foreign.output.split())
    assert "start the snapshot over in a new --state-dir" in said and "pass --rebase" not in said


def test_resume_refuses_a_different_selection(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    _hostile_table(mariadb, fresh_db, rows=3)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.other (id INT PRIMARY KEY)")
    run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest())
    document = read_json(state / "snapshot.json")
    assert document is not None
    write_json_atomic(state / "snapshot.json", {**document, "status": "running"})
    with pytest.raises(UsageError, match="in progress"):
        run_snapshot(make_settings(mariadb, state, tables=(f"{fresh_db}.other",)), SnapshotRequest())


def test_resume_refuses_a_changed_schema(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v INT)")
    settings = make_settings(mariadb, state, databases=(fresh_db,))
    run_snapshot(settings, SnapshotRequest())
    document = read_json(state / "snapshot.json")
    assert document is not None
    write_json_atomic(state / "snapshot.json", {**document, "status": "running"})
    mariadb.execute(f"ALTER TABLE `{fresh_db}`.t ADD COLUMN w INT")
    with pytest.raises(PositionError, match="changed its columns"):
        run_snapshot(settings, SnapshotRequest())


def test_no_primary_key_refused_then_allowed(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.nopk (a INT, b VARCHAR(5))")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.nopk VALUES (1, 'x'), (1, 'x'), (2, NULL)")
    args = ["snapshot", *mysql_args(mariadb), "--state-dir", str(state), "--tables", f"{fresh_db}.nopk"]

    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 4, refused.output
    assert "has no primary key" in refused.output and "--allow-no-pk" in refused.output
    assert not (state / "snapshot.json").exists()

    allowed = CliRunner().invoke(app, [*args, "--allow-no-pk", "--json"])
    assert allowed.exit_code == 0, allowed.output
    summary = json.loads(allowed.stdout)
    assert summary["rows"] == 3 and summary["chunks"] == 1 and summary["status"] == "done"
    lines = changelog_lines(state)
    assert sorted((line["key"]["a"], line["key"]["b"]) for line in lines) == [(1, "x"), (1, "x"), (2, None)]
    assert all(line["key"] == line["after"] for line in lines)


def test_unknown_table_is_a_clear_error(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    result = CliRunner().invoke(app, ["snapshot", *mysql_args(mariadb), "--state-dir", str(state),
                                      "--tables", f"{fresh_db}.nope"])
    assert result.exit_code == 4, result.output
    assert f"table '{fresh_db}.nope'" in result.output and "does not exist" in result.output


def test_nothing_selected_is_a_usage_error(mariadb: MariaDB, state: Path) -> None:
    with pytest.raises(UsageError, match="no tables selected"):
        run_snapshot(make_settings(mariadb, state), SnapshotRequest())


def test_json_summary_through_the_cli(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    _hostile_table(mariadb, fresh_db, rows=5)
    result = CliRunner().invoke(app, ["snapshot", *mysql_args(mariadb), "--state-dir", str(state),
                                      "--databases", fresh_db, "--chunk-size", "2", "--json"])
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    file, pos = mariadb.binlog_position()
    assert summary["handover"]["file"] == file and summary["handover"]["pos"] == pos
    assert summary["tables"] == {f"{fresh_db}.{HOSTILE_TABLE}": {"rows": 5, "chunks": 3}}
    assert (summary["rows"], summary["chunks"], summary["lock"], summary["resumed"]) == (5, 3, "mariadb", False)
    assert summary["runway"]["retention_seconds"] is None and summary["runway"]["short"] is False


def test_strict_refuses_a_short_runway(mariadb: MariaDB, fresh_db: str, state: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 second of retention: "short" once the estimate passes half of it. The rate is measured on a probe of
    # the table (read, written and fsynced, then divided by PROBE_MARGIN 1.5); 400,000 rows of four columns
    # keep the estimate above 0.5 s up to a probe of 1,200,000 rows/s (the Python reader probes ~300,000 on an
    # idle machine), where 200,000 rows of one INT column sat on the threshold. The C reader can probe near
    # that bound: this test is about the runway rule, so it reads with the Python one.
    monkeypatch.setenv("CDC_NATIVE", "0")
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, s VARCHAR(40), t DATETIME(6), d DECIMAL(12,2))")
    mariadb.execute("INSERT INTO t SELECT seq, CONCAT('name ', seq), '2026-11-22 07:00:01.5' + INTERVAL seq SECOND, "
                    "seq / 100 FROM seq_1_to_400000", database=fresh_db)
    mariadb.execute(f"ANALYZE TABLE `{fresh_db}`.t")
    old = mariadb.variable("binlog_expire_logs_seconds")
    try:
        mariadb.execute("SET GLOBAL binlog_expire_logs_seconds = 1")  # no rotation happens here: nothing purged
        with pytest.raises(PreconditionError, match="outlive the binlogs"):
            run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)),
                         SnapshotRequest(chunk_size=1, strict=True))
        assert not (state / "snapshot.json").exists()
        # Without --strict the same estimate is a warning, and the copy goes ahead.
        warnings: list[str] = []
        summary = run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest(chunk_size=20_000),
                               on_warning=warnings.append)
    finally:
        mariadb.execute(f"SET GLOBAL binlog_expire_logs_seconds = {int(old)}")
    assert [w for w in warnings if w.startswith("binlog runway is short: ")] == warnings[:1]
    assert warnings[0].endswith("raise retention with `cdc set-retention`")
    assert summary.to_dict()["rows"] == 400_000 and summary.to_dict()["runway"]["short"] is True


def test_the_snapshot_records_foreign_keys_both_ways(mariadb: MariaDB, fresh_db: str, state: Path) -> None:
    db = f"`{fresh_db}`"
    mariadb.execute(f"CREATE TABLE {db}.emp (id INT PRIMARY KEY, boss INT, "
                    f"CONSTRAINT boss FOREIGN KEY (boss) REFERENCES {db}.emp (id) ON DELETE SET NULL ON UPDATE CASCADE)")
    mariadb.execute(f"INSERT INTO {db}.emp VALUES (1, NULL), (2, 1)")
    run_snapshot(make_settings(mariadb, state, databases=(fresh_db,)), SnapshotRequest())

    schema = SchemaHistory(state / "schema").latest(fresh_db, "emp")
    assert schema is not None
    key = ForeignKey("boss", fresh_db, "emp", ("boss",), fresh_db, "emp", ("id",), "SET NULL", "CASCADE")
    assert (schema.foreign_keys, schema.referenced_by) == ((key,), (key,))


def test_the_keys_between_tables_are_read_once_per_table(mariadb_factory: Any, tmp_path: Path) -> None:
    """Reading the keys that reference a table opens every table of every user database: the pass before the
    consistent point (keyless tables refused, runway sized) needs only columns and keys, and skips them."""
    server = mariadb_factory()
    server.execute("CREATE DATABASE hr")
    server.execute("CREATE TABLE hr.emp (id INT PRIMARY KEY, boss INT, "
                   "CONSTRAINT boss FOREIGN KEY (boss) REFERENCES hr.emp (id) ON DELETE SET NULL)")
    server.execute("CREATE DATABASE other")
    log = tmp_path / "general.log"
    server.execute(f"SET GLOBAL general_log_file = '{log}'")
    server.execute("SET GLOBAL general_log = 1")
    run_snapshot(make_settings(server, tmp_path / "state", databases=("hr",)), SnapshotRequest())
    server.execute("SET GLOBAL general_log = 0")

    reads = [line for line in log.read_text().splitlines() if "information_schema.REFERENTIAL_CONSTRAINTS" in line]
    assert len(reads) == 1 + 2, reads  # the table's own keys, then those of each user database that point at it
    schema = SchemaHistory(tmp_path / "state" / "schema").latest("hr", "emp")
    assert schema is not None and len(schema.foreign_keys) == len(schema.referenced_by) == 1
