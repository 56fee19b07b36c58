"""Tail decode rate against `mariadb-binlog --verbose --base64-output=DECODE-ROWS` on the same binlog files.

    .venv/bin/python benchmarks/bench_tail.py [--rows 200000] [--repeat 3] [--profile]

Generates a binlog of --rows row changes (50% inserts, 30% updates with before/after images, 20%
deletes) on a throwaway MariaDB, in the column mix of issue 8: INT, BIGINT UNSIGNED, utf8mb4 VARCHAR,
DECIMAL(18,4), DATETIME(6), JSON, BLOB, ENUM. Then measures in the same run, on the same files:
  - mariadb-binlog decoding every row to text (/dev/null), the native reference;
  - `cdc tail --until-now` through its library path (cdc.capture.run_tail in this process): binlog
    stream -> exact values -> change lines -> fsynced, sealed segments + checkpoint.
Each side runs --repeat times, alternating, and the best wall time of each counts (other processes on a
small machine only ever make a run slower); CPU seconds are printed too (tail's include its decode workers'),
and their ratio, and the load average before and after the runs (other engineers share the machine: a
ratio means little without it). Prints rows/s of both and the ratio (issue 28's goal with
--decode-workers 0: wall >= 1.0 and CPU >= 0.5). --decode-workers N runs tail with N
decode workers (0: decoding in the tail process). --profile prints the top of a cProfile of one more tail run
(the tail process only: a worker's time shows as waiting for it).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cdc.capture import Filters, StartRequest, TailOptions, run_tail  # noqa: E402
from cdc.capture.decode_pool import default_workers  # noqa: E402
from cdc.capture.heap import keep_freed_heap  # noqa: E402
from cdc.changelog import list_segments  # noqa: E402
from cdc.config import Settings, load_settings  # noqa: E402
from tests.rig import MariaDB  # noqa: E402

BATCH = 5000
TABLE_SQL = ("CREATE TABLE bench.t (id INT PRIMARY KEY, account BIGINT UNSIGNED, name VARCHAR(64), "
             "amount DECIMAL(18,4), created DATETIME(6), doc JSON, payload BLOB, "
             "status ENUM('new','paid','shipped','cancelled')) DEFAULT CHARSET=utf8mb4")
# ~330 bytes per row image: a 48-byte name with non-ASCII text, a small JSON document, a 128-byte BLOB.
ROW_SQL = ("SELECT seq, 18446744073709551615 - seq * 7919, CONCAT('customer ', seq, ' Zoë O''Brien 🎉 ', MD5(seq)), "
           "seq * 1234.5678 / 7, '2026-11-22 07:00:01.123456' + INTERVAL seq SECOND, "
           "JSON_OBJECT('k', seq, 'tags', JSON_ARRAY('a', 'b'), 'note', CONCAT('row ', seq)), "
           "UNHEX(REPEAT(MD5(seq), 8)), 1 + seq % 4")


def generate(server: MariaDB, rows: int) -> tuple[str, int]:
    """Write `rows` row changes: 50% inserts, 30% updates, 20% deletes; return the start position and count."""
    server.execute("CREATE DATABASE bench")
    server.execute(TABLE_SQL)
    file, pos = server.binlog_position()
    inserts, updates, deletes = rows // 2, rows * 3 // 10, rows - rows // 2 - rows * 3 // 10
    for first in range(0, inserts, BATCH):
        last = min(first + BATCH, inserts)
        server.execute(f"INSERT INTO bench.t {ROW_SQL} FROM bench.seq_{first + 1}_to_{last}")
    for first in range(0, updates, BATCH):
        server.execute("UPDATE bench.t SET amount = amount + 1, status = 'paid', created = created + INTERVAL 1 SECOND "
                       f"WHERE id > {first} AND id <= {min(first + BATCH, updates)}")
    for first in range(0, deletes, BATCH):
        lo = updates + first
        server.execute(f"DELETE FROM bench.t WHERE id > {lo} AND id <= {lo + min(BATCH, deletes - first)}")
    return f"{file}:{pos}", inserts + updates + deletes


def tail_settings(server: MariaDB, state: Path) -> Settings:
    return load_settings({"mysql.host": server.host, "mysql.port": server.port, "mysql.user": "root",
                          "state_dir": str(state)}, env={"HOME": str(state)}, cwd=state.parent)


def _cpu_seconds() -> float:
    """CPU of this process and of its waited-for children (tail's decode workers are waited for when it ends)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def time_tail(server: MariaDB, start: str, state: Path, rows: int, workers: int | None = None,
              profiler: cProfile.Profile | None = None) -> tuple[float, float, int]:
    """(wall, CPU) seconds and minor page faults (this process) of run_tail from `start` to the end into a fresh
    state directory; checks the lines.

    CPU counts the decode workers too: the ratio of CPU seconds compares all the work done, not just one process.
    """
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    options = TailOptions(start=StartRequest(position=start), filters=Filters(databases=("bench",)),
                          decode_workers=workers)
    settings = tail_settings(server, state)
    began, cpu, faults = time.perf_counter(), _cpu_seconds(), _minor_faults()
    if profiler is not None:
        profiler.enable()
    run_tail(settings, options)
    if profiler is not None:
        profiler.disable()
    elapsed, cpu, faults = time.perf_counter() - began, _cpu_seconds() - cpu, _minor_faults() - faults
    written = sum(1 for path in list_segments(state / "changelog") for _ in open(path, "rb"))
    assert written == rows, f"tail wrote {written} lines for {rows} row changes"
    return elapsed, cpu, faults


def _minor_faults() -> int:
    """Pages this process faulted in without reading a disk: each fresh page is zeroed by the kernel first
    (cdc.capture.heap keeps them down)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def binlog_files(server: MariaDB, start: str) -> list[Path]:
    file = start.rsplit(":", 1)[0]
    return sorted(p for p in server.datadir.glob("mariadb-bin.[0-9]*") if p.name >= file)


def time_mariadb_binlog(server: MariaDB, start: str) -> tuple[float, float]:
    """(wall, CPU) seconds of mariadb-binlog decoding every row from `start` to /dev/null."""
    pos = start.rsplit(":", 1)[1]
    began = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen(["mariadb-binlog", "--no-defaults", "--verbose", "--base64-output=DECODE-ROWS",
                                  f"--start-position={pos}", *map(str, binlog_files(server, start))], stdout=sink)
        _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"mariadb-binlog failed with status {status}")
    return time.perf_counter() - began, usage.ru_utime + usage.ru_stime


def _load(averages: tuple[float, float, float]) -> str:
    return " ".join(f"{value:.1f}" for value in averages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--decode-workers", type=int, default=None,
                        help="tail's --decode-workers (default: tail's own default, 1 on a multi-core machine)")
    args = parser.parse_args()
    if shutil.which("mariadb-binlog") is None:
        raise SystemExit("mariadb-binlog not found: apt-get install mariadb-client")
    keep_freed_heap()  # as `cdc tail` does in its process (cdc.capture.heap)
    with MariaDB() as server, tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp:
        began = time.perf_counter()
        start, rows = generate(server, args.rows)
        size = sum(p.stat().st_size for p in binlog_files(server, start))
        print(f"generated {rows:,} row changes ({size / 2**20:.0f} MiB of binlog) in {time.perf_counter() - began:.1f}s")
        native, ours = [], []
        load_before = os.getloadavg()
        for _ in range(args.repeat):
            native.append(time_mariadb_binlog(server, start))
            ours.append(time_tail(server, start, Path(tmp) / "state", rows, args.decode_workers))
        # Best wall and best CPU of each side, each on its own: load from other processes only adds to either.
        reference, reference_cpu = min(w for w, _ in native), min(c for _, c in native)
        best, best_cpu = min(w for w, _, _ in ours), min(c for _, c, _ in ours)
        print(f"mariadb-binlog --verbose: {rows / reference:12,.0f} rows/s (best of {args.repeat}: {reference:.2f}s, "
              f"{reference_cpu:.2f}s CPU)")
        workers = default_workers() if args.decode_workers is None else args.decode_workers
        print(f"cdc tail --until-now:     {rows / best:12,.0f} rows/s (best of {args.repeat}: {best:.2f}s, "
              f"{best_cpu:.2f}s CPU with its {workers} decode worker(s); library path, to sealed segments)")
        print(f"tail's minor page faults per run: {', '.join(f'{f:,}' for _, _, f in ours)} "
              f"(the first run includes the imports it triggers)")
        print(f"ratio cdc/mariadb-binlog: {reference / best:12.3f}  (goal with --decode-workers 0: >= 1.0)")
        print(f"ratio of CPU seconds:     {reference_cpu / best_cpu:12.3f}  (goal >= 0.5; less sensitive to other load)")
        print(f"load average (1, 5, 15 min) before the runs: {_load(load_before)}; after: {_load(os.getloadavg())} "
              f"on {os.cpu_count()} cores")
        if args.profile:
            profiler = cProfile.Profile()
            time_tail(server, start, Path(tmp) / "state", rows, args.decode_workers, profiler)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
