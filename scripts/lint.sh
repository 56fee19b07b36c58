#!/usr/bin/env bash
# Style and types: ruff over everything Python in the repository, mypy --strict over the library (cdc/).
# scripts/test.sh runs this before a full run (so CI does); run it alone while editing.
#   bash scripts/lint.sh          # check
#   bash scripts/lint.sh --fix    # let ruff fix what it can (import order, pyupgrade), then check
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
if [[ "${1:-}" == "--fix" ]]; then
    "$PY" -m ruff check --fix --quiet . || true
fi
"$PY" -m ruff check .
"$PY" -m mypy
