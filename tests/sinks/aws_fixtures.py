"""AWS resources on the session's moto server, fresh for each test: a bucket, a stream, their clients.

Registered for the whole suite by tests/conftest.py (pytest_plugins): ship, run, verify and the
fault campaign all use them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.rig import MotoServer

_names = itertools.count()


def unique(kind: str) -> str:
    return f"cdc-{kind}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def kinesis(moto_server: MotoServer) -> Any:
    return moto_server.client("kinesis")


@pytest.fixture
def s3(moto_server: MotoServer) -> Any:
    return moto_server.client("s3")


@pytest.fixture
def stream(kinesis: Any) -> Iterator[str]:
    """A fresh 4-shard stream."""
    name = unique("stream")
    kinesis.create_stream(StreamName=name, ShardCount=4)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    yield name
    kinesis.delete_stream(StreamName=name)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique("bucket")
    s3.create_bucket(Bucket=name)
    return name
