"""Process plumbing shared by the rig's servers: free ports, child processes, stopping by pid."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# Debian/Ubuntu put daemons in sbin, which is not on PATH for ordinary users.
_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_PR_SET_PDEATHSIG = 1


class RigError(RuntimeError):
    """A part of the test rig could not be started or stopped."""


class MissingToolError(RigError):
    """A program the rig needs is not installed; the message says how to install it."""


def find_program(name: str, install_hint: str) -> str:
    """Return the absolute path of `name`, looking in PATH and the sbin directories."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN_DIRS])
    path = shutil.which(name, path=search)
    if path is None:
        raise MissingToolError(
            f"{name} not found (looked in PATH and {', '.join(_SBIN_DIRS)}): "
            f"install it with `{install_hint}` or run `bash scripts/setup.sh`"
        )
    return path


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now.

    There is a window between closing this socket and the server binding the port;
    callers retry with a new port when the bind fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Return True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:
    # Runs in the child between fork and exec. If pytest is killed (SIGKILL, OOM, a CI
    # timeout) its fixtures never tear down; PR_SET_PDEATHSIG makes the kernel kill the
    # server instead of leaving a stray daemon holding a port. SIGKILL, not SIGTERM: a
    # frozen (SIGSTOPped) server would never act on SIGTERM, and its data is throwaway.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: atexit in the parent is the fallback
        pass


def spawn(argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `argv` with stdout and stderr appended to `log_path`; it dies with this process."""
    with open(log_path, "ab") as log:
        # A file, not a pipe: nobody reads a pipe, and a full pipe would block the server.
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent,
        )


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Stop `proc` by pid: SIGCONT (it may be frozen), SIGTERM, wait, then SIGKILL."""
    if proc.poll() is not None:
        return
    # A stopped process does not act on SIGTERM until it is continued.
    _signal(proc, signal.SIGCONT)
    _signal(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process(proc)


def kill_process(proc: subprocess.Popen[bytes]) -> None:
    """Kill `proc` with SIGKILL (no shutdown at all, like a crash) and reap it."""
    if proc.poll() is None:
        _signal(proc, signal.SIGKILL)
    proc.wait(timeout=30)


def send_signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Send `sig` to a running `proc`; complain if it has already exited."""
    if proc.poll() is not None:
        raise RigError(f"process {proc.pid} has already exited with code {proc.returncode}")
    _signal(proc, sig)


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:  # exited between poll() and kill(): nothing to do
        pass


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def tail(path: Path, lines: int = 30) -> str:
    """Return the last `lines` lines of a log file, or a note that it does not exist."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} was not written)"
    return "\n".join(text.splitlines()[-lines:])
