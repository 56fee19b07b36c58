"""Fixtures for the ship tests: a state directory with a change log, a fresh stream, a fresh bucket."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.config import AWSSettings
from tests.rig import MotoServer

_names = itertools.count()


def unique(kind: str) -> str:
    return f"cdc-{kind}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def aws(aws_env: dict[str, str], moto_server: MotoServer) -> AWSSettings:
    """AWS settings pointing at the session's moto server (dummy credentials in the environment)."""
    return AWSSettings(region=moto_server.region, endpoint_url=moto_server.endpoint_url)


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


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"
