#!/usr/bin/env bash
# Install dltestbed with its test tools, then run every test tier (unit, tf) and the linter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
.venv/bin/ruff check dltestbed tests bench
.venv/bin/python -m pytest -v --durations=10 "$@"
