"""Exit codes are one table (docs/exit-codes.md, `ExitCode`), enforced through the real CLI.

Each documented code is driven here by at least one real case, and the codes that apply to every command are
driven for every command: a bad argument is 2 everywhere, and a signal before the work is complete is 130
(Ctrl-C) or 143 (SIGTERM) everywhere. The signal cases run `cdc` as a user's shell does (a subprocess) against
a frozen server: the command is provably mid-work (waiting for the server) when the signal arrives.
Other modules hold more cases per code (tests/commands/test_bad_input.py: 1, 3, 4 and 10 for every command that
connects or reads cdc.toml).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import Result

from cdc.checkpoints import TailCheckpoint
from cdc.commands.main import COMMANDS
from cdc.errors import ExitCode
from cdc.state import StateDir
from tests.commands.conftest import flat, server_args
from tests.rig import MariaDB
from tests.rig._process import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "exit-codes.md"


def test_the_documented_table_is_the_enum() -> None:
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", DOCS.read_text(encoding="utf-8"), flags=re.M)
    assert [(int(code), name) for code, name in rows] == [(int(c), c.name) for c in ExitCode]


@pytest.mark.parametrize("command", [name for name, _, _ in COMMANDS])
def test_a_bad_argument_is_2_in_every_command(command: str, cli: Callable[..., Result], isolated: Path) -> None:
    result = cli(command, "--no-such-option")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "No such option" in result.output and not (isolated / ".cdc").exists()


def test_ok_failure_and_transient(mariadb: MariaDB, cli: Callable[..., Result]) -> None:
    assert cli("check-binlog", *server_args(mariadb), "--server-id", "777004").exit_code == ExitCode.OK
    mariadb.create_user("cdc_exit_codes", "right")
    denied = cli("check-binlog", *server_args(mariadb, user="cdc_exit_codes"), env={"CDC_MYSQL_PASSWORD": "wrong"})
    assert denied.exit_code == ExitCode.FAILURE, denied.output
    closed = cli("check-binlog", "--host", "127.0.0.1", "--port", str(free_port()))
    assert closed.exit_code == ExitCode.TRANSIENT, closed.output


def test_config(cli: Callable[..., Result], isolated: Path) -> None:
    result = cli("status", "--offline", "--config", str(isolated / "missing.toml"))
    assert result.exit_code == ExitCode.CONFIG, result.output


def test_precondition(mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result]) -> None:
    server = mariadb_factory({"binlog-format": "STATEMENT"})
    assert cli("check-binlog", *server_args(server)).exit_code == ExitCode.PRECONDITION


def test_position_and_locked(mariadb: MariaDB, cli: Callable[..., Result], isolated: Path) -> None:
    never_guessed = cli("tail", "--until-now", *server_args(mariadb))
    assert never_guessed.exit_code == ExitCode.POSITION, never_guessed.output
    state = StateDir(isolated / ".cdc").ensure()
    with state.lock(TailCheckpoint.STAGE):
        held = cli("tail", "--until-now", "--from-now", *server_args(mariadb))
    assert held.exit_code == ExitCode.LOCKED, held.output


def test_difference(mariadb: MariaDB, fresh_db: str, cli: Callable[..., Result]) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)", database=fresh_db)
    mariadb.execute("INSERT INTO t VALUES (1)", database=fresh_db)
    assert cli("tail", "--until-now", "--from-now", "--databases", fresh_db, *server_args(mariadb)).exit_code == 0
    result = cli("verify", "--tables", f"{fresh_db}.t", "--target", "lake", *server_args(mariadb))
    assert result.exit_code == ExitCode.DIFFERENCE, result.output


def test_runway_and_timeout(mariadb_factory: Callable[..., MariaDB], cli: Callable[..., Result]) -> None:
    server = mariadb_factory({"expire-logs-days": 1})
    assert cli("tail", "--until-now", "--from-now", *server_args(server)).exit_code == ExitCode.OK
    short = cli("status", "--min-runway-hours", "48", *server_args(server))
    assert short.exit_code == ExitCode.RUNWAY, short.output
    file, _ = server.binlog_position()
    late = cli("wait", "--stage", "tail", "--position", f"{file}:999999999", "--timeout", "1s", "--interval", "200ms",
               *server_args(server))
    assert late.exit_code == ExitCode.TIMEOUT, late.output


# --- signals: every command that works long enough to be stopped, stopped mid-work -------------------------

@pytest.fixture(scope="module")
def hung_server() -> Iterator[MariaDB]:
    """The server the signal tests freeze, one per module (per xdist worker) rather than one per test: each
    test freezes it and thaws it, nothing writes to it, and a start cost more than the rest of a test."""
    server = MariaDB()
    try:
        yield server.start()
    finally:
        server.cleanup()


@pytest.fixture
def frozen(hung_server: MariaDB) -> Iterator[MariaDB]:
    """A server that accepts connections and then never answers (SIGSTOP), like a hung host."""
    server = hung_server
    file, pos = server.binlog_position()
    server.frozen_at = f"{file}:{pos}"  # type: ignore[attr-defined]
    server.freeze()
    try:
        yield server
    finally:
        server.thaw()


def _connected_to(pid: int, port: int) -> bool:
    """Whether process `pid` holds a TCP socket to 127.0.0.1:`port` (read from /proc, no tool needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes and int(fields[2].split(":")[1], 16) == port:
            return True
    return False


def _stop_mid_work(argv: list[str], server: MariaDB, signum: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # A short connect timeout: a stage that stops gracefully (tail, run) gives the hung handshake up after it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")} | {"HOME": str(tmp_path),
                                                                              "CDC_MYSQL_CONNECT_TIMEOUT": "3"}
    proc = subprocess.Popen([sys.executable, "-m", "cdc", *argv], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert server.port is not None
    deadline = time.monotonic() + 60
    while not _connected_to(proc.pid, server.port):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.3)  # past the connect call: the command now waits for the server's greeting or answer
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


SIGNALLED = {  # command -> its arguments ({db}: a database on the frozen server)
    "check-binlog": ["check-binlog"],
    "set-retention": ["set-retention", "--hours", "24", "--dry-run"],
    "snapshot": ["snapshot", "--databases", "mysql"],
    "tail": ["tail", "--until-now", "--start-position", "{at}", "--read-timeout", "1"],
    "run": ["run", "--until-now", "--stages", "tail", "--start-position", "{at}"],
    "status": ["status"],
    "verify": ["verify", "--databases", "mysql", "--target", "lake"],
    "init": ["init", "--no-input", "--tables", "mysql.*", "--output", "out.toml"],
}


@pytest.mark.mariadb
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", SIGNALLED)
def test_a_signal_before_the_work_is_complete_is_130_or_143(
        command: str, signum: int, frozen: MariaDB, tmp_path: Path) -> None:
    argv = [arg.format(at=frozen.frozen_at) for arg in SIGNALLED[command]]  # type: ignore[attr-defined]
    done = _stop_mid_work([*argv, *server_args(frozen)], frozen, signum, tmp_path)
    expected = ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.TERMINATED
    assert done.returncode == expected, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out.toml").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_wait_stopped_while_it_waits_is_130_or_143(signum: int, mariadb: MariaDB, tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")} | {"HOME": str(tmp_path)}
    base = [sys.executable, "-m", "cdc"]
    tailed = subprocess.run([*base, "tail", "--until-now", "--from-now", "--state-dir", state, *server_args(mariadb)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert tailed.returncode == 0, tailed.stderr
    file, _ = mariadb.binlog_position()
    proc = subprocess.Popen([*base, "wait", "--stage", "tail", "--position", f"{file}:999999999", "--interval", "200ms",
                             "--state-dir", state, *server_args(mariadb)],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Polling once its first note is out (a fixed 3 s was too short on a loaded machine and too long on an idle one).
    said = _lines_until(proc, "waiting for tail", timeout=60)
    assert proc.poll() is None, said
    proc.send_signal(signum)
    _, rest = proc.communicate(timeout=60)
    err = "".join(said) + rest
    assert proc.returncode == (ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.TERMINATED), err
    assert "Traceback" not in err, err


# A real signal, sent by the process to itself while its root command parses the command line: the moment typer
# spends importing its validators, seconds long on a loaded machine.
_SIGNAL_WHILE_PARSING = """
import os, signal, sys
import typer.core

parse_args = typer.core.TyperGroup.parse_args

def signalled(self, ctx, args):
    os.kill(os.getpid(), {signum})
    return parse_args(self, ctx, args)

typer.core.TyperGroup.parse_args = signalled
sys.argv = ["cdc", "status", "--help"]
from cdc.commands.main import run
run()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_command_line_is_parsed_is_130_or_143(signum: int, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_PARSING.format(signum=int(signum))], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == (ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.TERMINATED), done.stderr
    assert "Traceback" not in done.stderr and "nothing was done" in flat(done.stderr), done.stderr
    assert not done.stdout  # the help was not printed: it stopped


def _lines_until(proc: subprocess.Popen[str], text: str, timeout: float) -> list[str]:
    """The stderr lines of `proc` up to the first holding `text` (read in a thread: a silent process cannot hang
    the test); fails if none comes within `timeout` seconds."""
    said: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if text in line:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    assert said and text in said[-1], said
    return said


def _wait_for_child(proc: subprocess.Popen[str], name: str, timeout: float = 120) -> None:
    """Until `proc` has a child process called `name` (from /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)
            except OSError:
                continue
            if fields[0].endswith(f"({name}") and int(fields[1].split()[1]) == proc.pid:
                return
        time.sleep(0.1)
    raise AssertionError(f"no {name} child of the command within {timeout} s")


@pytest.mark.spark
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_spark_merge_stopped_while_spark_starts_is_130_or_143(signum: int, tmp_path: Path) -> None:
    from tests.spark.test_merge import build

    state = tmp_path / "state"
    w = build(state, seed=5)
    w.write_segments(w.lines[:50], per_segment=25)
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "cdc", "spark-merge", "--state-dir", str(state), "--json"],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Its JVM started: the command's handlers are in place (a fixed 3 s wait once signalled it while it was still
    # importing, on a loaded machine), and Spark is still starting: a merge of this run takes far longer.
    _wait_for_child(proc, "java")
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == (ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.TERMINATED), err
    assert not (state / "merge.json").exists() and not out.strip(), out
    assert json.loads(out or "null") is None
    assert flat(err)  # it said why it stopped
