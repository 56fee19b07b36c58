"""A throwaway MariaDB server for tests, benchmarks and the demo.

    with MariaDB() as db:                                   # binlog on: ROW / FULL / FULL
        db.execute("CREATE DATABASE shop")
        user = db.create_replication_user("cdc", "s3cret")
    with MariaDB({"binlog-format": "STATEMENT"}) as bad:    # a wrongly configured server
        ...

Each server gets its own temp directory (datadir, socket, pid file, error log, binlogs) and
a free port on 127.0.0.1. It is started with --no-defaults so nothing in /etc/mysql leaks in,
never touches the system service on 3306, and is stopped by its pid.
"""

from __future__ import annotations

import atexit
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pymysql

from ._datadir import is_root, template_datadir
from ._process import RigError, find_program, free_port, kill_process, send_signal, spawn, stop_process, tail, wait_until

INSTALL_HINT = "apt-get install mariadb-server"
HOST = "127.0.0.1"
ROOT_USER = "root"  # created by mariadb-install-db with an empty password (normal auth)

# A value of True writes a bare flag (--skip-log-bin); False or None removes the option.
OptionValue = str | int | bool | None

# The configuration cdc needs: row events with full before/after images and column names.
# https://mariadb.com/kb/en/replication-and-binary-log-system-variables/
BINLOG_OPTIONS: dict[str, OptionValue] = {
    "binlog-format": "ROW",
    "binlog-row-image": "FULL",
    "binlog-row-metadata": "FULL",
    "server-id": 1,
}

# Least privilege for reading the binlog and taking a snapshot on MariaDB 10.5.2+, where
# REPLICATION CLIENT became an alias of BINLOG MONITOR (SHOW BINARY LOGS, SHOW MASTER STATUS,
# SHOW BINLOG EVENTS). https://mariadb.com/kb/en/grant/#global-privileges
REPLICATION_GRANTS = ("REPLICATION SLAVE", "BINLOG MONITOR", "SELECT")

_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PORT_IN_USE = ("Address already in use", "Do you already have another server running")
_PORT_ATTEMPTS = 3

# Servers still running when the interpreter exits (a test run aborted with Ctrl-C, a script
# that forgot stop()); atexit stops them so no mariadbd outlives the run.
_RUNNING: set[MariaDB] = set()


# What mariadbd writes to its error log when a fatal signal ends it ("mariadbd got signal 11 ;"): a crash, with its
# stack trace after it. A SIGKILL writes nothing.
CRASH_REPORT = "got signal"


def running_servers() -> list[MariaDB]:
    """The rig's servers running now (started, neither stopped nor killed; a crashed one until it is stopped)."""
    return list(_RUNNING)


@dataclass(frozen=True)
class DbUser:
    """An account on a rig server (the password is test data, not a secret)."""

    name: str
    password: str
    host: str = "%"


class MariaDB:
    """One throwaway MariaDB server: start, stop, restart, freeze, connect, execute."""

    def __init__(
        self,
        options: Mapping[str, OptionValue] | None = None,
        *,
        base_dir: Path | str | None = None,
        port: int | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        """Prepare a server; `options` add to or override the default mariadbd options.

        Option names may use - or _ and take no leading dashes; examples of a wrongly
        configured server: {"skip-log-bin": True}, {"binlog-format": "STATEMENT"},
        {"binlog-row-image": "MINIMAL"}, {"binlog-row-metadata": "NO_LOG"}.
        """
        self._mariadbd = find_program("mariadbd", INSTALL_HINT)
        self._install_db = find_program("mariadb-install-db", INSTALL_HINT)
        # mkdtemp under /tmp keeps the socket path short: a unix socket path over ~107
        # bytes (easy under pytest's tmp_path) makes mariadbd refuse to start.
        self._owns_base_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="cdc-mariadb-"))
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.host = HOST
        self.port: int | None = port
        self._fixed_port = port is not None
        self.start_timeout = start_timeout
        self._options = merge_options(self._default_options(), options or {})
        self._proc: subprocess.Popen[bytes] | None = None
        self._frozen = False

    # Paths ---------------------------------------------------------------------------------

    @property
    def datadir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket(self) -> Path:
        return self.base_dir / "mariadb.sock"

    @property
    def error_log(self) -> Path:
        return self.base_dir / "error.log"

    def crash_reports(self) -> int:
        """How many crashes (a fatal signal) its error log reports, over every start on this datadir."""
        try:
            return self.error_log.read_text(errors="replace").count(CRASH_REPORT)
        except OSError:
            return 0

    @property
    def pid_file(self) -> Path:
        return self.base_dir / "mariadb.pid"

    @property
    def tmp_dir(self) -> Path:
        return self.base_dir / "tmp"

    @property
    def binlog_basename(self) -> Path:
        """Binlog files are this path plus .000001, .000002, ... (and .index)."""
        return self.datadir / "mariadb-bin"

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs, else None."""
        return self._proc.pid if self.is_running else None  # type: ignore[union-attr]

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def options(self) -> dict[str, OptionValue]:
        """The effective mariadbd options (a copy)."""
        return dict(self._options)

    # Lifecycle -----------------------------------------------------------------------------

    def start(self) -> MariaDB:
        """Start the server (initialising the datadir on first use) and wait until it accepts connections."""
        if self.is_running:
            return self
        if not (self.datadir / "mysql").is_dir():
            self._install()
        self.tmp_dir.mkdir(mode=0o700, exist_ok=True)
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            if self.port is None:
                self.port = free_port()
            self._proc = spawn(self.argv(), self.base_dir / "mariadbd.out")
            _RUNNING.add(self)
            if self._wait_ready():
                return self
            # Another process grabbed our free port between free_port() and bind: pick again.
            if self._lost_port_race() and attempt < _PORT_ATTEMPTS:
                self.port = None
                continue
            self._fail_start()
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down cleanly by pid (SIGTERM, SIGKILL after `timeout`); keep the datadir."""
        if self._proc is not None:
            stop_process(self._proc, timeout)
        self._frozen = False
        _RUNNING.discard(self)

    def kill(self) -> None:
        """Kill the server with SIGKILL, like a crash: InnoDB recovers on the next start()."""
        if self._proc is not None:
            kill_process(self._proc)
        self._frozen = False
        _RUNNING.discard(self)

    def restart(self, options: Mapping[str, OptionValue] | None = None) -> MariaDB:
        """Stop and start again on the same port and datadir, optionally with changed options."""
        self.stop()
        if options:
            self._options = merge_options(self._options, options)
        return self.start()

    def freeze(self) -> None:
        """Suspend the server (SIGSTOP): connections stay open but nothing answers, like a hung host."""
        send_signal(self._require_proc(), signal.SIGSTOP)
        self._frozen = True

    def thaw(self) -> None:
        """Resume a frozen server (SIGCONT)."""
        send_signal(self._require_proc(), signal.SIGCONT)
        self._frozen = False

    def cleanup(self) -> None:
        """Stop the server and delete its temp directory (datadir, binlogs, logs); a crashed server's error log is
        kept under <tmp>/cdc-mariadb-crashes/ (its stack trace and query say what a test made it do)."""
        self.stop()
        _keep_crash_log(self.error_log)
        if self._owns_base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> MariaDB:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "frozen" if self._frozen else "running" if self.is_running else "stopped"
        return f"<MariaDB {self.host}:{self.port} pid={self.pid} {state} datadir={self.datadir}>"

    # SQL -----------------------------------------------------------------------------------

    def connect_kwargs(
        self, user: str = ROOT_USER, password: str = "", database: str | None = None
    ) -> dict[str, Any]:
        """Connection settings as keyword arguments for pymysql.connect (and friends)."""
        kwargs: dict[str, Any] = {"host": self.host, "port": self.port, "user": user, "password": password}
        if database is not None:
            kwargs["database"] = database
        return kwargs

    def connect(
        self, user: str = ROOT_USER, password: str = "", database: str | None = None, **kwargs: Any
    ) -> pymysql.connections.Connection:
        """Open a PyMySQL connection over TCP (autocommit, utf8mb4); extra kwargs go to pymysql."""
        settings: dict[str, Any] = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": 5}
        settings.update(self.connect_kwargs(user, password, database))
        settings.update(kwargs)
        return pymysql.connect(**settings)

    def execute(
        self, sql: str, params: Any = None, *, database: str | None = None, timeout: float | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement as root with bound `params`; return its rows (empty for DDL/DML).

        `timeout` bounds the wait for an answer, e.g. in teardown code that must not hang.
        """
        extra: dict[str, Any] = {"read_timeout": timeout, "write_timeout": timeout} if timeout else {}
        with self.connect(database=database, **extra) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def variable(self, name: str) -> Any:
        """Return the global value of a system variable, e.g. variable("binlog_format")."""
        if not _VARIABLE_NAME.match(name):
            raise ValueError(f"not a system variable name: {name!r}")
        # A variable name cannot be a bound parameter; the regex above keeps this safe.
        return self.execute(f"SELECT @@GLOBAL.{name}")[0][0]

    def binlog_position(self) -> tuple[str, int]:
        """Return the current (binlog file, position) of the server."""
        rows = self.execute("SHOW MASTER STATUS")
        if not rows:
            raise RigError(f"binary logging is off on {self!r}: SHOW MASTER STATUS is empty")
        return str(rows[0][0]), int(rows[0][1])

    def purge_binlogs_to(self, keep: str, timeout: float = 30.0) -> None:
        """PURGE BINARY LOGS TO `keep`, retried until the older files are really gone.

        MariaDB silently keeps a file until its binlog checkpoint is written (InnoDB has flushed the
        transactions in it, for crash recovery), which happens shortly after a rotation.
        """
        deadline = time.monotonic() + timeout
        while True:
            self.execute("PURGE BINARY LOGS TO %s", (keep,))
            if self.execute("SHOW BINARY LOGS")[0][0] == keep:
                return
            if time.monotonic() > deadline:
                raise RigError(f"{self!r} kept binlogs older than {keep} for {timeout}s after PURGE BINARY LOGS")
            time.sleep(0.2)

    # Replication ---------------------------------------------------------------------------

    def replicate_from(self, primary: MariaDB) -> None:
        """Become a GTID replica of `primary` (start this server with log-slave-updates to keep its binlog whole)."""
        self.execute("CHANGE MASTER TO master_host = %s, master_port = %s, master_user = 'root', "
                     "master_use_gtid = slave_pos, master_connect_retry = 1", (primary.host, primary.port))
        self.execute("START SLAVE")

    def wait_for_gtids(self, gtids: str, timeout: float = 60.0) -> None:
        """Wait until this replica has applied `gtids` (MASTER_GTID_WAIT), or fail."""
        if self.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (gtids, timeout))[0][0] != 0:
            status = self.execute("SHOW SLAVE STATUS")
            raise RigError(f"{self!r} did not reach GTID {gtids} within {timeout}s: {status}")

    def promote(self) -> None:
        """Stop replicating and take writes: what a failover does to the chosen replica."""
        self.execute("STOP SLAVE")
        self.execute("RESET SLAVE ALL")
        self.execute("SET GLOBAL read_only = 0")

    def create_database(self, prefix: str = "t") -> str:
        """Create a database with a unique name starting with `prefix` and return the name."""
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        return name

    def drop_database(self, name: str, timeout: float = 30.0) -> None:
        """Drop a database if it exists."""
        quoted = name.replace("`", "``")
        self.execute(f"DROP DATABASE IF EXISTS `{quoted}`", timeout=timeout)

    def create_user(
        self, name: str, password: str, grants: tuple[str, ...] | None = None, host: str = "%"
    ) -> DbUser:
        """Create (or replace) an account with `grants` on *.*; no grants means USAGE only."""
        self.execute("CREATE OR REPLACE USER %s@%s IDENTIFIED BY %s", (name, host, password))
        if grants:
            # Privilege names are keywords, not values: they come from our constants, not users.
            self.execute(f"GRANT {', '.join(grants)} ON *.* TO %s@%s", (name, host))
        return DbUser(name=name, password=password, host=host)

    def create_replication_user(self, name: str, password: str, host: str = "%") -> DbUser:
        """Create the least-privilege account cdc needs: REPLICATION SLAVE, BINLOG MONITOR, SELECT."""
        return self.create_user(name, password, REPLICATION_GRANTS, host)

    # Internals -----------------------------------------------------------------------------

    def argv(self) -> list[str]:
        """The mariadbd command line for the current options and port."""
        fixed = {
            "datadir": str(self.datadir),
            "socket": str(self.socket),
            "port": self.port,
            "bind-address": self.host,
            "pid-file": str(self.pid_file),
            "log-error": str(self.error_log),
            # Its own: a starting mariadbd deletes every #sql* file in its tmpdir, and with the shared /tmp that was
            # another test server's temporary table in use ("Error on delete of '/tmp/#sql-temptable-...'").
            "tmpdir": str(self.tmp_dir),
        }
        # --no-defaults must come first: it is ignored anywhere else on the command line.
        return [self._mariadbd, "--no-defaults", *_format_options({**self._options, **fixed})]

    def _default_options(self) -> dict[str, OptionValue]:
        options: dict[str, OptionValue] = {
            "log-bin": str(self.binlog_basename),
            **BINLOG_OPTIONS,
            # Small and quick to start; tests never need a big buffer pool. The default 96M
            # redo log would make every datadir ~115 MB on disk.
            "innodb-buffer-pool-size": "64M",
            "innodb-log-file-size": "32M",
            # A commit writes its redo to the OS at once and flushes it to disk about once a second: a killed
            # server (kill -9, the fault tests) still recovers every commit, only a machine crash could lose
            # the last second, and the suite's thousands of commits stop waiting on fsync (a test rig, not
            # the guidance for a source server).
            "innodb-flush-log-at-trx-commit": 2,
            # No DNS lookups of 127.0.0.1; accounts are matched by IP ('%' or '127.0.0.1').
            "skip-name-resolve": True,
            # MariaDB 10.11 still defaults to latin1; production MySQL 8 is utf8mb4.
            "character-set-server": "utf8mb4",
            "collation-server": "utf8mb4_general_ci",
        }
        if is_root():
            # mariadbd refuses to run as root unless told to.
            options["user"] = "root"
        return options

    def _install(self) -> None:
        """Create the datadir as a copy of a per-process template made by mariadb-install-db.

        Copying takes ~0.05 s where mariadb-install-db takes ~0.8 s, and tests start many servers.
        """
        # InnoDB file layout options must match between bootstrap and server start.
        innodb = tuple(f for f in _format_options(self._options) if f.startswith("--innodb-"))
        shutil.copytree(template_datadir(self._install_db, innodb), self.datadir, symlinks=True)

    def _wait_ready(self) -> bool:
        """Wait until the server answers a query; False if it exits or the timeout passes."""

        def ready() -> bool:
            if not self.is_running:
                return True  # stop polling; start() looks at why it exited
            try:
                with self.connect(connect_timeout=1):
                    return True
            except pymysql.err.OperationalError:
                return False

        return wait_until(ready, self.start_timeout) and self.is_running

    def _lost_port_race(self) -> bool:
        log = tail(self.error_log, 20)
        return not self._fixed_port and not self.is_running and any(s in log for s in _PORT_IN_USE)

    def _fail_start(self) -> None:
        exited = not self.is_running
        self.kill()
        why = (
            f"exited with code {self._proc.returncode}"  # type: ignore[union-attr]
            if exited
            else f"did not accept connections within {self.start_timeout:.0f}s"
        )
        raise RigError(
            f"mariadbd on {self.host}:{self.port} {why}.\n"
            f"command: {' '.join(self.argv())}\n"
            f"last lines of {self.error_log}:\n{tail(self.error_log)}"
        )

    def _require_proc(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RigError(f"{self!r} was never started")
        return self._proc


def merge_options(
    base: Mapping[str, OptionValue], overrides: Mapping[str, OptionValue]
) -> dict[str, OptionValue]:
    """Merge mariadbd options; an override of "skip-X" removes "X" (and the other way round).

    Without that rule {"skip-log-bin": True} would leave --log-bin=... on the command line
    and whichever came last would win.
    """
    merged = {_normalize(k): v for k, v in base.items()}
    for key, value in overrides.items():
        name = _normalize(key)
        opposite = name[len("skip-"):] if name.startswith("skip-") else f"skip-{name}"
        merged.pop(opposite, None)
        merged[name] = value
    return {k: v for k, v in merged.items() if v is not None and v is not False}


def _normalize(name: str) -> str:
    return name.lstrip("-").replace("_", "-")


def _format_options(options: Mapping[str, OptionValue]) -> Iterator[str]:
    for name, value in options.items():
        if value is True:
            yield f"--{name}"
        elif value is not None and value is not False:
            yield f"--{name}={value}"


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_RUNNING):
        server.stop(timeout=10)


def _keep_crash_log(error_log: Path) -> None:
    try:
        text = error_log.read_text(errors="replace")
    except OSError:
        return
    if CRASH_REPORT not in text:
        return
    kept = Path(tempfile.gettempdir()) / "cdc-mariadb-crashes"
    kept.mkdir(exist_ok=True)
    shutil.copy(error_log, kept / f"{uuid.uuid4().hex[:12]}.err")
