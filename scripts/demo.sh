#!/usr/bin/env bash
# The main job on local defaults: set the machine up, then run the pipeline end to end against
# throwaway local services (see examples/demo.py for the steps). Arguments go to the demo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" examples/demo.py "$@"
