"""moto's server mode as a subprocess: a real HTTP endpoint for S3 and Kinesis on 127.0.0.1.

    with MotoServer() as moto:
        s3 = moto.client("s3")
        s3.create_bucket(Bucket="lake")

Server mode (not the in-process mock_aws decorator) so that code under test, including
`cdc` run as a subprocess, talks to AWS the way it does in production: over HTTP with
boto3's endpoint_url.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from ._process import MissingToolError, RigError, free_port, spawn, stop_process, tail, wait_until

HOST = "127.0.0.1"
REGION = "us-east-1"
INSTALL_HINT = "pip install 'moto[server]'"
_PORT_ATTEMPTS = 3

# Dummy credentials: botocore refuses to sign without some, and real ones must never be
# used against the fake endpoint (or, through a missing endpoint_url, against real AWS).
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}

_RUNNING: set[MotoServer] = set()
# moto.server with Kinesis shards made safe for concurrent PutRecords (see the launcher's docstring).
# Run by path, not as a script: a script's folder goes first on sys.path, and this one's moto.py would shadow moto.
_LAUNCH = f"import runpy; runpy.run_path({str(Path(__file__).with_name('moto_serial.py'))!r}, run_name='__main__')"


class MotoServer:
    """One moto server process: start, stop, reset, endpoint_url, env, client()."""

    def __init__(self, port: int | None = None, start_timeout: float = 30.0) -> None:
        self.host = HOST
        self.port: int | None = port
        self._fixed_port = port is not None
        self.start_timeout = start_timeout
        self.region = REGION
        self.base_dir = Path(tempfile.mkdtemp(prefix="cdc-moto-"))
        self.log = self.base_dir / "moto.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.is_running else None  # type: ignore[union-attr]

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point boto3 (in this process or a child) at this server.

        AWS_ENDPOINT_URL is honoured by boto3 >= 1.28 for every service, so a `cdc`
        subprocess reaches moto even where it builds clients without endpoint_url.
        """
        return {
            **DUMMY_CREDENTIALS,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
        }

    def start(self) -> MotoServer:
        """Start moto's server (through moto_serial.py) on a free port and wait until it answers HTTP."""
        if self.is_running:
            return self
        _check_installed()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            if self.port is None:
                self.port = free_port()
            argv = [sys.executable, "-c", _LAUNCH, "-H", self.host, "-p", str(self.port)]
            # Its request recorder (off until recording()) writes here, not into the server's working directory.
            self._proc = spawn(argv, self.log, env={**os.environ, "MOTO_RECORDER_FILEPATH": str(self.requests)})
            _RUNNING.add(self)
            if wait_until(self._answers, self.start_timeout) and self.is_running:
                return self
            if not self._fixed_port and not self.is_running and attempt < _PORT_ATTEMPTS:
                self.port = None  # most likely lost the race for the port; try another
                continue
            self.stop()
            raise RigError(
                f"moto server did not start on {self.endpoint_url}; last lines of {self.log}:\n{tail(self.log)}"
            )
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server by pid (SIGTERM, then SIGKILL)."""
        if self._proc is not None:
            stop_process(self._proc, timeout)
        _RUNNING.discard(self)

    def cleanup(self) -> None:
        """Stop the server and delete its log directory."""
        self.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def reset(self) -> None:
        """Forget every bucket, stream and object (moto's /moto-api/reset)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    @property
    def requests(self) -> Path:
        return self.base_dir / "requests.jsonl"

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[dict[str, Any]]]:
        """The requests the server answers inside the block (moto's recorder: method, url, headers), filled in
        when the block ends."""
        found: list[dict[str, Any]] = []
        self._recorder("reset-recording")
        self._recorder("start-recording")
        try:
            yield found
        finally:
            self._recorder("stop-recording")
            if self.requests.exists():
                found.extend(json.loads(line) for line in self.requests.read_text(encoding="utf-8").splitlines())

    def _recorder(self, verb: str) -> None:
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/recorder/{verb}", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for `service` bound to this server with dummy credentials."""
        import boto3  # here, so importing the rig does not require boto3

        settings: dict[str, Any] = {
            "endpoint_url": self.endpoint_url,
            "region_name": self.region,
            "aws_access_key_id": DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        }
        settings.update(kwargs)
        return boto3.client(service, **settings)

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"<MotoServer {self.endpoint_url} pid={self.pid}>"

    def _answers(self) -> bool:
        if not self.is_running:
            return True  # stop polling; start() reports the exit
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # any HTTP answer means the server is up
        except OSError:
            return False


def _check_installed() -> None:
    # find_spec, not import: importing moto costs seconds and the server runs in a child anyway.
    # flask comes with the moto[server] extra; without it the server cannot start.
    missing = [name for name in ("moto", "flask") if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingToolError(
            f"moto's server mode is not installed (missing {', '.join(missing)}): "
            f"run `{INSTALL_HINT}` or `bash scripts/setup.sh`"
        )


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_RUNNING):
        server.stop()
