"""Real parts for tests, benchmarks and the demo: a throwaway MariaDB server and a moto server.

Plain Python, no pytest: `from tests.rig import MariaDB, MotoServer`.
"""

from ._process import MissingToolError, RigError
from .mariadb import BINLOG_OPTIONS, REPLICATION_GRANTS, DbUser, MariaDB, OptionValue, merge_options
from .moto import MotoServer

__all__ = [
    "BINLOG_OPTIONS",
    "REPLICATION_GRANTS",
    "DbUser",
    "MariaDB",
    "MissingToolError",
    "MotoServer",
    "OptionValue",
    "RigError",
    "merge_options",
]
