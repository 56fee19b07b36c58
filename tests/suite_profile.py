"""Where the suite's time goes, per test: CPU seconds of the whole process tree, JVM and MariaDB starts.

    CDC_SUITE_PROFILE=/tmp/prof .venv/bin/python -m pytest -p tests.suite_profile -n 2 --dist worksteal
    .venv/bin/python -m tests.suite_profile /tmp/prof          # the summary: totals and the costliest tests

Wall-clock time misleads on a machine shared with other work; CPU seconds do not (much). A test's CPU is the
growth, from its setup's start to its teardown's end, of its worker's tree total: the worker's own time, its
reaped children's, and each live descendant's own and reaped children's (from /proc), so a JVM or a mariadbd
that a test starts and stops counts whole, and one that outlives the test (the session's SparkSession, the
session's MariaDB) counts for the part of its work done during the test. A sampler thread (every 0.2 s)
records the descendants' pids to count the JVMs (`java`) and servers (`mariadbd`) each test starts; a
process that lives less than 0.2 s may go uncounted (neither lives that short).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")
_COUNTED = ("java", "mariadbd")
_PR_SET_CHILD_SUBREAPER = 36


def _stat(pid: str) -> tuple[str, int, float, float] | None:
    """(command name, ppid, start time in ticks, CPU ticks of the process and its reaped children)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): ppid is field 4, utime..cstime 14-17, starttime 22.
    return name, int(fields[1]), float(fields[19]), sum(float(f) for f in fields[11:15])


def _descendants() -> Iterator[tuple[str, str, float, float, int]]:
    """(pid, name, start time, CPU ticks, ppid) of every live (or not yet reaped) descendant of this process."""
    stats = {pid: _stat(pid) for pid in os.listdir("/proc") if pid.isdigit()}
    children: dict[int, list[str]] = {}
    for pid, stat in stats.items():
        if stat is not None:
            children.setdefault(stat[1], []).append(pid)
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        stat = stats[pid]
        assert stat is not None
        yield pid, stat[0], stat[2], stat[3], stat[1]
        todo += children.get(int(pid), [])


def _is_zombie(pid: str) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return raw[raw.rindex(")") + 2] == "Z"


def tree_cpu() -> float:
    """CPU seconds used so far by this process, its reaped children and its live descendants."""
    own = os.times()
    live = sum(ticks for _, _, _, ticks, _ in _descendants()) / _TICKS
    return own.user + own.system + own.children_user + own.children_system + live


class _Sampler:
    """Remembers every java and mariadbd process seen under this process, by (pid, start time).

    The worker becomes a child subreaper, so that a process orphaned under it (a JVM outliving the Python
    that started it) stays in its tree; the sampler reaps those orphans (never a child this process started
    itself: subprocess waits for those), which adds their CPU to this process's children's time.
    """

    def __init__(self) -> None:
        self.seen: dict[tuple[str, float], str] = {}
        self._lock = threading.Lock()
        self._parents: dict[tuple[str, float], int] = {}  # the parent each process had when first seen
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        threading.Thread(target=self._run, daemon=True, name="suite-profile").start()

    def _run(self) -> None:
        while True:
            self.sample()
            time.sleep(0.2)

    def sample(self) -> None:
        found: dict[tuple[str, float], str] = {}
        me = os.getpid()
        for pid, name, start, _, ppid in _descendants():
            if name in _COUNTED:
                found[(pid, start)] = name
            first_parent = self._parents.setdefault((pid, start), ppid)
            if ppid == me and first_parent != me and _is_zombie(pid):
                with contextlib.suppress(ChildProcessError):  # the other thread's sample reaped it first
                    os.waitpid(int(pid), os.WNOHANG)  # an orphan we adopted, never one of our own children
        with self._lock:
            self.seen.update(found)

    def snapshot(self) -> set[tuple[str, float]]:
        with self._lock:
            return set(self.seen)

    def names(self, keys: set[tuple[str, float]]) -> list[str]:
        with self._lock:
            return [self.seen[key] for key in keys]


_SAMPLER: _Sampler | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _SAMPLER
    if os.environ.get("CDC_SUITE_PROFILE"):
        _SAMPLER = _Sampler()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    out = os.environ.get("CDC_SUITE_PROFILE")
    if not out or _SAMPLER is None:
        yield
        return
    _SAMPLER.sample()
    before, cpu, wall = _SAMPLER.snapshot(), tree_cpu(), time.monotonic()
    yield
    _SAMPLER.sample()
    cpu, wall = tree_cpu() - cpu, time.monotonic() - wall
    started = _SAMPLER.names(_SAMPLER.snapshot() - before)
    record = {
        "test": item.nodeid, "cpu": round(cpu, 2), "wall": round(wall, 2),
        "jvm": started.count("java"), "mariadbd": started.count("mariadbd"),
    }
    Path(out).mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(out) / f"{worker}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def summarize(folder: Path, top: int = 40) -> str:
    """Totals over every worker's records and the `top` tests by CPU seconds."""
    records = [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.open()]
    lines = [
        f"{len(records)} tests: CPU {sum(r['cpu'] for r in records):.0f} s, wall (summed over workers) "
        f"{sum(r['wall'] for r in records):.0f} s, JVM starts {sum(r['jvm'] for r in records)}, "
        f"mariadbd starts {sum(r['mariadbd'] for r in records)}"
    ]
    for r in sorted(records, key=lambda r: -r["cpu"])[:top]:
        lines.append(f"{r['cpu']:7.1f} cpu {r['wall']:7.1f} wall {r['jvm']:2d} jvm {r['mariadbd']:2d} db  {r['test']}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
