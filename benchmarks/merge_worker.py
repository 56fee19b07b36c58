"""A long-lived spark-merge process for bench_merge.py: one SparkSession, merges on request.

    python benchmarks/merge_worker.py --code /path/to/a/checkout [--driver-memory 4g]

It imports `cdc` from --code, so two checkouts (the code before a change and after it) can run side
by side, each warm, on the same data. Protocol, one JSON document per line: it first prints
{"session": seconds}; then for each request {"state": dir, "max_segments": n or null} read on stdin it
merges and prints {"seconds": wall seconds of merge(), "cpu": CPU seconds of the JVM and this process during it,
"summary": the MergeSummary as a dict}. CPU time moves much less than wall time when other jobs
share the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--code", required=True, help="checkout whose cdc package is imported")
    parser.add_argument("--driver-memory", default="4g")
    args = parser.parse_args()
    sys.path.insert(0, args.code)
    from cdc.config import SparkSettings
    from cdc.spark import merge
    from cdc.spark.session import build_session
    from cdc.state import StateDir

    started = time.monotonic()
    spark = build_session(SparkSettings(driver_memory=args.driver_memory))
    _reply({"session": time.monotonic() - started})
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    for request in sys.stdin:
        order = json.loads(request)
        t0, cpu0 = time.monotonic(), _cpu(jvm)
        summary = merge(StateDir(order["state"]), spark=spark, max_segments=order.get("max_segments"))
        _reply({"seconds": time.monotonic() - t0, "cpu": _cpu(jvm) - cpu0, "summary": summary.to_dict()})
    spark.stop()


def _cpu(jvm: int) -> float:
    """User + system CPU seconds of the JVM (all its threads: tasks, GC, JIT) and of this Python driver."""
    fields = Path(f"/proc/{jvm}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + time.process_time()


def _reply(document: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
