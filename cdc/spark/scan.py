"""What a run's change lines say about each table before any compaction: row count, position range, last truncate.

Two ways to the same facts (tests/spark/test_scan.py holds them equal):
- `spark_stats`: one Spark aggregate over the lines; works for anything Spark reads (s3a://, a cluster).
- `local_stats`: one pass in Python over local files. A fresh process runs it in a child process
  (`LocalScan`) while its driver JVM starts (job.merge), so Spark reads and parses the JSON lines once
  instead of twice; in a cold JVM that first Spark read is mostly interpreted and freshly compiled code
  (docs/performance.md, "spark-merge"). A child, not a thread: a thread holding the GIL slowed the session's start
  (py4j calls) by as much as the scan took.
"""

from __future__ import annotations

import ctypes
import gzip
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson

from cdc.errors import DataError
from cdc.native_build import stale_source

ROW_OPS = frozenset({"c", "u", "d", "r"})
CUT_KINDS = frozenset({"truncate", "drop"})  # every older row of the table is gone
# A re-snapshot's end line (docs/formats.md): every row older than its `cut` that was not read again is gone.
RESNAPSHOT = "resnapshot"
_FORMAT_HINT = "the change log does not follow docs/formats.md"
NATIVE_ABI = 5  # must match _scan.c's
_BLOCK = 4 << 20  # bytes read at a time; a longer line grows the block until it ends


@dataclass(frozen=True)
class TableStats:
    db: str
    table: str
    rows: int  # row changes (c/u/d/r), duplicated lines included
    min_position: str | None  # of the row changes
    max_position: str | None
    last_position: str  # of any line of the table (DDL included)
    truncate_position: str | None  # last truncate/drop of the run (a re-snapshot's: its cut), rows before it gone
    truncate_ts: str | None
    removals: int = 0  # updates and deletes (what may change a key other tables reference: cdc.spark.cascades)
    truncate_at: str | None = None  # the position of the line that cut (the cut itself for truncate/drop)
    renames: int = 0  # rename lines (RENAME TABLE from this name: cdc.spark.renames follows them)

    def as_input(self) -> Any:
        from cdc.spark.compact import TableInput

        return TableInput(self.db, self.table, self.rows, self.min_position or "", self.max_position or "",
                          self.truncate_position, self.truncate_ts, self.truncate_at or self.truncate_position)


def spark_stats(raw: Any) -> list[TableStats]:
    """One aggregate over the lines (a DataFrame of types.LINE_SCHEMA), tables in (db, table) order."""
    from pyspark.sql import functions as F

    is_row = F.col("op").isin(*sorted(ROW_OPS))
    cut = (F.col("op") == "ddl") & F.col("kind").isin(*sorted(CUT_KINDS | {RESNAPSHOT}))
    # Rows before `threshold` are gone: a truncate's own position, a re-snapshot end line's `cut`.
    threshold = F.when(F.col("kind") == RESNAPSHOT, F.col("cut")).otherwise(F.col("position"))
    rows = raw.groupBy("db", "table").agg(
        F.count(F.when(is_row, 1)).alias("rows"),
        F.min(F.when(is_row, F.col("position"))).alias("min_position"),
        F.max(F.when(is_row, F.col("position"))).alias("max_position"),
        F.max("position").alias("last_position"),
        F.max(F.when(cut, F.struct(threshold.alias("threshold"), "ts", "position"))).alias("cut"),
        F.count(F.when((F.col("op") == "ddl") & (F.col("kind") == "rename"), 1)).alias("renames"),
        F.count(F.when(F.col("op").isin("u", "d"), 1)).alias("removals"),
    ).orderBy("db", "table").collect()
    return [_checked(r["db"], r["table"], r["rows"], r["min_position"], r["max_position"], r["last_position"],
                     (r["cut"]["threshold"], r["cut"]["ts"], r["cut"]["position"]) if r["cut"] else None, r["renames"],
                     r["removals"])
            for r in rows]


def _checked(db: Any, table: Any, rows: int, low: str | None, high: str | None, last: str,
             cut: tuple[str, str | None, str] | None, renames: int, removals: int) -> TableStats:
    if not isinstance(db, str) or not isinstance(table, str):
        raise DataError("a change line has no db/table", hint=_FORMAT_HINT)
    if cut is None:
        return TableStats(db, table, rows, low, high, last, None, None, removals, renames=renames)
    return TableStats(db, table, rows, low, high, last, cut[0], cut[1], removals, cut[2], renames)


def is_local(files: list[str]) -> bool:
    """Whether local_stats can read every file (local plain or gzip JSON lines, as the change log and ship write)."""
    return all("://" not in f and f.endswith((".jsonl", ".jsonl.gz")) and Path(f).is_file() for f in files)


def local_stats(files: list[str], merged_upto: str | None, latest: Any = None) -> list[TableStats]:
    """spark_stats's facts for the lines after `merged_upto`, read in Python (files: is_local).

    With the C scanner built (cdc/spark/_scan.c), it reads the row-change lines and two files at once; the lines
    it is not sure of (DDL, damaged or unusual ones) come back here. Without it, or with CDC_NATIVE=0, all in Python.
    latest: a Latest (cdc.spark.latest.alongside_scan) the C scanner feeds each file's lines to, file i as its part
    i, from the same read of each line; only with the C scanner.
    """
    native = native_module()
    if native is not None and (merged_upto is None or len(merged_upto.encode()) <= native.POS_MAX):
        with ThreadPoolExecutor(min(2, len(files)) or 1) as pool:  # feed() runs without the interpreter lock
            parts = list(pool.map(lambda i: _native_file(native, files[i], merged_upto, latest, i), range(len(files))))
        tables = _merged(parts)
    elif latest is not None:  # left unfed, its pass would write no line at all
        raise ValueError("a Latest is fed only by the C scanner, which cannot read these lines")
    else:
        tables = {}
        for path in files:
            for number, change in _changes(path):
                _counted(tables, path, number, change, merged_upto)
    found = [_checked(db, table, *acc) for (db, table), acc in tables.items()]
    return sorted(found, key=lambda s: (s.db, s.table))


def _counted(tables: dict[tuple[Any, Any], list[Any]], path: str, number: int, change: dict[str, Any],
             merged_upto: str | None) -> None:
    position = change.get("position")
    if not isinstance(position, str):
        raise DataError(f"{path}:{number}: change line without a position string", hint=_FORMAT_HINT)
    if merged_upto is None or position > merged_upto:
        _count(tables, change, position)


def _native_file(native: Any, path: str, merged_upto: str | None, latest: Any = None,
                 part: int = 0) -> dict[tuple[Any, Any], list[Any]]:
    """One file's facts: the C scanner's lines, and the lines it hands back counted by _count (fed to `latest` too)."""
    scanner, number = native.Scanner(merged_upto), 0
    tables: dict[tuple[Any, Any], list[Any]] = {}
    for pending, cut in whole_lines(path):
        lines, special = scanner.feed(pending, cut, latest, part)
        for index, start, end in special:
            change = _change(path, number + index + 1, bytes(pending[start:end]))
            if change is not None:
                _counted(tables, path, number + index + 1, change, merged_upto)
        number += lines
    for db, table, rows, removals, low, high, last in scanner.tables():
        _add(tables, (db, table), [rows, low, high, last, None, 0, removals])
    return tables


def whole_lines(path: str) -> Iterator[tuple[bytearray, int]]:
    """A local file (plain or gzip) in blocks of whole lines: (buffer, end of its last whole line; at the file's end,
    of its last line, newline or not). The buffer is reused: what the caller needs of it is read before the next, and
    its bytes past that end are not the file's.

    Read straight into one buffer (readinto): a read into a new bytes object, then appended to the lines held, copied
    every byte once more (memmove: 7% -> 2% of the superseded-lines pass's CPU, which reads its input twice).
    """
    buffer, held = bytearray(_BLOCK), 0  # held: the bytes of an unfinished line, at the buffer's start
    with _open(path, buffering=0) as handle:
        while True:
            if held == len(buffer):  # one line longer than the buffer: grow it until the line ends
                buffer.extend(bytes(len(buffer)))
            with memoryview(buffer) as view, view[held:] as free:
                read = handle.readinto(free) or 0
            end = held + read
            cut = buffer.rfind(b"\n", 0, end) + 1 if read else end  # whole lines only, until the end
            if cut:
                yield buffer, cut
                buffer[:end - cut] = buffer[cut:end]
            held = end - cut
            if not read:
                return


def _merged(parts: list[dict[tuple[Any, Any], list[Any]]]) -> dict[tuple[Any, Any], list[Any]]:
    tables: dict[tuple[Any, Any], list[Any]] = {}
    for part in parts:
        for key, acc in part.items():
            _add(tables, key, acc)
    return tables


def _add(tables: dict[tuple[Any, Any], list[Any]], key: tuple[Any, Any], acc: list[Any]) -> None:
    """Adds one part's facts of a table (_count's list) to `tables`: every fact is a count, a minimum or a maximum."""
    have = tables.get(key)
    if have is None:
        tables[key] = list(acc)
        return
    rows, low, high, last, cut, renames, removals = acc
    have[0] += rows
    have[1] = min(filter(None, (have[1], low)), default=None)
    have[2] = max(filter(None, (have[2], high)), default=None)
    have[3] = max(have[3], last)
    if cut is not None and (have[4] is None or _cut_order(*cut) > _cut_order(*have[4])):
        have[4] = cut
    have[5] += renames
    have[6] += removals


def _count(tables: dict[tuple[Any, Any], list[Any]], change: dict[str, Any], position: str) -> None:
    key = (change.get("db"), change.get("table"))
    acc = tables.get(key)
    if acc is None:
        acc = tables[key] = [0, None, None, position, None, 0, 0]
    op = change.get("op")
    if op in ROW_OPS:
        acc[0] += 1
        acc[6] += op in ("u", "d")
        if acc[1] is None or position < acc[1]:
            acc[1] = position
        if acc[2] is None or position > acc[2]:
            acc[2] = position
    elif op == "ddl":
        kind = change.get("kind")
        # Spark's max over struct(threshold, ts, position): thresholds first, a null ts below any text
        threshold = change.get("cut") if kind == RESNAPSHOT else position
        if ((kind in CUT_KINDS or kind == RESNAPSHOT) and isinstance(threshold, str)
                and (acc[4] is None or _cut_order(threshold, change.get("ts"), position) > _cut_order(*acc[4]))):
            acc[4] = (threshold, change.get("ts"), position)
        elif kind == "rename":
            acc[5] += 1
    if position > acc[3]:
        acc[3] = position


def _cut_order(threshold: str, ts: str | None, position: str) -> tuple[str, bool, str, str]:
    return threshold, ts is not None, ts or "", position


def _changes(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, parsed line) of one file; a damaged line stops the merge, as Spark's FAILFAST read does."""
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            change = _change(path, number, line)
            if change is not None:
                yield number, change


def _change(path: str, number: int, line: bytes) -> dict[str, Any] | None:
    """One line parsed; None for a blank line (Spark's JSON reader skips them)."""
    try:
        change = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if not line.strip():
            return None
        raise DataError(f"{path}:{number}: damaged change line ({exc})", hint=_FORMAT_HINT) from None
    if not isinstance(change, dict):
        raise DataError(f"{path}:{number}: change line is not a JSON object", hint=_FORMAT_HINT)
    return change


def native_module() -> Any:
    """The C scanner's module when it is built, current and not disabled (CDC_NATIVE=0); else None."""
    return None if os.environ.get("CDC_NATIVE", "1").strip() == "0" else _NATIVE


def _load_native() -> tuple[Any, str | None]:
    try:
        from cdc.spark import _scan as module
    except ImportError as exc:
        return None, f"the C scanner is not built ({exc}): run `pip install -e .`"
    if getattr(module, "ABI_VERSION", None) != NATIVE_ABI:
        return None, "the built C scanner is stale: run `pip install -e .` again"
    here = Path(__file__).parent
    sources = ("_scan.c", "_latest.c", "_flat.c", "_scan_json.h", "_latest.h", "_flat.h")
    stale = stale_source(module, [here / name for name in sources])
    return (None, stale) if stale else (module, None)


_NATIVE, NATIVE_PROBLEM = _load_native()


@contextmanager
def _open(path: str, buffering: int = 1 << 20) -> Iterator[io.BufferedIOBase | io.RawIOBase]:
    """A local change-log file, plain or gzip. buffering=0: a plain file's reads go straight into the caller's buffer
    (whole_lines' readinto); a line-by-line reader (_changes) wants the default."""
    handle = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=buffering)
    with handle:
        yield cast("io.BufferedIOBase | io.RawIOBase", handle)


class LocalScan:
    """local_stats in a child process (`python -m cdc.spark.scan`), started now, collected by result()."""

    def __init__(self, files: list[str], merged_upto: str | None) -> None:
        import cdc

        root = str(Path(cdc.__file__).resolve().parents[1])  # the child imports this very cdc package
        path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        argv = [sys.executable, "-m", "cdc.spark.scan", str(os.getpid())]  # the pid: see _die_with
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      env={**os.environ, "PYTHONPATH": path})
        assert self._proc.stdin is not None
        try:
            with self._proc.stdin:  # the child reads its whole request first, so this never waits long
                self._proc.stdin.write(orjson.dumps({"files": files, "merged_upto": merged_upto}))
        except BrokenPipeError:
            pass  # the child died at start: result() says None, and Spark's aggregate runs instead
        self.seconds = 0.0

    def result(self) -> list[TableStats] | None:
        """The stats; DataError for a damaged or unmergeable line; None if the child failed otherwise (use Spark)."""
        assert self._proc.stdout is not None
        out = self._proc.stdout.read()
        self._proc.wait()
        try:
            reply = orjson.loads(out) if self._proc.returncode == 0 else None
        except orjson.JSONDecodeError:
            reply = None
        if reply is None:
            return None
        if "error" in reply:
            raise DataError(reply["error"], hint=reply["hint"])
        self.seconds = reply["seconds"]
        return [TableStats(**t) for t in reply["tables"]]

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def _die_with(parent: int) -> None:
    """Have the kernel kill this child when the merge that started it dies, kill -9 included (Linux).

    Without it a killed merge left its scan reading the change log for seconds more. The signal comes
    when the thread that started the child ends: job._start runs in the merge's main thread.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the child ends when its work does
        return
    if os.getppid() != parent:  # the merge died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _serve() -> int:
    """The child's side: {"files", "merged_upto"} on stdin -> {"tables", "seconds"} or {"error", "hint"} on stdout."""
    if len(sys.argv) > 1:
        _die_with(int(sys.argv[1]))
    request = orjson.loads(sys.stdin.buffer.read())
    started = time.monotonic()
    try:
        found = local_stats(request["files"], request["merged_upto"])
    except DataError as exc:
        reply: dict[str, Any] = {"error": exc.message, "hint": exc.hint}
    else:
        reply = {"tables": [t.__dict__ for t in found], "seconds": round(time.monotonic() - started, 3)}
    sys.stdout.buffer.write(orjson.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
