"""This process's private directory for what its Spark JVM reads and writes on the local disk (#26).

    <tmp>/cdc-spark-<pid>-<random>/     mode 0700, created with O_EXCL: never another user's
        log4j2.properties               the JVM's quiet logging config (0600)
        local/                          spark.local.dir: shuffle files, cached blocks spilled to disk, userFiles
        cdc-jvm-error-<pid>.log         a JVM crash report, if any: kept for the user

Spark's own default is the shared temp directory, where it creates `blockmgr-*` as 0755 and the shuffle and
spill files in it as 0644: the merge's change images (rows) readable by every local user. Under a 0700 parent,
whatever modes Spark gives them, only the owner reaches them.

Removed at exit. A process killed with -9 leaves its directory behind; the next process of the same user that
starts a JVM removes what a dead one left (its pid is in the name), crash reports excepted.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

LOG4J_NAME = "log4j2.properties"
LOCAL_NAME = "local"
PREFIX = "cdc-spark-"
_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""
_OWNED = re.compile(rf"{re.escape(PREFIX)}(\d+)-[^/]+\Z")

_private: Path | None = None


def private_dir() -> Path:
    """This process's own directory (mode 0700, a name nobody can predict), made on first use.

    Not a fixed name in the shared temp directory: another local user could plant a symlink there (which cdc
    would write through) or a file of their own (which the JVM would load as its logging config).
    """
    global _private
    if _private is None:
        sweep_dead(Path(tempfile.gettempdir()))
        _private = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))  # 0700, O_EXCL
        atexit.register(remove, _private)
    return _private


def local_dir() -> Path:
    """spark.local.dir for a JVM this process starts: inside the private directory."""
    path = private_dir() / LOCAL_NAME
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    return path


def quiet_log4j() -> Path:
    """The JVM's logging config: errors only, to stderr (written once, never through a link)."""
    path = private_dir() / LOG4J_NAME
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(_QUIET_LOG4J)
    return path


def remove(directory: Path) -> None:
    """Everything cdc or Spark put in the directory, then the directory, unless a JVM crash report is in it."""
    shutil.rmtree(directory / LOCAL_NAME, ignore_errors=True)
    with contextlib.suppress(OSError):
        (directory / LOG4J_NAME).unlink(missing_ok=True)
        directory.rmdir()


def sweep_dead(shared: Path) -> list[Path]:
    """Remove the private directories of this user's processes that are gone (killed before their exit ran).

    Only real directories owned by this user, named with a pid that no process has now; a pid reused by a
    live process keeps its directory, to be swept later. Returns the directories looked into.
    """
    swept = []
    with contextlib.suppress(OSError):
        for entry in shared.iterdir():
            match = _OWNED.match(entry.name)
            if match is None or int(match.group(1)) == os.getpid() or _alive(int(match.group(1))):
                continue
            with contextlib.suppress(OSError):
                found = entry.lstat()
                if stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid():
                    remove(entry)
                    swept.append(entry)
    return swept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
