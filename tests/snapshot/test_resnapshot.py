"""`cdc resnapshot` against a real MariaDB with tail running: the change log ends equal to the source, row for row.

Silent changes (`SET sql_log_bin = 0`: updates, deletes, inserts tail never sees) are repaired; a concurrent
workload (updates and deletes of the keys being read, key changes, rollbacks) is never overwritten by an older
read; a kill -9 of the resnapshot at a random chunk, then a rerun, ends the same.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from cdc.checkpoints import ResnapshotCheckpoint
from cdc.errors import PreconditionError, UsageError
from cdc.snapshot import ResnapshotRequest, run_resnapshot
from cdc.state import StateDir
from tests.capture.conftest import ROOT, binlog_start, changelog_lines, env_for
from tests.rig import MariaDB
from tests.snapshot.resnapshot_rig import (
    MARKS,
    Workload,
    create_marks_table,
    kill_tail_until_done,
    replay,
    resnapshot_settings,
    source,
    tail_running,
    wait_for_lines,
    wait_for_tail,
)

ROWS = 200


def _table(server: MariaDB, db: str, table: str = "t", rows: int = ROWS) -> None:
    server.execute(f"CREATE TABLE `{db}`.`{table}` (id INT PRIMARY KEY, v VARCHAR(40), n INT NOT NULL)")
    server.execute(f"INSERT INTO `{db}`.`{table}` SELECT seq, CONCAT('v', seq), 0 FROM `{db}`.seq_1_to_{rows}")


def _silent_changes(server: MariaDB, db: str, table: str = "t") -> None:
    """Changes tail cannot see: an update, deletes, an insert, all with sql_log_bin = 0."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"UPDATE `{db}`.`{table}` SET v = 'silent' WHERE id % 7 = 0")
        cur.execute(f"DELETE FROM `{db}`.`{table}` WHERE id % 11 = 0")
        cur.execute(f"INSERT INTO `{db}`.`{table}` VALUES (100000, 'silent insert', 1)")


def test_resnapshot_repairs_changes_made_with_sql_log_bin_off(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    create_marks_table(mariadb)
    start = binlog_start(mariadb)
    _table(mariadb, fresh_db)
    state = tmp_path / "state"
    with tail_running(mariadb, state, fresh_db, start):
        _silent_changes(mariadb, fresh_db)
        assert replay(state, fresh_db, "t") != source(mariadb, fresh_db, "t")  # tail cannot know
        summary = run_resnapshot(resnapshot_settings(mariadb, state, fresh_db),
                                 ResnapshotRequest((f"{fresh_db}.t",), chunk_size=30))
    expected = source(mariadb, fresh_db, "t")
    assert summary.tables == {f"{fresh_db}.t": {"rows": len(expected), "chunks": len(expected) // 30 + 1}}
    assert replay(state, fresh_db, "t") == expected
    lines = [line for line in changelog_lines(state) if line.get("table") == "t"]
    reads = [line for line in lines if line["op"] == "r"]
    # Kind b: a segment tail seals may start with them, and tail's recovery takes s segments for the snapshot's.
    assert len(reads) == len(expected) and all(line["position"].split(":")[2].startswith("b") for line in reads)
    end = [line for line in lines if line["op"] == "ddl" and line["kind"] == "resnapshot"]
    assert len(end) == 1 and end[0]["cut"] < reads[0]["position"] < end[0]["position"]
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "changelog.schema.json").read_text()))
    for line in changelog_lines(state):  # the published schema describes the new lines too
        validator.validate(line)
    assert not [line for line in changelog_lines(state) if line.get("db") == MARKS]  # marks never become lines
    checkpoint = ResnapshotCheckpoint.read(StateDir(state))
    assert checkpoint is not None and checkpoint.status == "done" and all(t.done for t in checkpoint.tables)
    assert not (state / "resnapshot" / checkpoint.run).exists()  # chunk files go once tail is past them


def test_concurrent_writes_are_never_overwritten_by_an_older_read(mariadb: MariaDB, fresh_db: str,
                                                                  tmp_path: Path) -> None:
    create_marks_table(mariadb)
    start = binlog_start(mariadb)
    _table(mariadb, fresh_db)
    state = tmp_path / "state"
    with tail_running(mariadb, state, fresh_db, start):
        _silent_changes(mariadb, fresh_db)
        # Two writers: more of their changes land between a chunk's SELECT and its high mark.
        with Workload(mariadb, fresh_db, "t", ROWS, seed=5) as workload, Workload(mariadb, fresh_db, "t", ROWS, seed=6):
            while workload.writes < 50:
                time.sleep(0.01)
            summary = run_resnapshot(resnapshot_settings(mariadb, state, fresh_db),
                                     ResnapshotRequest((f"{fresh_db}.t",), chunk_size=10))
            time.sleep(0.2)
    assert workload.writes > 200
    read = summary.tables[f"{fresh_db}.t"]["rows"]
    emitted = sum(1 for line in changelog_lines(state) if line["op"] == "r")
    assert emitted < read, "the workload changed keys inside windows: their reads must have been dropped"
    assert replay(state, fresh_db, "t") == source(mariadb, fresh_db, "t")


def _spawn(server: MariaDB, state: Path, db: str, chunk_size: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "cdc", "resnapshot", f"{db}.t", "--chunk-size", str(chunk_size), "--state-dir",
            str(state), "--json"]
    env = env_for(server, CDC_MYSQL_DATABASES=db, CDC_MYSQL_WATERMARK_TABLE=f"{MARKS}.watermarks")
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_9_at_a_random_chunk_then_rerun_ends_equal(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                        spark: Any) -> None:
    """The lake merged before, killed resnapshot, rerun, merged again: the lake equals the source row for row."""
    from cdc.spark import merge, read_lake_table

    create_marks_table(mariadb)
    start = binlog_start(mariadb)
    _table(mariadb, fresh_db, rows=400)
    state = tmp_path / "state"
    with tail_running(mariadb, state, fresh_db, start):
        pass
    merge(StateDir(state), spark=spark)  # the lake holds every row, older than the re-snapshot's cut
    at = random.Random(os.getpid()).randrange(5, 25)
    with tail_running(mariadb, state, fresh_db, None):
        _silent_changes(mariadb, fresh_db)
        # Keys from 250 up only: the rows read before the kill stay untouched by the binlog after the middle merge,
        # so only a cut that keeps lake rows newer than it (not a truncate) leaves them in place.
        with Workload(mariadb, fresh_db, "t", 400, seed=9, first=250):
            proc = _spawn(mariadb, state, fresh_db, chunk_size=10)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                checkpoint = ResnapshotCheckpoint.read(StateDir(state))
                if checkpoint is not None and checkpoint.next_chunk > at:
                    break
                time.sleep(0.005)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed = ResnapshotCheckpoint.read(StateDir(state))
            assert killed is not None and killed.status == "running"
            wait_for_lines(mariadb, state)  # the chunks read before the kill are in the change log
            merge(StateDir(state), spark=spark)  # a merge in the middle: r lines of some chunks only
            rerun = _spawn(mariadb, state, fresh_db, chunk_size=10)
            out, err = rerun.communicate(timeout=300)
            assert rerun.returncode == 0, err.decode()
    summary = orjson.loads(out)
    assert summary["resumed"] is True and summary["run"] == killed.run
    expected = source(mariadb, fresh_db, "t")
    assert replay(state, fresh_db, "t") == expected
    merge(StateDir(state), spark=spark)
    lake = read_lake_table(state / "lake", fresh_db, "t")
    assert lake is not None
    assert {(r["id"],): {"id": r["id"], "v": r["v"], "n": r["n"]} for r in lake.rows} == expected


def test_refuses_without_the_watermark_table_or_for_an_uncaptured_table(mariadb: MariaDB, fresh_db: str,
                                                                         tmp_path: Path) -> None:
    start = binlog_start(mariadb)
    _table(mariadb, fresh_db, rows=3)
    state = tmp_path / "state"
    settings = resnapshot_settings(mariadb, state, fresh_db)
    with tail_running(mariadb, state, fresh_db, start):
        pass
    missing = settings.__class__(**{**settings.__dict__,
                                    "mysql": settings.mysql.__class__(**{**settings.mysql.__dict__,
                                                                         "watermark_table": "nowhere.marks"})})
    with pytest.raises(PreconditionError, match="watermark table nowhere.marks does not exist") as raised:
        run_resnapshot(missing, ResnapshotRequest((f"{fresh_db}.t",)))
    assert "CREATE TABLE `nowhere`.`marks`" in (raised.value.hint or "")
    mariadb.execute(f"CREATE TABLE `{fresh_db}_other` (id INT PRIMARY KEY)", database=fresh_db)
    other = settings.__class__(**{**settings.__dict__, "mysql": settings.mysql.__class__(
        **{**settings.mysql.__dict__, "exclude_tables": (f"{fresh_db}.{fresh_db}_other",)})})
    with pytest.raises(UsageError, match="not captured by tail"):
        run_resnapshot(other, ResnapshotRequest((f"{fresh_db}.{fresh_db}_other",)))


@pytest.mark.long
def test_tail_killed_9_again_and_again_inside_windows_ends_equal(mariadb: MariaDB, fresh_db: str,
                                                                 tmp_path: Path) -> None:
    """tail.json stays before an open window: every restart re-reads the window, nothing is emitted twice."""
    import threading

    create_marks_table(mariadb)
    start = binlog_start(mariadb)
    _table(mariadb, fresh_db, rows=1000)  # 2,000 took 162 s on a slow machine; 200 chunks still see many kills
    state = tmp_path / "state"
    with tail_running(mariadb, state, fresh_db, start):
        _silent_changes(mariadb, fresh_db)
    box: dict[str, object] = {}

    def resnapshot() -> None:
        try:
            box["summary"] = run_resnapshot(resnapshot_settings(mariadb, state, fresh_db),
                                            ResnapshotRequest((f"{fresh_db}.t",), chunk_size=5, wait_timeout=120))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    # Throttled: a tail killed every few seconds must still catch up with it on a loaded machine.
    with Workload(mariadb, fresh_db, "t", 1000, seed=3, pause=0.005):
        reader = threading.Thread(target=resnapshot, daemon=True)
        reader.start()
        kills = kill_tail_until_done(mariadb, state, fresh_db, reader, os.getpid())
    assert "error" not in box, box.get("error")
    assert kills >= 2
    with tail_running(mariadb, state, fresh_db, None):
        pass
    assert replay(state, fresh_db, "t") == source(mariadb, fresh_db, "t")


def test_ddl_inside_a_window_makes_the_chunk_read_again(mariadb: MariaDB, fresh_db: str, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A DDL of the table between a chunk's marks: tail emits nothing for it, leaves a .redo, resnapshot re-reads."""
    import threading

    create_marks_table(mariadb)
    start = binlog_start(mariadb)
    _table(mariadb, fresh_db, rows=300)
    state = tmp_path / "state"
    stop = threading.Event()

    def alter() -> None:  # a DDL that changes no row, over and over for a while
        with mariadb.connect() as conn, conn.cursor() as cur:
            for n in range(30):
                if stop.is_set():
                    return
                cur.execute(f"ALTER TABLE `{fresh_db}`.t COMMENT = 'c{n}'")

    with tail_running(mariadb, state, fresh_db, start):
        _silent_changes(mariadb, fresh_db)
        ddl = threading.Thread(target=alter, daemon=True)
        ddl.start()
        try:
            with caplog.at_level("WARNING", logger="cdc.snapshot.resnapshot"):
                run_resnapshot(resnapshot_settings(mariadb, state, fresh_db),
                               ResnapshotRequest((f"{fresh_db}.t",), chunk_size=5))
        finally:
            stop.set()
            ddl.join(30)
    assert any("reading again from there" in r.getMessage() for r in caplog.records), "no DDL fell in a window"
    assert replay(state, fresh_db, "t") == source(mariadb, fresh_db, "t")


def test_snapshot_add_table_adds_a_table_to_a_running_capture(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    """`cdc snapshot --add-table` while tail runs: the table's rows, then every change, also after a tail restart."""
    from cdc.schema import SchemaHistory

    create_marks_table(mariadb)
    other = f"{fresh_db}_x"  # outside tail's filters (databases = fresh_db)
    mariadb.execute(f"CREATE DATABASE `{other}`")
    try:
        _table(mariadb, other, "u", rows=120)
        start = binlog_start(mariadb)
        _table(mariadb, fresh_db)
        state = tmp_path / "state"
        with tail_running(mariadb, state, fresh_db, start):
            mariadb.execute(f"UPDATE `{other}`.u SET v = 'before the add' WHERE id < 10")
            with Workload(mariadb, other, "u", 120, seed=4, pause=0.002):
                argv = [sys.executable, "-m", "cdc", "snapshot", "--add-table", f"{other}.u", "--chunk-size", "10",
                        "--state-dir", str(state), "--json"]
                env = env_for(mariadb, CDC_MYSQL_DATABASES=fresh_db, CDC_MYSQL_WATERMARK_TABLE=f"{MARKS}.watermarks")
                done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=300)
                assert done.returncode == 0, done.stderr.decode()
        assert orjson.loads(done.stdout)["tables"][f"{other}.u"]["chunks"] >= 12
        assert replay(state, other, "u") == source(mariadb, other, "u")
        # A tail restarted from its checkpoint keeps capturing the added table.
        mariadb.execute(f"UPDATE `{other}`.u SET v = 'after a restart' WHERE id % 2 = 0")
        mariadb.execute(f"DELETE FROM `{other}`.u WHERE id % 9 = 0")
        with tail_running(mariadb, state, fresh_db, None):
            pass
        assert replay(state, other, "u") == source(mariadb, other, "u")
        assert SchemaHistory(state / "schema").latest(other, "u") is not None
        assert replay(state, fresh_db, "t") == source(mariadb, fresh_db, "t")
    finally:
        mariadb.execute(f"DROP DATABASE `{other}`")


def test_a_read_only_server_is_refused_with_a_clear_message(mariadb_factory: Any, tmp_path: Path) -> None:
    """Watermarks must go through the binlog: forced on a read-only server (a replica), exit 4, naming --mode locked
    (the default, auto, reads chunks under a lock there: test_resnapshot_locked.py)."""
    from cdc.config import load_settings
    from cdc.errors import ExitCode

    server = mariadb_factory()
    create_marks_table(server)
    start = binlog_start(server)
    server.execute("CREATE DATABASE shop")
    _table(server, "shop")
    state = tmp_path / "state"
    with tail_running(server, state, "shop", start):
        pass
    server.create_user("cdc_ro", "pw", ("SELECT", "INSERT", "UPDATE"))
    server.execute("SET GLOBAL read_only = 1")  # root keeps writing (SUPER); the cdc user may not
    settings = load_settings({"mysql.host": server.host, "mysql.port": server.port, "mysql.user": "cdc_ro",
                              "mysql.databases": ("shop",), "mysql.watermark_table": f"{MARKS}.watermarks",
                              "state_dir": str(state)}, env={"HOME": str(tmp_path), "CDC_MYSQL_PASSWORD": "pw"},
                             cwd=tmp_path)
    with pytest.raises(PreconditionError, match="the server is read-only") as raised:
        run_resnapshot(settings, ResnapshotRequest(("shop.t",), mode="watermarks"))
    assert raised.value.exit_code == ExitCode.PRECONDITION and "--mode locked" in (raised.value.hint or "")
    assert ResnapshotCheckpoint.read(StateDir(state)) is None  # refused before anything was started


def test_hostile_table_and_column_names_through_the_new_path(mariadb: MariaDB, fresh_db: str, tmp_path: Path) -> None:
    """Backticks, quotes, %, dots, spaces and non-ASCII in names: SELECT, keyset, chunk files, marks, r lines."""
    def q(name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    table, key, value = "we`ird 'ta%ble'.ü", "k`ey 'x'", "va.l \"ue\""
    create_marks_table(mariadb)
    start = binlog_start(mariadb)
    full = f"{q(fresh_db)}.{q(table)}".replace("%", "%%")
    mariadb.execute(f"CREATE TABLE {full} ({q(key)} VARCHAR(20) PRIMARY KEY, {q(value)} TEXT)".replace("%%", "%"))
    for n in range(40):
        mariadb.execute(f"INSERT INTO {full} VALUES (%s, %s)", (f"k'{n:03d}`%", f"O'Brien {n} 🎉"))
    state = tmp_path / "state"
    with tail_running(mariadb, state, fresh_db, start):
        with mariadb.connect() as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"UPDATE {full} SET {q(value)} = 'silent' WHERE {q(key)} < %s", ("k'010",))
            cur.execute(f"DELETE FROM {full} WHERE {q(key)} > %s", ("k'030",))
        run_resnapshot(resnapshot_settings(mariadb, state, fresh_db),
                       ResnapshotRequest((f"{fresh_db}.{table}",), chunk_size=7))
    rows = mariadb.execute(f"SELECT {q(key)}, {q(value)} FROM {full}".replace("%%", "%"))
    assert len(rows) == 30
    assert replay(state, fresh_db, table) == {(k,): {key: k, value: v} for k, v in rows}


def test_cancel_frees_tail_from_a_window_a_killed_run_left_open(mariadb: MariaDB, fresh_db: str,
                                                                tmp_path: Path) -> None:
    from cdc.snapshot.resnapshot import write_mark
    from cdc.watermarks import LOW, Mark

    create_marks_table(mariadb)
    start = binlog_start(mariadb)
    _table(mariadb, fresh_db)
    state = tmp_path / "state"
    with tail_running(mariadb, state, fresh_db, start):
        run_resnapshot(resnapshot_settings(mariadb, state, fresh_db), ResnapshotRequest((f"{fresh_db}.t",),
                                                                                        chunk_size=50))
        done = ResnapshotCheckpoint.read(StateDir(state))
        assert done is not None
        # As a resnapshot killed between its marks leaves it: a running run, a low mark without its high one.
        ResnapshotCheckpoint(done.run, "running", done.started_at, done.next_chunk,
                             tuple(type(t)(t.db, t.table) for t in done.tables)).write(StateDir(state))
        with mariadb.connect() as conn:
            write_mark(conn, f"{MARKS}.watermarks", done.run, Mark(done.run, LOW, fresh_db, "t", 99, at=1.0).to_json())
        mariadb.execute(f"UPDATE `{fresh_db}`.t SET v = 'later' WHERE id = 1")
        with pytest.raises(AssertionError, match="tail did not reach"):
            wait_for_tail(mariadb, state, timeout=3)  # tail.json stays before the open window
        summary = run_resnapshot(resnapshot_settings(mariadb, state, fresh_db), ResnapshotRequest((), cancel=True))
        assert summary.run == done.run
        wait_for_tail(mariadb, state)
    cancelled = ResnapshotCheckpoint.read(StateDir(state))
    assert cancelled is not None and cancelled.status == "cancelled"
    assert replay(state, fresh_db, "t") == source(mariadb, fresh_db, "t")
    with pytest.raises(UsageError, match="no unfinished re-snapshot"):
        run_resnapshot(resnapshot_settings(mariadb, state, fresh_db), ResnapshotRequest((), cancel=True))
