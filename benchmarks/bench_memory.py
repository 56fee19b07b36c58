"""Peak RSS of `cdc tail --until-now` over one transaction of --rows rows (default 1,000,000).

    .venv/bin/python benchmarks/bench_memory.py [--rows 1000000]

One INSERT ... SELECT of --rows rows in the issue-8 column mix (one transaction, so tail must hold it
until COMMIT: TransactionBuffer spills past --spill-mib to a temp file). `cdc tail` runs as a subprocess
the way a user runs it; its peak RSS comes from wait4() (ru_maxrss), its decode workers' from their VmHWM.
Also prints the RSS of the same command over a 1,000-row transaction, the interpreter-and-imports baseline.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tail import ROW_SQL, TABLE_SQL  # noqa: E402

from cdc.changelog import list_segments  # noqa: E402
from tests.capture.conftest import env_for  # noqa: E402
from tests.rig import MariaDB  # noqa: E402


def _hwm_mib(pid: int) -> float:
    """Peak RSS so far of a live process (VmHWM), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0.0)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def tail_peak_rss(server: MariaDB, state: Path, start: str, workers: int | None) -> tuple[float, float, float]:
    """(seconds, peak RSS of the tail process, peak RSS of its decode workers) in MiB, of `cdc tail --until-now`.

    The tail process's peak comes from wait4() (ru_maxrss); the workers' (summed) from sampling their VmHWM every
    50 ms while they run (their last 50 ms may be missed; they hold one rows event at a time).
    """
    argv = [sys.executable, "-m", "cdc", "tail", "--until-now", "--databases", "bench", "--start-position", start,
            "--state-dir", str(state)] + ([] if workers is None else ["--decode-workers", str(workers)])
    began = time.perf_counter()
    child = subprocess.Popen(argv, cwd=ROOT, env=env_for(server), stdout=subprocess.DEVNULL)
    peaks: dict[int, float] = {}
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        for worker in _children(child.pid):
            peaks[worker] = max(peaks.get(worker, 0.0), _hwm_mib(worker))
        time.sleep(0.05)
    seconds = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"cdc tail exited with {child.returncode}")
    # ru_maxrss of a waited-for child is the largest of it and its own waited-for children: tail's in practice.
    return seconds, usage.ru_maxrss / 1024, sum(peaks.values())  # Linux: kilobytes


def one_transaction(server: MariaDB, rows: int, first: int) -> str:
    file, pos = server.binlog_position()
    server.execute(f"INSERT INTO bench.t {ROW_SQL} FROM bench.seq_{first}_to_{first + rows - 1}", timeout=3600)
    return f"{file}:{pos}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--decode-workers", type=int, default=None, help="tail's --decode-workers (default: its own)")
    args = parser.parse_args()
    with MariaDB(options={"max-binlog-size": "1G"}) as server, tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp:
        server.execute("CREATE DATABASE bench")
        server.execute(TABLE_SQL)
        print(f"{'transaction':>12} {'seconds':>8} {'rows/s':>9} {'tail RSS MiB':>13} {'workers MiB':>12} {'lines':>9}")
        for label, rows, first in (("1,000 rows", 1000, 1), (f"{args.rows:,} rows", args.rows, 1001)):
            start = one_transaction(server, rows, first)
            state = Path(tmp) / f"state-{first}"
            seconds, rss, workers = tail_peak_rss(server, state, start, args.decode_workers)
            lines = sum(1 for path in list_segments(state / "changelog") for _ in open(path, "rb"))
            assert lines == rows, f"tail wrote {lines} lines for {rows} rows"
            print(f"{label:>12} {seconds:>8.1f} {rows / seconds:>9,.0f} {rss:>13.0f} {workers:>12.0f} {lines:>9,}")


if __name__ == "__main__":
    main()
