"""Shared fixtures: real MariaDB and moto servers, started by the tests themselves.

The fixtures are thin; the logic lives in tests/rig so benchmarks and the demo can use it too.
A part that cannot be started makes the tests that need it fail (never skip) with a message
saying what to install.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pymysql
import pytest

from tests.rig import DbUser, MariaDB, MotoServer, OptionValue

# pytest-xdist's workers inherit COLUMNS (80) from the controller, and rich fixes a console's width from it when
# cdc.commands.ui is imported: tests that render tables set the width they need per invocation instead.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# Fixtures every end-to-end test may need, defined once (a module importing them would start its own copies).
pytest_plugins = ["tests.sinks.aws_fixtures", "tests.snowflake.stand_in", "tests.spark.spark_session", "tests.crash_rerun"]

# Deliberately awkward (space, quotes, '#'): it catches passwords pasted into SQL, shell
# command lines or option files without quoting.
REPLICATION_PASSWORD = "s3cret 'pw\" #1"


# The real part each fixture starts, as a marker: `pytest -m "not mariadb and not spark"` is the fast lane.
PART_OF_FIXTURE = {
    "mariadb": "mariadb", "mariadb_factory": "mariadb", "fresh_db": "mariadb", "replication_user": "mariadb",
    "tls_server": "mariadb", "hung_server": "mariadb",
    "spark": "spark",
    "moto_server": "aws", "aws_env": "aws", "s3": "aws", "kinesis": "aws", "bucket": "aws", "stream": "aws",
    "fakesnow_server": "snowflake", "snowflake_home": "snowflake", "snowflake_env": "snowflake", "sf": "snowflake",
}


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Mark every test with the parts its fixtures start (tests that start one themselves say so by hand), before
    `-m` selects by them; then order what was selected."""
    for item in items:
        for part in {PART_OF_FIXTURE[name] for name in getattr(item, "fixturenames", ()) if name in PART_OF_FIXTURE}:
            item.add_marker(part)
        if "tests/pipeline/" in item.nodeid:
            item.add_marker("e2e")
    yield  # `-m` and `-k` deselect now: the shares below are of the tests that run
    # The long tests first, on every worker: pytest-xdist's worksteal hands worker i the i-th contiguous share of
    # this list, and an idle worker steals from the end of another's queue. Sorted alone, the list gave the first
    # worker every long test and the second the short ones; the second then stole the first's tail and both ended
    # on long tests where the queues met, one core idle while the other finished a 60 s test. Dealt into one
    # stripe per worker, each share runs long to short and the steals take short tests, so the workers finish
    # together. (`--dist load` hands out tests from the head of one list: there, one stripe is right.) Stable:
    # within each group, tests keep their file order.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = _stripes(sorted(items, key=_cost_rank), workers if config.getoption("dist", "no") == "worksteal" else 1)


def _stripes(ordered: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """`ordered` (long to short) dealt into `workers` stripes of worksteal's first shares, concatenated.

    A module's tests of one cost group stay in one stripe (a module fixture then starts on one worker only); each
    stripe stays long to short, and only the short tail of a stripe moves to fill another to its share.
    """
    stripes: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for _, unit in itertools.groupby(ordered, key=lambda item: (_cost_rank(item), item.nodeid.split("::")[0])):
        min(stripes, key=len).extend(unit)
    shares, rest = [], len(ordered)
    for worker in range(workers):  # worksteal's split: worker i takes len(rest) // (workers - i) of the rest
        shares.append(rest // (workers - worker))
        rest -= shares[-1]
    spare = [item for stripe, share in zip(stripes, shares, strict=True) for item in stripe[share:]]
    for stripe, share in zip(stripes, shares, strict=True):
        del stripe[share:]
        need = share - len(stripe)
        stripe += spare[:need]
        del spare[:need]
    return [item for stripe in stripes for item in sorted(stripe, key=_cost_rank)]


def _cost_rank(item: pytest.Item) -> int:
    """-1: marked long (minutes), 0: end-to-end and Spark (tens of seconds each), 1: against a MariaDB, 2: the rest.

    A long test among the MariaDB ones started last: on a machine where it took 292 s, the other worker had long
    finished its share while it ran (the suite's last 5% took 7 of its 36 minutes)."""
    if item.get_closest_marker("long"):
        return -1
    if item.get_closest_marker("e2e") or item.get_closest_marker("spark"):
        return 0
    return 1 if item.get_closest_marker("mariadb") else 2


@pytest.fixture(autouse=True)
def _a_server_needs_its_marker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that starts a MariaDB without the mariadb marker fails: the fast lane must never wait for one.
    (Servers of session and module fixtures start before this runs: PART_OF_FIXTURE names those fixtures.)"""
    if request.node.get_closest_marker("mariadb") is None:
        def refuse(self: MariaDB) -> MariaDB:
            raise AssertionError(f"{request.node.nodeid} starts a MariaDB server: mark it with pytest.mark.mariadb")

        monkeypatch.setattr(MariaDB, "start", refuse)


@pytest.fixture(autouse=True)
def _session_server_alive(request: pytest.FixtureRequest) -> None:
    """A crash of the session's MariaDB fails the test that saw it, not every later test of the worker: the next
    test gets the server started again on its datadir (InnoDB recovers; the rig keeps the crash's error log).
    Seen on this machine under load: mariadbd 10.11 segfaults (a null read) during information_schema reads."""
    if "mariadb" in request.fixturenames:
        server: MariaDB = request.getfixturevalue("mariadb")
        if not server.is_running:
            server.start()


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDB]:
    """The session's MariaDB server, configured the way cdc needs (binlog ROW / FULL / FULL)."""
    server = MariaDB()
    try:
        yield server.start()
    finally:
        server.cleanup()


@pytest.fixture
def mariadb_factory() -> Iterator[Callable[..., MariaDB]]:
    """Start extra MariaDB servers with overriding options; they are removed after the test.

    factory({"binlog-format": "STATEMENT"}) or factory(skip_log_bin=True): both add to or
    override the good defaults. Function-scoped so misconfigured servers do not pile up.
    """
    servers: list[MariaDB] = []

    def start(options: dict[str, OptionValue] | None = None, **kw_options: OptionValue) -> MariaDB:
        server = MariaDB({**(options or {}), **kw_options})
        servers.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in servers:
            server.cleanup()


@pytest.fixture
def fresh_db(mariadb: MariaDB) -> Iterator[str]:
    """Create a uniquely named database on the session server and return its name."""
    name = mariadb.create_database("test")
    yield name
    try:
        mariadb.drop_database(name, timeout=10)
    except pymysql.err.MySQLError:
        pass  # the test may have left the server down or frozen; the datadir goes at session end


@pytest.fixture(scope="session")
def replication_user(mariadb: MariaDB) -> DbUser:
    """A least-privilege replication account on the session server, with a password."""
    return mariadb.create_replication_user("cdc_repl", REPLICATION_PASSWORD)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """The session's moto server: S3 and Kinesis over HTTP at moto_server.endpoint_url."""
    server = MotoServer()
    try:
        yield server.start()
    finally:
        server.cleanup()


@pytest.fixture
def aws_env(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point boto3 (here and in subprocesses) at moto with dummy credentials, for one test."""
    # A developer's real profile must not be picked up instead of the dummy credentials.
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in moto_server.env.items():
        monkeypatch.setenv(name, value)
    return moto_server.env
