"""End-to-end freshness: COMMIT in MariaDB -> the row, with its committed values, in Snowflake (p50/p95/p99/max).

    .venv/bin/python benchmarks/bench_freshness.py [--seconds 60] [--rate 50] [--tables 16] [--sample 0.2]
        [--rtt 0.05] [--load-sessions 4]

Starts a throwaway MariaDB (tests/rig), moto's server (the S3 bucket `ship-s3` writes to) and fakesnow's
server (the Snowflake stand-in, in a process of its own: benchmarks/snowflake_stand_in.py), snapshots --tables
tables of --rows rows each, then runs `cdc run --follow --json` as a subprocess, as a user runs it. Once its
first snowflake-apply has loaded the snapshot, a steady workload commits --rate transactions per second for
--seconds: each one statement on a random table, an insert (40%), an update (35%), a delete (15%) or a
primary-key change (10%). Every transaction writes a global sequence number into the row (`v`, and `note` =
"n<v>"), so a value seen anywhere names its transaction.

A --sample fraction of the inserted / updated / re-keyed rows are followed (and never written again):
- commit -> sealed segment: a watcher sees their line in a sealed change-log segment (every 20 ms);
- commit -> lake: `cdc run` reports a spark-merge (`--json` stage line) whose segments include it;
- commit -> Snowflake: a look finds the row with its committed `v` and `note` in the stand-in (one query for
  every table with merged rows not yet seen), made as each snowflake-apply reports done (`--look after-apply`,
  the default); the row's time is when that query answered, so never before the apply ended. `--look poll`
  looks every 100 ms instead, as the benchmark did up to 2026-12-02: the stand-in runs on the measured machine
  and serves one statement at a time, so a look every 100 ms (~130 ms of its time for 16 tables here) held back
  the apply being measured; a Snowflake warehouse serves its readers on its own machines.
Printed: p50/p95/p99/max of each, the load average at start and end, the CPU seconds of `cdc run` (with its
JVM) and of the stand-in during the workload (a real warehouse's CPU is not this machine's), where `cdc run`'s
cycles spent their time (each stage's median and max seconds in the cycles that did work) and how many
statements each apply sent (Snowflake's own time per statement is what a real apply adds up). `--lines FILE`
writes the run's stage lines as a timeline (start, end, cycle, stage, status). `--rtt S` puts a link of that
round trip between `cdc run` and the stand-in (tests/rig/latency.py; the looks go straight to it), as a
warehouse is a WAN away; `--load-sessions N` is `cdc run`'s `[snowflake] load_sessions` (its default when not
given).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cdc.changelog import list_segments  # noqa: E402
from tests.rig import MariaDB, MotoServer  # noqa: E402
from tests.rig.latency import LatencyProxy  # noqa: E402

DB, BUCKET, SF_DATABASE, SF_SCHEMA = "fresh", "cdc-bench-lake", "BENCH", "REPLICA"


@dataclass
class Sample:
    table: str
    key: int
    seq: int
    committed: float
    segment: str | None = None
    sealed: float | None = None
    lake: float | None = None
    visible: float | None = None


@dataclass
class Book:
    """What every thread shares: the followed rows by sequence number, the run's stage lines."""

    samples: dict[int, Sample] = field(default_factory=dict)
    stages: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The snapshot is in Snowflake: the first snowflake-apply is done. Not the first cycle's end: with an apply run
    # beside the next cycle (tried 2026-12-05), that came first, and the workload's first rows timed the snapshot's.
    loaded: threading.Event = field(default_factory=threading.Event)
    applied: threading.Event = field(default_factory=threading.Event)  # a snowflake-apply reported done
    # Each sequence number's (segment, first seen) once sealed: tail may seal a commit before the workload has
    # recorded it as followed (within 0.5 s since tail runs beside the cycles), and it must still be matched.
    sealed: dict[int, tuple[str, int, float]] = field(default_factory=dict)


def table_name(i: int) -> str:
    return f"t{i:02d}"


def load_source(server: MariaDB, tables: int, rows: int) -> dict[str, list[int]]:
    server.execute(f"CREATE DATABASE {DB}")
    live: dict[str, list[int]] = {}
    for i in range(tables):
        name = table_name(i)
        server.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v BIGINT NOT NULL, note VARCHAR(40), "
                       "at DATETIME(6))", database=DB)
        server.execute(f"INSERT INTO {name} SELECT seq, 0, CONCAT('n0-', seq), NOW(6) FROM seq_1_to_{rows}",
                       database=DB)
        live[name] = list(range(1, rows + 1))
    return live


def workload(server: MariaDB, book: Book, live: dict[str, list[int]], args: argparse.Namespace,
             stop: threading.Event) -> int:
    """Commit args.rate one-statement transactions per second for args.seconds; return how many."""
    rng = random.Random(7)
    next_key = {name: len(keys) + 1 for name, keys in live.items()}
    with server.connect(autocommit=False, database=DB) as conn, conn.cursor() as cur:
        began, n = time.monotonic(), 0
        while time.monotonic() - began < args.seconds and not stop.is_set():
            n += 1
            name = rng.choice(list(live))
            keys, roll = live[name], rng.random()
            if roll < 0.40 or len(keys) < 10:
                key = next_key[name]
                next_key[name] += 1
                cur.execute(f"INSERT INTO {name} VALUES (%s, %s, %s, NOW(6))", (key, n, f"n{n}"))
                keys.append(key)
            elif roll < 0.75:
                key = rng.choice(keys)
                cur.execute(f"UPDATE {name} SET v = %s, note = %s, at = NOW(6) WHERE id = %s", (n, f"n{n}", key))
            elif roll < 0.90:
                key = keys.pop(rng.randrange(len(keys)))
                cur.execute(f"DELETE FROM {name} WHERE id = %s", (key,))
                key = -1
            else:
                old = keys.pop(rng.randrange(len(keys)))
                key = next_key[name]
                next_key[name] += 1
                cur.execute(f"UPDATE {name} SET id = %s, v = %s, note = %s WHERE id = %s", (key, n, f"n{n}", old))
                keys.append(key)
            conn.commit()
            committed = time.monotonic()
            if key > 0 and rng.random() < args.sample:
                keys.remove(key)  # followed: never written again, so its values stay the committed ones
                with book.lock:
                    sample = book.samples[n] = Sample(name, key, n, committed)
                    segment, sealed_key, seen = book.sealed.get(n, (None, None, 0.0))
                    if segment is not None and sealed_key == key:  # sealed and read before this line ran
                        sample.segment, sample.sealed = segment, max(seen, committed)
            time.sleep(max(0.0, began + n / args.rate - time.monotonic()))
    return n


def watch_segments(directory: Path, book: Book, stop: threading.Event) -> None:
    """Sealed segments as they appear: each followed row's segment and the time it was first seen."""
    seen: set[str] = set()
    while not stop.is_set():
        now = time.monotonic()
        for path in list_segments(directory) if directory.is_dir() else []:
            if path.name in seen:
                continue
            seen.add(path.name)
            for line in path.read_bytes().splitlines():
                change = orjson.loads(line)
                after = change.get("after") or {}
                with book.lock:
                    book.sealed.setdefault(after.get("v", 0), (path.name, after.get("id"), now))
                    sample = book.samples.get(after.get("v", 0))
                    if sample is not None and sample.segment is None and after.get("id") == sample.key:
                        sample.segment, sample.sealed = path.name, now
        stop.wait(0.02)


def read_run(stdout: Any, book: Book) -> None:
    """`cdc run --json` lines: spark-merge's merged segments mark the followed rows as in the lake."""
    for raw in stdout:
        event = json.loads(raw)
        now = time.monotonic()
        with book.lock:
            book.stages.append((now, event))
            if event.get("stage") == "snowflake-apply" and event["status"] == "done":
                book.applied.set()
                book.loaded.set()
            if event.get("stage") == "spark-merge" and event["status"] == "done":
                last = event["detail"]["segments"][-1]
                for sample in book.samples.values():
                    if sample.lake is None and sample.segment is not None and sample.segment <= last:
                        sample.lake = now


def poll_snowflake(params: dict[str, Any], book: Book, stop: threading.Event, interval: float | None) -> None:
    """The merged followed rows not yet seen, looked up with their committed values in one query: after each
    snowflake-apply (interval None), or every `interval` seconds.

    One query per look, not one per table: the stand-in runs one statement at a time, so 16 queries every 100 ms
    kept it busy and held back the statements of the run being measured.
    """
    import snowflake.connector

    conn = snowflake.connector.connect(**params, database=SF_DATABASE, schema=SF_SCHEMA)
    try:
        while not stop.is_set():
            if interval is None:
                if not book.applied.wait(0.5):
                    continue
                book.applied.clear()  # an apply ending during the look below is looked after again
            with book.lock:
                pending: dict[str, list[Sample]] = {}
                for s in book.samples.values():
                    # Merged only: apply loads what a merge reported, so a row not yet in the lake cannot be in
                    # Snowflake; looking for it too made each look a 16-table query the stand-in had to serve.
                    if s.visible is None and s.lake is not None:
                        pending.setdefault(s.table, []).append(s)
            if pending:
                _look(conn, pending, book)
            if interval is not None:
                stop.wait(interval)
    finally:
        conn.close()


def _look(conn: Any, pending: dict[str, list[Sample]], book: Book) -> None:
    import snowflake.connector

    query = " UNION ALL ".join(
        f"SELECT '{name}' AS \"T\", \"ID\", \"V\", \"NOTE\" FROM \"{name.upper()}\" "
        f"WHERE \"ID\" IN ({', '.join(str(s.key) for s in samples)})" for name, samples in pending.items())
    try:
        found = conn.cursor().execute(query).fetchall()
    except snowflake.connector.errors.ProgrammingError:
        return  # a table not bootstrapped yet
    now, rows = time.monotonic(), {(r[0], r[1]): r for r in found}
    with book.lock:
        for name, samples in pending.items():
            for s in samples:
                row = rows.get((name, s.key))
                if row is not None and row[2] == s.seq and row[3] == f"n{s.seq}":
                    s.visible = now


@contextmanager
def snowflake_stand_in(workdir: Path) -> Iterator[tuple[dict[str, str], dict[str, Any], int]]:
    """fakesnow's server in a process of its own (benchmarks/snowflake_stand_in.py): SNOWFLAKE_HOME for `cdc`, the
    connect parameters for the poller, and its pid (its CPU is counted apart)."""
    import snowflake.connector

    server = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "snowflake_stand_in.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        params = json.loads(server.stdout.readline() or "null") or {}
        if not params:
            raise SystemExit(f"the Snowflake stand-in did not start (exit {server.wait()})")
        home = workdir / "snowflake"
        home.mkdir(mode=0o700)
        config = home / "connections.toml"
        config.write_text(
            f'[local]\naccount = "{params["account"]}"\nuser = "{params["user"]}"\npassword = "{params["password"]}"\n'
            f'host = "{params["host"]}"\nport = {params["port"]}\nprotocol = "http"\nnetwork_timeout = 5\n')
        os.chmod(config, 0o600)
        conn = snowflake.connector.connect(**params)
        conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {SF_DATABASE}")
        conn.cursor().execute(f"CREATE SCHEMA IF NOT EXISTS {SF_DATABASE}.{SF_SCHEMA}")
        conn.close()
        yield {"SNOWFLAKE_HOME": str(home)}, params, server.pid
    finally:
        if server.stdin:
            server.stdin.close()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def write_config(workdir: Path, server: MariaDB, moto: MotoServer) -> Path:
    path = workdir / "cdc.toml"
    path.write_text(
        f'state_dir = "{workdir / ".cdc"}"\n\n'
        f'[mysql]\nhost = "{server.host}"\nport = {server.port}\nuser = "root"\nssl_mode = "DISABLED"\n'
        f'databases = ["{DB}"]\n\n'
        f'[aws]\nregion = "us-east-1"\nendpoint_url = "{moto.endpoint_url}"\nbucket = "{BUCKET}"\nprefix = "cdc"\n\n'
        '[spark]\nmaster = "local[2]"\ndriver_memory = "1g"\n\n'
        f'[snowflake]\nconnection = "local"\ndatabase = "{SF_DATABASE}"\nschema = "{SF_SCHEMA}"\n')
    return path


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its live descendants (cdc run: its JVM), from /proc."""
    total, todo = 0.0, [pid]
    while todo:
        at = todo.pop()
        try:
            fields = Path(f"/proc/{at}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{at}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):  # ended meanwhile
            continue
    return total


def percentiles(values: list[float]) -> str:
    if not values:
        return f"{'-':>8} {'-':>8} {'-':>8} {'-':>8}"
    values = sorted(values)
    pick = [values[min(len(values) - 1, int(f * len(values)))] for f in (0.5, 0.95, 0.99)] + [values[-1]]
    return " ".join(f"{v:>8.2f}" for v in pick)


def report(book: Book, transactions: int, args: argparse.Namespace, loads: list[tuple[float, ...]],
           cpu: dict[str, float]) -> None:
    samples = list(book.samples.values())
    print(f"\n{transactions} transactions in {args.seconds:.0f} s over {args.tables} tables "
          f"({transactions / args.seconds:.1f}/s), {len(samples)} followed rows")
    print(f"Snowflake looked at: {'every 100 ms' if args.look == 'poll' else 'after each snowflake-apply'}")
    print(f"{'commit ->':<22} {'rows':>6} {'p50 s':>8} {'p95 s':>8} {'p99 s':>8} {'max s':>8}")
    for label, attr in (("sealed segment", "sealed"), ("lake (merge reported)", "lake"), ("Snowflake", "visible")):
        values = [getattr(s, attr) - s.committed for s in samples if getattr(s, attr) is not None]
        print(f"{label:<22} {len(values):>6} {percentiles(values)}")
    missing = [s for s in samples if s.visible is None]
    if missing:
        print(f"NOT VISIBLE in Snowflake by the end: {len(missing)} rows, e.g. {missing[:3]}")
    print("load average (1, 5, 15 min): " + "; ".join(" ".join(f"{x:.2f}" for x in load) for load in loads))
    # Snowflake runs its statements on its own machines; the stand-in's share here is this machine's, not cdc's.
    print("CPU seconds from the workload's start to the last row seen: "
          + ", ".join(f"{name} {seconds:.1f}" for name, seconds in cpu.items()))
    print("\n`cdc run` cycles that did work (seconds per stage):")
    print(f"{'stage':<22} {'runs':>5} {'median':>8} {'max':>8}")
    per_stage: dict[str, list[float]] = {}
    for _, event in book.stages:
        if event.get("event") == "stage" and event["status"] == "done":
            per_stage.setdefault(event["stage"], []).append(event["seconds"])
    for stage, seconds in per_stage.items():
        seconds.sort()
        print(f"{stage:<22} {len(seconds):>5} {seconds[len(seconds) // 2]:>8.2f} {seconds[-1]:>8.2f}")
    cycles = [e["seconds"] for _, e in book.stages if e.get("event") == "cycle"]
    merges = [e["detail"].get("phases", {}) for _, e in book.stages
              if e.get("stage") == "spark-merge" and e["status"] == "done"]
    if merges:
        print(f"spark-merge phases, last run: {merges[-1]}")
    statements = sorted(e["detail"].get("statements", 0) for _, e in book.stages
                        if e.get("stage") == "snowflake-apply" and e["status"] == "done")
    if statements:  # Snowflake's own time per statement (compile, queue, run) is what a real apply adds up
        print(f"snowflake-apply statements per run: median {statements[len(statements) // 2]}, max {statements[-1]}")
    print(f"cycles: {len(cycles)}")


def run(args: argparse.Namespace, workdir: Path) -> None:
    with ExitStack() as stack:
        server = stack.enter_context(MariaDB())
        live = load_source(server, args.tables, args.rows)
        moto = stack.enter_context(MotoServer())
        moto.client("s3").create_bucket(Bucket=BUCKET)
        snowflake_env, params, stand_in = stack.enter_context(snowflake_stand_in(workdir))
        config = write_config(workdir, server, moto)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CDC_", "SNOWFLAKE_", "MYSQL_"))}
        env.update(moto.env, **snowflake_env, PYTHONPATH=str(ROOT))
        if args.rtt:  # cdc's connections only (SNOWFLAKE_HOST/PORT override connections.toml's)
            link = stack.enter_context(LatencyProxy(params["host"], int(params["port"]), one_way=args.rtt / 2))
            env.update(SNOWFLAKE_HOST=link.host, SNOWFLAKE_PORT=str(link.port))
        if args.load_sessions:
            env["CDC_SNOWFLAKE_LOAD_SESSIONS"] = str(args.load_sessions)
        book, stop = Book(), threading.Event()
        cdc = subprocess.Popen([sys.executable, "-m", "cdc", "run", "--config", str(config), "--json", "--follow",
                                "--poll-interval", str(args.poll_interval)], cwd=workdir, env=env,
                               stdout=subprocess.PIPE, stderr=open(workdir / "run.err", "wb"), text=True)
        threads = [threading.Thread(target=read_run, args=(cdc.stdout, book), daemon=True),
                   threading.Thread(target=watch_segments, args=(workdir / ".cdc" / "changelog", book, stop),
                                    daemon=True),
                   threading.Thread(target=poll_snowflake, daemon=True,
                                    args=(params, book, stop, 0.1 if args.look == "poll" else None))]
        for t in threads:
            t.start()
        try:
            if not book.loaded.wait(900):
                raise SystemExit("cdc run did not load the snapshot into Snowflake: "
                                 f"{(workdir / 'run.err').read_text()[-3000:]}")
            print(f"first apply done (snapshot of {args.tables} x {args.rows} rows loaded); workload starts",
                  flush=True)
            loads = [os.getloadavg()]
            pids = {"cdc run with its JVM": cdc.pid, "the Snowflake stand-in": stand_in}
            began = {name: tree_cpu(pid) for name, pid in pids.items()}
            transactions = workload(server, book, live, args, stop)
            deadline = time.monotonic() + args.drain
            while time.monotonic() < deadline and cdc.poll() is None:
                with book.lock:
                    if all(s.visible is not None for s in book.samples.values()):
                        break
                time.sleep(0.2)
            loads.append(os.getloadavg())
            cpu = {name: tree_cpu(pid) - began[name] for name, pid in pids.items()}
        finally:
            stop.set()
            cdc.send_signal(signal.SIGTERM)
            cdc.wait(120)
            for t in threads[1:]:
                t.join(10)
        report(book, transactions, args, loads, cpu)
        if args.lines:
            write_lines(book, Path(args.lines))
        if cdc.returncode not in (0, 130, 143):
            print(f"cdc run exited {cdc.returncode}: {(workdir / 'run.err').read_text()[-3000:]}")


def write_lines(book: Book, path: Path) -> None:
    """The run's stage lines as a timeline: start and end (seconds since the first line), cycle, stage, status."""
    first = book.stages[0][0] if book.stages else 0.0
    with path.open("w", encoding="utf-8") as out:
        for seen, event in book.stages:
            if event.get("event") == "stage":
                end = seen - first
                out.write(f"{end - event['seconds']:9.2f} {end:9.2f} {event['cycle']:>5} {event['stage']:<20} "
                          f"{event['status']}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the workload writes")
    parser.add_argument("--rate", type=float, default=50.0, help="transactions per second")
    parser.add_argument("--tables", type=int, default=16)
    parser.add_argument("--rows", type=int, default=1000, help="rows per table before the workload")
    parser.add_argument("--sample", type=float, default=0.2, help="fraction of written rows followed")
    parser.add_argument("--poll-interval", type=float, default=0.2, help="`cdc run --poll-interval`")
    parser.add_argument("--drain", type=float, default=300.0, help="seconds to wait for the last rows after it")
    parser.add_argument("--look", choices=("after-apply", "poll"), default="after-apply",
                        help="when Snowflake is looked at: after each snowflake-apply, or every 100 ms")
    parser.add_argument("--lines", help="write a timeline of the run's stage lines to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (state, run.err)")
    parser.add_argument("--rtt", type=float, default=0.0, help="seconds each round trip to the stand-in takes more")
    parser.add_argument("--load-sessions", type=int, help="cdc run's [snowflake] load_sessions (default: cdc's)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="cdc-fresh-"))
    os.chmod(workdir, 0o700)
    print(f"work directory {workdir}; load average {os.getloadavg()}; added round trip {args.rtt} s; load sessions "
          f"{args.load_sessions or 'default'}", flush=True)
    try:
        run(args, workdir)
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
