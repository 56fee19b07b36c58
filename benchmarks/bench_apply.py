"""snowflake-apply of a follow cycle: one batch touching --tables tables with a few changes each, on fakesnow.

    .venv/bin/python benchmarks/bench_apply.py [--tables 16] [--changes 3] [--cycles 5] [--rtt 0.05]

Each cycle seals one batch and applies it the way `cdc run --follow` does (its Applier kept from cycle to
cycle where this cdc has one; a new one per cycle before). fakesnow (the test stand-in, over the real
connector's HTTP protocol) stands in for Snowflake, so seconds say little about Snowflake itself; the
statements per cycle (each one round trip at least) are what carries over. --rtt puts a link of that round
trip between cdc and the stand-in (tests/rig/latency.py: the delay each way, no bandwidth cap), as Snowflake
is a WAN away. Printed: statements and seconds per cycle, the seconds per statement kind, the load average.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cdc.config import SnowflakeSettings  # noqa: E402
from cdc.snowflake import apply, bootstrap  # noqa: E402
from cdc.snowflake.connect import connect  # noqa: E402
from cdc.state import StateDir  # noqa: E402
from tests.rig.latency import LatencyProxy  # noqa: E402
from tests.snowflake.batches import record_schema, row, value, write_batch  # noqa: E402


class Timed:
    """A connection whose cursors time every statement by its first word (the connector still runs it)."""

    def __init__(self, conn: Any, into: Timed | None = None) -> None:
        """into: another session's Timed, whose tallies this one adds to."""
        self.conn = conn
        self.seconds: dict[str, float] = into.seconds if into else defaultdict(float)
        self.counts: dict[str, int] = into.counts if into else defaultdict(int)

    def close(self) -> None:
        self.conn.close()

    def cursor(self) -> Any:
        cursor = self.conn.cursor()
        run = cursor.execute

        def execute(statement: str, *args: Any, **kwargs: Any) -> Any:
            kind = statement.split(None, 1)[0].upper()
            start = time.perf_counter()
            try:
                return run(statement, *args, **kwargs)
            finally:
                self.seconds[kind] += time.perf_counter() - start
                self.counts[kind] += 1

        cursor.execute = execute
        return cursor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=16)
    parser.add_argument("--changes", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--load-sessions", type=int, default=4, help="as snowflake-apply's (where this cdc has it)")
    parser.add_argument("--rtt", type=float, default=0.0, help="seconds a round trip to the stand-in takes more")
    args = parser.parse_args()
    import fakesnow

    with fakesnow.server() as real, LatencyProxy(real["host"], real["port"], one_way=args.rtt / 2) as proxy, \
            tempfile.TemporaryDirectory(prefix="cdc-bench-apply-") as root:
        server = {"host": proxy.host, "port": proxy.port} if args.rtt else real
        # network_timeout = 1, as tests/snowflake/stand_in.py: fakesnow answers what it cannot run (the transaction
        # probe) with HTTP 500, which the connector would otherwise retry for minutes.
        (Path(root) / "connections.toml").write_text(
            f'[fake]\naccount = "fakesnow"\nuser = "fake"\npassword = "snow"\nhost = "{server["host"]}"\n'
            f'port = {server["port"]}\nprotocol = "http"\nnetwork_timeout = 1\n', encoding="utf-8")
        env = {"SNOWFLAKE_HOME": root, "SNOWFLAKE_DEFAULT_CONNECTION_NAME": "fake", "SNOWFLAKE_DATABASE": "BENCH"}
        setup = connect(SnowflakeSettings(), env)
        setup.cursor().execute('CREATE DATABASE IF NOT EXISTS "BENCH"')
        setup.cursor().execute('CREATE SCHEMA IF NOT EXISTS "BENCH"."REPLICA"')
        conn = Timed(connect(SnowflakeSettings(), env | {"SNOWFLAKE_SCHEMA": "REPLICA"}))
        state = StateDir(Path(root) / "state")
        tables = [f"t{i:02d}" for i in range(args.tables)]
        schemas = [record_schema(state.root, "bench", t) for t in tables]
        opts = bootstrap.Options()
        bootstrap.run(conn.conn, bootstrap.targets_for(schemas, opts), opts)
        loaders = "load_sessions" in inspect.signature(apply.Applier).parameters
        more = {"open_connection": lambda: Timed(connect(SnowflakeSettings(), env | {"SNOWFLAKE_SCHEMA": "REPLICA"}),
                                                 into=conn), "load_sessions": args.load_sessions} if loaders else {}
        kept = apply.Applier(conn, state, **more) if "applier" in inspect.signature(apply.run).parameters else None
        per_cycle: list[tuple[int, float]] = []
        for cycle in range(args.cycles):
            base = cycle * args.changes
            write_batch(state.root, cycle + 1, {f"bench.{t}": [
                row(base + k, base + k, "c", **value(base + k)) for k in range(1, args.changes + 1)] for t in tables})
            before = sum(conn.counts.values())
            start = time.perf_counter()
            options = {"applier": kept} if kept is not None else {}
            apply.run(conn, state, **options)
            per_cycle.append((sum(conn.counts.values()) - before, time.perf_counter() - start))
            if cycle == 0:  # the first cycle creates the staging tables; the kinds below are of the later ones
                conn.seconds.clear()
                conn.counts.clear()
        later = per_cycle[1:]
        print(f"tables {args.tables}, changes per table {args.changes}, cycles {args.cycles}, kept Applier: "
              f"{kept is not None}, load sessions {args.load_sessions if loaders else 1}, added round trip {args.rtt:.3f} s, "
              f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print("statements per cycle:", [n for n, _ in per_cycle])
        print("seconds per cycle:", [round(s, 2) for _, s in per_cycle],
              f"median of the later cycles {statistics.median(s for _, s in later):.2f}")
        print("by statement kind (seconds summed over the sessions, which run side by side):")
        for kind in sorted(conn.seconds, key=conn.seconds.get, reverse=True):  # type: ignore[arg-type]
            print(f"  {kind:10} {conn.counts[kind] / len(later):6.1f} per cycle  {conn.seconds[kind] / len(later):6.2f} s "
                  f"per cycle  {1000 * conn.seconds[kind] / conn.counts[kind]:6.1f} ms each")


if __name__ == "__main__":
    main()
