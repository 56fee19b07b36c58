"""Run `cdc` for the ship tests: the real root app in-process, and the argv of the same app as a subprocess."""

from __future__ import annotations

import sys

from cdc.commands.main import app  # noqa: F401  (re-exported for the ship tests' CliRunner)

ARGV = [sys.executable, "-m", "cdc"]
