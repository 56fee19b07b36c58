"""One SparkSession for the whole suite (start-up costs seconds), with the job's own defaults.

Registered for every test by tests/conftest.py (pytest_plugins): spark, verify and pipeline tests share it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cdc.config import SparkSettings


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from cdc.spark.session import build_session

    session = build_session(SparkSettings(master="local[2]", driver_memory="1g"))
    try:
        yield session
    finally:
        session.stop()
