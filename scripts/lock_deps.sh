#!/usr/bin/env bash
# Write constraints/ci.txt: the lock of the full dependency set, every package of a venv the suite
# passed in, pinned to its version (`pip freeze`), the project itself left out. CI installs with it
# (.ci/run: pip install -c constraints/ci.txt -e ".[test]"), so two installs get the same versions;
# a run records its sha256 and whether the installed packages match it (manifest.json "lock").
#   usage: scripts/lock_deps.sh [PYTHON]   (default .venv/bin/python; run after the suite passed)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-.venv/bin/python}
out=constraints/ci.txt
mkdir -p constraints
{
    echo "# The lock of rvt-bench's dependency set: pip install -c constraints/ci.txt -e \".[test]\""
    echo "# Written by scripts/lock_deps.sh from a venv the suite passed in ($($py -c 'import platform; print("Python", platform.python_version(), platform.machine())'), $(date -u +%Y-%m-%d))."
    echo "# scripts/test_unlocked.sh runs the suite with the newest versions pyproject.toml allows instead."
    "$py" -m pip freeze --exclude-editable --disable-pip-version-check | grep -viE '^(rvt-bench|rvt_bench)[ =@]' | LC_ALL=C sort -f
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out: $(grep -vc '^#' "$out") pins"
