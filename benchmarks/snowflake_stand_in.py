"""The Snowflake stand-in (fakesnow's server) in a process of its own, for the benchmarks.

    python benchmarks/snowflake_stand_in.py      # prints its connect parameters as one JSON line; ends at stdin's EOF

Snowflake is a service with its own compute: a stand-in running in the benchmark's process shares that
process's GIL with the workload, the watchers and the poller, so every statement cdc sends waits for them
(measured: the poller's queries and the segment watcher held the stand-in's threads back, and a cycle's apply
looked slower than the statements themselves are).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import fakesnow

    from tests.snowflake.stand_in import faithful_not_null

    faithful_not_null()
    with fakesnow.server() as params:
        for name in ("uvicorn", "uvicorn.access", "uvicorn.error", "fakesnow", "fakesnow.server", "sqlglot"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        sys.stdout.write(json.dumps(params) + "\n")
        sys.stdout.flush()
        sys.stdin.read()  # until the benchmark closes the pipe (or exits)


if __name__ == "__main__":
    main()
