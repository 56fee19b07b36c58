"""Snapshot throughput: `cdc snapshot` beside `mariadb-dump` of the same tables, on a throwaway MariaDB.

    .venv/bin/python benchmarks/bench_snapshot.py [--narrow-rows 300000] [--wide-rows 20000]
        [--chunk-size 10000] [--workers 1] [--repeat 3] [--profile] [--python-baseline] [--buffer-pool 64M]
        [--server-dir DIR] [--out-dir DIR]

Two tables: `narrow` (int key, int, varchar, datetime(6), decimal) and `all_types` (every type of
docs/formats.md, hostile values, tests/capture/workload.py). For each: rows/s of cdc snapshot
(read, encode exactly, write sealed change-log segments with fsync, checkpoint per chunk) and of
`mariadb-dump --single-transaction --quick` writing SQL to a file, and the ratio cdc/dump (also against
dump plus an fsync of its file, a reference for durable output, as cdc's segments are); each side
runs --repeat times, alternating, the order swapped every other round (each side follows itself and the
other equally often: a run depends on the one before it); the ratios of the best runs and of the median
runs are printed (the machine is shared and its disk is virtual: see the load average, and prefer
--repeat 10 or more).
Beside them: the bytes each side wrote per row (cdc's sealed segments, dump's file), and the median
seconds the server's threads waited for block I/O per run (needs `sysctl kernel.task_delayacct=1`,
as root; n/a otherwise): a server that waits longer for its page reads while cdc writes than while
dump does is slowed by the disk they share, not by the client.
--profile prints the top of a cProfile of cdc's first run (the hot loop is the C row reader,
cdc/snapshot/_native.c, or without it the `parse` function cdc/snapshot/lines.py
generates per table). --python-baseline also runs cdc with CDC_NATIVE=0 (the generated Python
reader) in the same rounds, so the C reader's gain is measured side by side too.

--buffer-pool sets the server's InnoDB buffer pool (default 64M, the test rig's: a 1M-row `narrow`
does not fit, so both sides' SELECT reads pages from disk). On one machine the server's reads and
cdc's fsynced segment writes (~5x the bytes of dump's SQL on `narrow`, which is not fsynced) share one disk;
with the table in the pool (e.g. 1G) the comparison is the clients' own work. A real source server
reads from its own disks: --server-dir puts the throwaway server's files (its datadir) under DIR, e.g.
a second disk, or a RAM-backed one when there is none (as root: `truncate -s 3G /dev/shm/srv.img;
mkfs.ext4 -q /dev/shm/srv.img; mount -o loop /dev/shm/srv.img /mnt/srv`), so the server still reads
pages through InnoDB's disk path with a small pool, but not from the disk the two clients write to.
--out-dir puts what both clients write (cdc's state directory, dump's file) under DIR: /dev/shm (tmpfs)
measures them with nothing reaching a disk, which tells how much of a gap is the bytes made durable.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cdc.config import load_settings  # noqa: E402
from cdc.snapshot import native as native_api  # noqa: E402
from cdc.snapshot.run import DEFAULT_CHUNK_SIZE, SnapshotRequest, run_snapshot  # noqa: E402
from tests.capture import workload  # noqa: E402
from tests.rig import MariaDB  # noqa: E402

DB = "bench"


def fill(server: MariaDB, narrow_rows: int, wide_rows: int) -> None:
    server.execute(f"CREATE DATABASE {DB}")
    server.execute("CREATE TABLE narrow (id INT PRIMARY KEY, n INT, s VARCHAR(40), t DATETIME(6), d DECIMAL(12,2))",
                   database=DB)
    server.execute(f"INSERT INTO narrow SELECT seq, seq * 7, CONCAT('name ', seq, ' O''Brien'), "
                   f"'2026-11-22 07:00:01.123456' + INTERVAL seq SECOND, seq / 100 FROM seq_1_to_{narrow_rows}",
                   database=DB)
    rng = random.Random(1)
    with server.connect() as conn:
        workload.create_all_types_table(conn, DB)
        workload.prepare_session(conn)
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for key in range(1, wide_rows + 1):
                workload.insert_row(cur, DB, workload.TABLE, workload.random_row(rng, key))
            cur.execute("COMMIT")
    server.execute(f"ANALYZE TABLE {DB}.narrow, {DB}.{workload.TABLE}")


@dataclass(frozen=True)
class Run:
    """One run of one side: wall seconds, its CPU seconds and the server's, the seconds the server's threads
    waited for block I/O (None unless the kernel counts it), the bytes the side wrote."""

    seconds: float
    cpu: float
    server_cpu: float
    server_io: float | None
    written: int
    durable: float = float("inf")  # dump only: its run plus an fsync of its file


@dataclass
class Best:
    """The fastest run of one side, and every run's wall seconds and server I/O wait, for the medians."""

    best: Run | None = None
    runs: list[Run] = field(default_factory=list)

    def keep(self, run: Run) -> None:
        self.runs.append(run)
        if self.best is None or run.seconds < self.best.seconds:
            self.best = run

    @property
    def durable(self) -> float:
        return min(r.durable for r in self.runs)

    @property
    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def median_server_io(self) -> float | None:
        waits = [r.server_io for r in self.runs if r.server_io is not None]
        return statistics.median(waits) if waits else None


def server_cpu(server: MariaDB) -> float:
    """CPU seconds mariadbd has used so far (/proc/<pid>/stat utime + stime)."""
    fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_io_wait(server: MariaDB) -> float | None:
    """Seconds mariadbd's threads have waited for block I/O so far, or None where the kernel does not count it.

    The count (delayacct_blkio_ticks, field 42 of /proc/<pid>/task/<tid>/stat) is kept only while
    `sysctl kernel.task_delayacct=1` (off by default). It shows a server slowed by the client's writes
    to the disk it reads its pages from, which its CPU seconds do not.
    """
    try:
        if Path("/proc/sys/kernel/task_delayacct").read_text().strip() != "1":
            return None
    except OSError:
        return None
    ticks = 0
    for task in Path(f"/proc/{server.pid}/task").iterdir():
        try:
            ticks += int((task / "stat").read_text().rsplit(")", 1)[1].split()[39])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return ticks / os.sysconf("SC_CLK_TCK")


def measured(run: Callable[[], Any], server: MariaDB, who: tuple[int, ...]) -> tuple[Any, Run]:
    """(result, the Run: wall seconds, CPU seconds of `who` (RUSAGE_SELF and/or _CHILDREN), the server's CPU
    and I/O wait seconds); its `written` is left 0 for the caller."""
    def cpu() -> float:
        return sum(usage.ru_utime + usage.ru_stime for usage in map(resource.getrusage, who))

    cpu0, server0, io0, start = cpu(), server_cpu(server), server_io_wait(server), time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - start
    io1 = server_io_wait(server)
    io = None if io0 is None or io1 is None else io1 - io0
    return result, Run(elapsed, cpu() - cpu0, server_cpu(server) - server0, io, 0)


def bench_cdc(server: MariaDB, table: str, work: Path, profile: bool, request: SnapshotRequest,
              native: bool = True) -> tuple[int, Run]:
    work.mkdir(exist_ok=True)
    state = work / f"state-{table}-{'c' if native else 'py'}"
    os.environ["CDC_NATIVE"] = "1" if native else "0"  # read by compile_table at each run
    settings = load_settings({"mysql.host": server.host, "mysql.port": server.port, "mysql.user": "root",
                              "mysql.tables": (f"{DB}.{table}",), "state_dir": str(state)}, env={}, cwd=work)
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    # --workers: the helper processes are children, reaped before run_snapshot returns.
    summary, run = measured(lambda: run_snapshot(settings, request), server,
                            (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    if profiler:
        profiler.disable()
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats("cdc/(capture|source|state|changelog)", 30)
    written = sum(path.stat().st_size for path in (state / "changelog").glob("seg-*"))
    shutil.rmtree(state)  # the next run's page cache and disk start alike
    return summary.rows, replace(run, written=written)


def bench_dump(server: MariaDB, table: str, work: Path) -> Run:
    """mariadb-dump's run, and the wall seconds with its file fsynced after."""
    dump = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if dump is None:
        raise SystemExit("mariadb-dump not found: apt-get install mariadb-client")
    out = work / f"{table}.sql"
    argv = [dump, "--no-defaults", f"--host={server.host}", f"--port={server.port}", "--user=root",
            "--single-transaction", "--quick", "--hex-blob", f"--result-file={out}", DB, table]
    _, run = measured(lambda: subprocess.run(argv, check=True), server, (resource.RUSAGE_CHILDREN,))
    return replace(run, written=out.stat().st_size, durable=run.seconds + _fsync_seconds(out))


def _fsync_seconds(path: Path) -> float:
    """How long making dump's file durable takes, as cdc's segments are (a reference, not dump's own run)."""
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--narrow-rows", type=int, default=300_000)
    parser.add_argument("--wide-rows", type=int, default=20_000)
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
    parser.add_argument("--workers", type=int, default=1, help="cdc snapshot --workers")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternating; the best counts")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--python-baseline", action="store_true", help="also run the Python reader (CDC_NATIVE=0)")
    parser.add_argument("--buffer-pool", default="64M", help="the server's innodb_buffer_pool_size")
    parser.add_argument("--tables", nargs="+", default=["narrow", workload.TABLE])
    parser.add_argument("--server-dir", type=Path, help="keep the server's datadir under this directory")
    parser.add_argument("--out-dir", type=Path, help="write cdc's state directory and dump's file under this one")
    args = parser.parse_args()
    if native_api.native_module() is None:
        raise SystemExit(f"the C row reader is not in use: {native_api.PROBLEM or 'CDC_NATIVE=0 is set'}")
    server_options = {"innodb-buffer-pool-size": args.buffer_pool}
    server_dir = tempfile.mkdtemp(prefix="cdc-bench-server-", dir=args.server_dir) if args.server_dir else None
    try:
        with MariaDB(server_options, base_dir=server_dir) as server, \
                tempfile.TemporaryDirectory(prefix="cdc-bench-", dir=args.out_dir) as tmp:
            fill(server, args.narrow_rows, args.wide_rows)
            compare(args, server, Path(tmp))
    finally:
        if server_dir:  # the rig removes only the directories it made itself
            shutil.rmtree(server_dir, ignore_errors=True)


def compare(args: argparse.Namespace, server: MariaDB, work: Path) -> None:
    """Run both sides on each table, alternating, and print their figures."""
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{os.cpu_count()} CPUs, chunk size {args.chunk_size}, workers {args.workers}, {args.repeat} runs each, "
          f"server buffer pool {args.buffer_pool}, server files on {args.server_dir or 'the same disk'}, "
          f"output under {work.parent}")
    print(f"{'table':<10} {'rows':>8} {'reader':>6} {'cdc rows/s':>12} {'dump rows/s':>12} {'cdc/dump':>9} "
          f"{'CPU s cdc/dump':>15} {'server CPU s cdc/dump':>22} {'cdc/(dump+fsync)':>17} "
          f"{'median s cdc/dump':>18} {'median cdc/dump':>16} {'bytes/row cdc/dump':>19} "
          f"{'server I/O wait s cdc/dump':>27}")
    readers = [True, False] if args.python_baseline else [True]
    for table in args.tables:
        dump, best, rows = Best(), {native: Best() for native in readers}, 0
        for run in range(args.repeat):
            request = SnapshotRequest(chunk_size=args.chunk_size, workers=args.workers)
            # A run depends on the run before it (the server's buffer pool, at least): cdc's `all_types` took
            # 0.296 s after a dump and 0.244 s after itself (medians; dump 0.246 s after cdc, 0.256 s after
            # itself). Every other round swaps the sides (dump cdc, cdc dump, ...): each follows itself and
            # the other equally often.
            if run % 2:
                rows = _cdc_runs(server, table, work / f"run{run}", args.profile and run == 0, request, readers, best)
            dump.keep(bench_dump(server, table, work))
            if not run % 2:
                rows = _cdc_runs(server, table, work / f"run{run}", args.profile and run == 0, request, readers, best)
        for native in readers:
            print(_figures(table, rows, 'C' if native else 'Python', best[native], dump))
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if server_io_wait(server) is None:
        print("server I/O wait: n/a (as root, `sysctl kernel.task_delayacct=1` makes the kernel count it)")


def _cdc_runs(server: MariaDB, table: str, work: Path, profile: bool, request: SnapshotRequest, readers: list[bool],
              best: dict[bool, Best]) -> int:
    """One run of cdc per reader (C, and Python with --python-baseline); the rows copied."""
    rows = 0
    for native in readers:
        rows, figures = bench_cdc(server, table, work, profile, request, native)
        best[native].keep(figures)
    return rows


def _figures(table: str, rows: int, reader: str, ours: Best, dump: Best) -> str:
    """One table's line: the best runs, their CPU, the medians, bytes written per row, the server's I/O wait."""
    mine, theirs = ours.best, dump.best
    assert mine is not None and theirs is not None
    waits = (ours.median_server_io, dump.median_server_io)
    io = "n/a" if None in waits else f"{waits[0]:.2f}/{waits[1]:.2f}"
    return (f"{table:<10} {rows:>8} {reader:>6} {rows / mine.seconds:>12,.0f} "
            f"{rows / theirs.seconds:>12,.0f} {theirs.seconds / mine.seconds:>9.2f} "
            f"{mine.cpu:>7.2f}/{theirs.cpu:<7.2f} {mine.server_cpu:>11.2f}/{theirs.server_cpu:<10.2f} "
            f"{dump.durable / mine.seconds:>17.2f} {ours.median:>8.3f}/{dump.median:<9.3f} "
            f"{dump.median / ours.median:>16.2f} {mine.written / rows:>9.0f}/{theirs.written / rows:<9.0f} "
            f"{io:>27}")


if __name__ == "__main__":
    main()
