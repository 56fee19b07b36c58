"""One SparkSession for all spark-merge tests (start-up costs seconds), with the job's own defaults."""

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
