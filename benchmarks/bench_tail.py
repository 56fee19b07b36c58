"""Tail decode rate against `mariadb-binlog --verbose --base64-output=DECODE-ROWS` on the same binlog files.

    .venv/bin/python benchmarks/bench_tail.py [--rows 200000]

Generates a binlog of --rows row changes (inserts, updates with before/after images, deletes; a
mix of integer, decimal, text, datetime and JSON columns) on a throwaway MariaDB, then measures in
the same run: `cdc tail --until-now` (subprocess, into fsynced sealed segments) and mariadb-binlog
decoding the same files to /dev/null. Prints rows/s for both and the ratio (goal: >= 0.25).
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

from cdc.changelog import list_segments  # noqa: E402
from tests.rig import MariaDB  # noqa: E402

BATCH = 5000


def generate(server: MariaDB, rows: int) -> tuple[str, int]:
    """Write `rows` row changes: 50% inserts, 30% updates, 20% deletes; return the start position and count."""
    server.execute("CREATE DATABASE bench")
    server.execute("CREATE TABLE bench.t (id INT PRIMARY KEY, qty INT, price DECIMAL(12,2), name VARCHAR(64), "
                   "created DATETIME(6), doc JSON)")
    file, pos = server.binlog_position()
    inserts, updates, deletes = rows // 2, rows * 3 // 10, rows - rows // 2 - rows * 3 // 10
    for first in range(0, inserts, BATCH):
        last = min(first + BATCH, inserts)
        server.execute(
            "INSERT INTO bench.t SELECT seq, seq % 1000, seq / 7, CONCAT('name-', seq), "
            "'2026-11-22 07:00:01.123456' + INTERVAL seq SECOND, CONCAT('{\"k\": ', seq, '}') "
            f"FROM bench.seq_{first + 1}_to_{last}")
    for first in range(0, updates, BATCH):
        server.execute(f"UPDATE bench.t SET qty = qty + 1 WHERE id > {first} AND id <= {min(first + BATCH, updates)}")
    for first in range(0, deletes, BATCH):
        lo = updates + first
        server.execute(f"DELETE FROM bench.t WHERE id > {lo} AND id <= {lo + min(BATCH, deletes - first)}")
    return f"{file}:{pos}", inserts + updates + deletes


def time_tail(server: MariaDB, start: str, state: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")}
    env.update(CDC_MYSQL_HOST=server.host, CDC_MYSQL_PORT=str(server.port), CDC_MYSQL_USER="root")
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cdc", "tail", "--until-now", "--state-dir", str(state), "--databases",
                    "bench", "--start-position", start], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def time_mariadb_binlog(server: MariaDB, start: str) -> float:
    file, pos = start.rsplit(":", 1)
    files = sorted(p for p in server.datadir.glob("mariadb-bin.[0-9]*") if p.name >= file)
    began = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run(["mariadb-binlog", "--no-defaults", "--verbose", "--base64-output=DECODE-ROWS",
                        f"--start-position={pos}", *map(str, files)], stdout=sink, check=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    with MariaDB() as server, tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        start, rows = generate(server, args.rows)
        print(f"generated {rows:,} row changes in {time.perf_counter() - began:.1f}s")
        reference = time_mariadb_binlog(server, start)
        ours = time_tail(server, start, Path(tmp))
        written = sum(1 for path in list_segments(Path(tmp) / "changelog") for _ in open(path, "rb"))
        assert written == rows + 0, f"tail wrote {written} lines for {rows} row changes"
        print(f"mariadb-binlog --verbose: {rows / reference:12,.0f} rows/s ({reference:.2f}s)")
        print(f"cdc tail --until-now:     {rows / ours:12,.0f} rows/s ({ours:.2f}s, incl. ~1s start-up)")
        print(f"ratio cdc/mariadb-binlog: {reference / ours:12.2f}  (goal >= 0.25)")


if __name__ == "__main__":
    main()
