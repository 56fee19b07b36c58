"""Soak: `cdc run --follow` for --minutes (default 30) under a steady workload with periodic faults (issue #27).

    .venv/bin/python benchmarks/bench_soak.py [--minutes 30] [--kill-every 5] [--faulty-links mysql,aws,snowflake]
                                              [--log soak.log]
    .venv/bin/python benchmarks/bench_soak.py --minutes 16 --kill-every 0   # one uninterrupted run: its own growth

Runs the slow soak test (tests/pipeline/test_soak.py::test_long_soak_stays_bounded_and_exact), which starts its
own MariaDB, moto and fakesnow, puts a FaultProxy in front of each (drop, stall, half-close, reset at random
moments), kills `cdc run --follow` with kill -9 every --kill-every minutes (0: never) and restarts it, and samples
the run's process group (RSS and the JVM's share of it, open fds, threads) and the state directory from /proc.
Prints the samples as a table over time and a JSON line of figures (kills, faults per link, workload, rows
compared, differences); the test fails if a resource grows after the warm-up or anything differs at the end
(lake and Snowflake vs SELECT *, `cdc verify`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--kill-every", type=float, default=5.0, help="minutes between kill -9s of the run (0: none)")
    parser.add_argument("--faulty-links", default="mysql,aws,snowflake", help="the links network faults strike")
    parser.add_argument("--log", type=Path, default=None, help="keep pytest's whole output here")
    args = parser.parse_args()
    env = dict(os.environ, SOAK_LONG_SECONDS=str(args.minutes * 60), SOAK_KILL_EVERY=str(args.kill_every * 60),
               SOAK_FAULTY_LINKS=args.faulty_links)
    argv = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-s", "-p", "no:logging", "-m", "slow",
            "tests/pipeline/test_soak.py::test_long_soak_stays_bounded_and_exact"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    if args.log:
        args.log.write_text(output, encoding="utf-8")
    # The table (a header, then one line per sample), the figures, pytest's verdict: nothing of the servers' chatter.
    wanted = re.compile(r"^(\s+t \(s\)|\s+\d+ |soak: |\d+ (passed|failed)|FAILED|E )")
    print("\n".join(line for line in output.splitlines() if wanted.match(line)))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
