#!/usr/bin/env bash
# Run the test suite: set the machine up (idempotent, fast when nothing changed), then pytest.
# Arguments go to pytest unchanged, and pytest's exit code is this script's exit code.
#   bash scripts/test.sh                      # everything but the slow and live-Snowflake tests
#   bash scripts/test.sh tests/rig -q         # one folder
#   bash scripts/test.sh -m slow              # the fault campaign
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
# Paths given to pytest are relative to the repository root.
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
