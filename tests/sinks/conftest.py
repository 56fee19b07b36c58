"""Fixtures for the ship tests: AWS settings for the session's moto server and a state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.config import AWSSettings
from tests.rig import MotoServer


@pytest.fixture
def aws(aws_env: dict[str, str], moto_server: MotoServer) -> AWSSettings:
    """AWS settings pointing at the session's moto server (dummy credentials in the environment)."""
    return AWSSettings(region=moto_server.region, endpoint_url=moto_server.endpoint_url)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"
