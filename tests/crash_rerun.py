"""A test that failed because a MariaDB server crashed under it runs once more (a pytest plugin, tests/conftest.py).

mariadbd 10.11 segfaults now and then on this kind of machine, under load, during information_schema reads while
other tests run DDL on the same server (a NULL read in `Create_tmp_table::cleanup_on_failure`; the error logs are
kept under <tmp>/cdc-mariadb-crashes). The test that saw it fails with a lost connection, and CI with it, for a bug
that is the server's. So: when a test that uses a MariaDB failed, and a server that ran when it started (or that
its fixtures started) has written a crash report since (a fatal signal: "got signal N"), the test runs again,
once, on the restarted server (tests/conftest.py's `_session_server_alive`). Its second result is the one
reported, and the rerun is reported as a warning naming the crash. A failure without a crash, or a server killed
by a test (SIGKILL writes no report), is never rerun.
"""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol

from tests.rig.mariadb import running_servers


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if item.get_closest_marker("mariadb") is None:
        return None  # the default protocol
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    before = {id(s): s.crash_reports() for s in running_servers()}
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    # A server its fixtures started (not running before) counts from none: its error log is new, or one whose
    # reports were counted when it ran before.
    crashed = [s for s in running_servers() if s.crash_reports() > before.get(id(s), 0)]
    if crashed and any(r.failed for r in reports):
        logs = ", ".join(str(s.error_log) for s in crashed)
        item.warn(pytest.PytestWarning(f"{item.nodeid} ran again: a MariaDB server crashed under it ({logs})"))
        item._initrequest()  # type: ignore[attr-defined]  # fixtures looked up anew, as for a first run
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
