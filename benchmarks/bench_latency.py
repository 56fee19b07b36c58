"""Commit -> sealed-segment latency of `cdc tail --follow` under a steady workload, p50 and p99.

    .venv/bin/python benchmarks/bench_latency.py [--seconds 20] [--rate 50] [--flush-interval 0.5 0.25] [--decode-workers N]

For each --flush-interval: start `cdc tail --follow` (a subprocess, as a user runs it) on a throwaway
MariaDB, commit --rate small transactions per second (5 rows each, the issue-8 column mix) for
--seconds, and watch the change-log directory every 2 ms. A transaction's latency is the time from
its COMMIT returning to the writer until a sealed segment holding its lines is visible (renamed into
place after fsync), so it includes the tail's read, decode, fsync and the flush interval. One warm-up
transaction before the measurement (not counted) lets tail read the table's schema once.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tail import ROW_SQL, TABLE_SQL  # noqa: E402

from cdc.changelog import list_segments  # noqa: E402
from tests.capture.conftest import env_for  # noqa: E402
from tests.rig import MariaDB  # noqa: E402

ROWS_PER_TXN = 5


def write_steadily(server: MariaDB, seconds: float, rate: float, first_id: int) -> dict[int, float]:
    """Commit `rate` transactions per second; return {first row id of the transaction: commit time}."""
    committed: dict[int, float] = {}
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        began, n = time.monotonic(), 0
        while time.monotonic() - began < seconds:
            key = first_id + n * ROWS_PER_TXN
            cur.execute(f"INSERT INTO bench.t {ROW_SQL} FROM bench.seq_{key}_to_{key + ROWS_PER_TXN - 1}")
            conn.commit()
            committed[key] = time.monotonic()
            n += 1
            time.sleep(max(0.0, began + n / rate - time.monotonic()))
    return committed


def watch(directory: Path, seen: dict[str, float], stop: threading.Event) -> None:
    while not stop.is_set():
        if directory.is_dir():
            now = time.monotonic()
            for path in list_segments(directory):
                seen.setdefault(path.name, now)
        time.sleep(0.002)


def measure(server: MariaDB, state: Path, args: argparse.Namespace, flush_interval: float, first_id: int) -> list[float]:
    argv = [sys.executable, "-m", "cdc", "tail", "--follow", "--from-now", "--databases", "bench",
            "--flush-interval", str(flush_interval), "--state-dir", str(state)]
    if args.decode_workers is not None:
        argv += ["--decode-workers", str(args.decode_workers)]
    tail = subprocess.Popen(argv, cwd=ROOT, env=env_for(server), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(state / "changelog", seen, stop), daemon=True)
    watcher.start()
    try:
        time.sleep(3)  # start-up: interpreter, imports, connect, first checkpoint
        # Warm-up, not measured: the first table map of a table makes tail read information_schema once.
        write_steadily(server, 0.01, args.rate, first_id + 9_000_000)
        time.sleep(flush_interval + 1)
        committed = write_steadily(server, args.seconds, args.rate, first_id)
        time.sleep(flush_interval + 2)
    finally:
        stop.set()
        watcher.join()
        tail.send_signal(signal.SIGTERM)
        _, err = tail.communicate(timeout=30)
    latencies = []
    for path in list_segments(state / "changelog"):
        for line in path.read_bytes().splitlines():
            key = orjson.loads(line)["key"]["id"]
            if key in committed:
                latencies.append(seen[path.name] - committed[key])
    assert len(latencies) == len(committed), f"{len(committed)} commits, {len(latencies)} seen; tail: {err[-2000:]!r}"
    return sorted(latencies)


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(fraction * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=50.0, help="transactions per second")
    parser.add_argument("--flush-interval", type=float, nargs="+", default=[0.5, 0.25])
    parser.add_argument("--decode-workers", type=int, default=None, help="tail's --decode-workers (default: its own)")
    args = parser.parse_args()
    with MariaDB() as server, tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp:
        server.execute("CREATE DATABASE bench")
        server.execute(TABLE_SQL)
        workers = "" if args.decode_workers is None else f" --decode-workers {args.decode_workers}"
        print(f"{args.rate:.0f} transactions/s of {ROWS_PER_TXN} rows for {args.seconds:.0f}s, `cdc tail --follow{workers}`")
        print(f"{'--flush-interval':>16} {'commits':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for i, interval in enumerate(args.flush_interval):
            latencies = measure(server, Path(tmp) / f"state-{i}", args, interval, 1 + i * 10_000_000)
            print(f"{interval:>16.2f} {len(latencies):>8} {percentile(latencies, 0.5) * 1000:>8.0f} "
                  f"{percentile(latencies, 0.99) * 1000:>8.0f} {latencies[-1] * 1000:>8.0f}")


if __name__ == "__main__":
    main()
