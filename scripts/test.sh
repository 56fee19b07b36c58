#!/usr/bin/env bash
# Run the test suite: set the machine up (idempotent, fast when nothing changed), then pytest.
# Arguments go to pytest unchanged, and pytest's exit code is this script's exit code. The tests run on every
# core (pytest-xdist, -n auto) unless the arguments say otherwise (-n 0: one process, e.g. to use a debugger).
#   bash scripts/test.sh                      # lint (scripts/lint.sh), then everything but the slow and live-Snowflake tests
#   bash scripts/test.sh tests/rig -q         # one folder
#   bash scripts/test.sh -m slow              # the fault campaign
#   bash scripts/test.sh -n 0 -x tests/capture/test_tail_rebase.py
#   CDC_SUITE_PROFILE=/tmp/prof bash scripts/test.sh -p tests.suite_profile   # CPU, JVM and mariadbd starts per test
#                                                   (docs/performance.md, "Test suite")
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
# Paths given to pytest are relative to the repository root.
cd "$ROOT"
parallel=(-n auto --dist worksteal)
whole_suite=1
for arg in "$@"; do
    case "$arg" in
        -n|-n*|--numprocesses*) parallel=() ;;
        tests*|-k|-m|--lf|--last-failed) whole_suite=0 ;;  # a part of the suite: no need to lint everything
    esac
done
# Before the whole suite (CI's case), style and types first: seconds, and they fail fast.
if [[ $whole_suite == 1 && "${CDC_SKIP_LINT:-0}" != 1 ]]; then
    bash "$ROOT/scripts/lint.sh"
fi
exec "$ROOT/.venv/bin/python" -m pytest "${parallel[@]}" "$@"
