"""Peak RSS of `cdc tail --until-now` over one transaction of --rows rows (default 1,000,000).

    .venv/bin/python benchmarks/bench_memory.py [--rows 1000000]

One INSERT ... SELECT of --rows rows in the issue-8 column mix (one transaction, so tail must hold it
until COMMIT: TransactionBuffer spills past --spill-mib to a temp file). `cdc tail` runs as a subprocess
the way a user runs it; its peak RSS comes from wait4() (ru_maxrss). Also prints the RSS of the same
command over a 1,000-row transaction, the interpreter-and-imports baseline.
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


def tail_peak_rss(server: MariaDB, state: Path, start: str) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of `cdc tail --until-now` from `start`."""
    argv = [sys.executable, "-m", "cdc", "tail", "--until-now", "--databases", "bench", "--start-position", start,
            "--state-dir", str(state)]
    began = time.perf_counter()
    child = subprocess.Popen(argv, cwd=ROOT, env=env_for(server), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"cdc tail exited with {child.returncode}")
    return time.perf_counter() - began, usage.ru_maxrss / 1024  # Linux: kilobytes


def one_transaction(server: MariaDB, rows: int, first: int) -> str:
    file, pos = server.binlog_position()
    server.execute(f"INSERT INTO bench.t {ROW_SQL} FROM bench.seq_{first}_to_{first + rows - 1}", timeout=3600)
    return f"{file}:{pos}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with MariaDB(options={"max-binlog-size": "1G"}) as server, tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp:
        server.execute("CREATE DATABASE bench")
        server.execute(TABLE_SQL)
        print(f"{'transaction':>12} {'seconds':>8} {'rows/s':>9} {'peak RSS MiB':>13} {'lines':>9}")
        for label, rows, first in (("1,000 rows", 1000, 1), (f"{args.rows:,} rows", args.rows, 1001)):
            start = one_transaction(server, rows, first)
            state = Path(tmp) / f"state-{first}"
            seconds, rss = tail_peak_rss(server, state, start)
            lines = sum(1 for path in list_segments(state / "changelog") for _ in open(path, "rb"))
            assert lines == rows, f"tail wrote {lines} lines for {rows} rows"
            print(f"{label:>12} {seconds:>8.1f} {rows / seconds:>9,.0f} {rss:>13.0f} {lines:>9,}")


if __name__ == "__main__":
    main()
