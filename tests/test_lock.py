"""The dependency lock (constraints/ci.txt, scripts/lock_deps.sh) and what a run records of it
(bench/harness/manifest.py lock_state: sha256 and whether the installed packages match)."""
import hashlib
import re
from importlib import metadata
from pathlib import Path

from rvt_bench.harness.manifest import lock_state

REPO = Path(__file__).resolve().parents[1]


def test_the_lock_pins_every_dependency_of_the_test_install_and_not_the_project():
    text = (REPO / "constraints" / "ci.txt").read_text()
    pins = {re.split(r"==", line)[0].lower().replace("_", "-") for line in text.splitlines() if "==" in line}
    assert "rvt-bench" not in pins
    wanted = {re.split(r"[\s\[<>=!~;(]", r, maxsplit=1)[0].lower().replace("_", "-")
              for r in metadata.requires("rvt-bench") or [] if "extra ==" not in r or 'extra == "test"' in r}
    assert wanted <= pins, sorted(wanted - pins)
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==\S+", line) for line in text.splitlines()
               if line and not line.startswith("#"))


def test_a_run_records_the_locks_digest_and_whether_the_install_matches(tmp_path):
    lock = tmp_path / "ci.txt"
    lock.write_text(f"# a lock\npytest=={metadata.version('pytest')}\n")
    state = lock_state(lock)
    assert state["sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest() and state["matches"] and state["differ"] == []
    lock.write_text("pytest==0.0.1\nno-such-package-rvt==1.0\n")
    state = lock_state(lock)
    assert not state["matches"]
    assert state["differ"] == [f"pytest: 0.0.1 != {metadata.version('pytest')}", "no-such-package-rvt: 1.0 != absent"]
    assert lock_state(tmp_path / "missing.txt") is None
