"""Table stats before compaction: the Python pass (local_stats, a fresh process) equals Spark's aggregate (spark_stats)."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdc.changelog import encode_line, list_segments
from cdc.errors import DataError
from cdc.spark import scan
from cdc.spark.scan import is_local, local_stats, spark_stats
from cdc.spark.sources import spark_lines
from cdc.spark.types import LINE_SCHEMA
from cdc.state import StateDir
from tests.spark.test_merge import build
from tests.spark.workload import T1, T2

ROOT = Path(__file__).resolve().parents[2]


def _files(tmp_path: Path, extra: list[dict[str, Any]] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """The randomized workload (truncate, alters) plus a drop, with a tail replay's duplicated lines, a blank line
    and one segment gzipped (as ship writes them)."""
    state = StateDir(tmp_path / "state")
    w = build(state.root, seed=5)
    w.ddl(T2, "drop")
    w.write_segments(w.lines[:100] + w.lines[97:] + (extra or []), per_segment=40)
    files = [str(p) for p in list_segments(state.changelog)]
    with open(files[1], "ab") as handle:
        handle.write(b"\n")
    packed = files[2] + ".gz"
    Path(packed).write_bytes(gzip.compress(Path(files[2]).read_bytes()))
    Path(files[2]).unlink()
    return [*files[:2], packed, *files[3:]], w.lines


def test_local_stats_equal_spark_stats(tmp_path: Path, spark: Any) -> None:
    files, lines = _files(tmp_path)
    assert is_local(files)
    for merged_upto in (None, lines[len(lines) // 3]["position"], lines[-2]["position"], lines[-1]["position"]):
        expected = spark_stats(spark_lines(spark, LINE_SCHEMA, files, merged_upto))
        assert local_stats(files, merged_upto) == expected
    found = {(s.db, s.table): s for s in local_stats(files, None)}
    assert list(found) == sorted([T1, T2])
    rows = Counter((line["db"], line["table"]) for line in lines if line["op"] in ("c", "u", "d", "r"))
    rows.update((line["db"], line["table"]) for line in lines[97:100] if line["op"] != "ddl")  # the replayed lines
    assert {t: s.rows for t, s in found.items()} == rows
    cuts = [line for line in lines if line["op"] == "ddl" and line["kind"] in ("truncate", "drop")]
    assert (found[T2].truncate_position, found[T2].truncate_ts) == (cuts[-1]["position"], cuts[-1]["ts"])
    assert found[T1].truncate_position is None and found[T2].last_position == lines[-1]["position"]
    t1 = [line["position"] for line in lines if (line["db"], line["table"]) == T1 and line["op"] != "ddl"]
    assert (found[T1].min_position, found[T1].max_position) == (min(t1), max(t1))


def test_renames_are_counted_both_ways(tmp_path: Path, spark: Any) -> None:
    rename = {"db": T1[0], "ddl": "-- rename", "kind": "rename", "new_db": "shop", "new_table": "other", "op": "ddl",
              "position": "0000000009:000000000004:b000000000000", "src": {"file": "mariadb-bin.000009", "gtid": None,
              "pos": 4, "row": 0, "server_id": 1, "xid": None}, "table": T1[1], "ts": "2026-11-22T07:00:01Z", "v": 1}
    files, _ = _files(tmp_path, [rename])
    found = local_stats(files, None)
    assert found == spark_stats(spark_lines(spark, LINE_SCHEMA, files, None))
    assert {(s.db, s.table): s.renames for s in found} == {T1: 1, T2: 0}  # cdc.spark.renames follows them


@pytest.mark.parametrize("damage", [b'{"db": "shop", "op": \n', b"[1, 2]\n", b'{"db": "shop", "op": "c"}\n'])
def test_damaged_line_names_file_and_line(tmp_path: Path, damage: bytes) -> None:
    path = tmp_path / "seg-1.jsonl"
    good = {"db": "shop", "op": "c", "position": "0000000001:000000000004:b000000000000", "table": "t"}
    path.write_bytes(encode_line(good) + damage)
    with pytest.raises(DataError, match=f"^{path}:2: "):
        local_stats([str(path)], None)


def test_is_local_only_for_files_python_reads(tmp_path: Path) -> None:
    plain, packed, zstd = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz", tmp_path / "c.jsonl.zst"
    for path in (plain, packed, zstd):
        path.write_bytes(b"")
    assert is_local([str(plain), str(packed)])
    assert not is_local([str(plain), str(zstd)])
    assert not is_local([str(plain), "s3a://bucket/x.jsonl"])
    assert not is_local([str(tmp_path / "gone.jsonl")])


def test_child_process_scan(tmp_path: Path) -> None:
    """LocalScan (a fresh process's scan beside its JVM start): local_stats's result, its DataError with the hint,
    and None (Spark's scan then) when the child fails for another reason."""
    files, lines = _files(tmp_path)
    child = scan.LocalScan(files, lines[10]["position"])
    assert child.result() == local_stats(files, lines[10]["position"]) and child.seconds > 0
    Path(files[0]).write_bytes(Path(files[0]).read_bytes() + b'{"broken\n')
    with pytest.raises(DataError, match=f"^{files[0]}:\\d+: damaged change line") as failed:
        scan.LocalScan(files, None).result()
    assert failed.value.hint == "the change log does not follow docs/formats.md"
    Path(files[1]).unlink()
    gone = scan.LocalScan(files[1:], None)
    assert gone.result() is None
    gone.close()


def test_child_scan_dies_with_a_killed_merge(tmp_path: Path) -> None:
    """kill -9 of the merge takes its scan child with it (it used to read on for seconds).

    The child's input is a FIFO nobody writes: it would wait on it forever if it outlived its parent.
    """
    fifo = tmp_path / "segment.jsonl"
    os.mkfifo(fifo)
    parent = (f"import os, signal, sys; sys.path.insert(0, {str(ROOT)!r}); from cdc.spark.scan import LocalScan; "
              f"s = LocalScan([{str(fifo)!r}], None); print(s._proc.pid, flush=True); "
              "import time; time.sleep(0.5); os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    child = int(done.stdout)
    try:
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running or sleeping, not gone or a zombie nobody reaped yet."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_a_resnapshot_end_line_cuts_at_its_cut_both_ways(tmp_path: Path, spark: Any) -> None:
    """A `resnapshot` line removes rows older than its `cut`, not than itself; the later of it and a truncate wins."""
    src = {"file": "mariadb-bin.000009", "gtid": None, "pos": 4, "row": 0, "server_id": 1, "xid": None}
    cut = "0000000001:000000000004:b000000000000"
    end = {"cut": cut, "db": T1[0], "ddl": "cdc resnapshot (run r1)", "kind": "resnapshot", "op": "ddl",
           "position": "0000000009:000000000004:b000000000000", "src": src, "table": T1[1],
           "ts": "2026-11-22T07:00:02Z", "v": 1}
    files, lines = _files(tmp_path, [end, {**end, "table": T2[1], "position": "0000000009:000000000008:b000000000000"}])
    expected = spark_stats(spark_lines(spark, LINE_SCHEMA, files, None))
    assert local_stats(files, None) == expected
    found = {(s.db, s.table): s for s in expected}
    assert (found[T1].truncate_position, found[T1].truncate_at, found[T1].truncate_ts) == (
        cut, end["position"], "2026-11-22T07:00:02Z")
    drop = [line for line in lines if line["op"] == "ddl" and line["kind"] in ("truncate", "drop")][-1]
    assert drop["position"] > cut  # the drop removes more than the re-snapshot's cut: it wins
    assert (found[T2].truncate_position, found[T2].truncate_at) == (drop["position"], drop["position"])
    assert not found[T2].as_input().is_partial_cut and found[T1].as_input().is_partial_cut
