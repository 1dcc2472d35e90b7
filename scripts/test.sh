#!/usr/bin/env bash
# Install dltestbed with its test tools, then the linter, the formatter's check, the type checker, and every
# test tier, on empty dltestbed folders and image stores (scripts/fresh.sh): as a new user's first run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
.venv/bin/ruff check dltestbed tests bench scripts
.venv/bin/ruff format --check dltestbed tests bench scripts
.venv/bin/mypy  # the package, as pyproject.toml's [tool.mypy] says
# the container and VM tiers build images and guest disks: say up front when the disk is short of them
free_gb=$(df --output=avail -BG /var/lib | tail -1 | tr -dc 0-9)
echo "disk: ${free_gb} GB free under /var/lib (the tests need about 25 GB)"
if [ "$free_gb" -lt 25 ]; then
  echo "warning: only ${free_gb} GB free: image and VM tests may fail with 'No space left on device'" >&2
fi
# a new user's machine: dltestbed's folders and image stores start empty for this run (scripts/fresh.sh)
source scripts/fresh.sh
trap fresh_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT  # a stopped run cleans up too
fresh_start
# one fixed temp folder, emptied by pytest when it starts: a run that was killed (its labs' layers, VM
# disks) leaves nothing that outlives the next run
.venv/bin/python -m pytest -v --durations=10 --basetemp "${DLTESTBED_TEST_TMP:-/tmp/dltestbed-tests}" "$@"
