"""From the command line: a scripted rollout (policy=scripted, examples/sandbox_probe.json) whose
<execute> blocks look for dataset and run files, read /etc/shadow and the environment, and write
/proc/sys, /sys and /dev. Each attempt ends as the model's outcome in <results>; nothing reaches
the host or predictions.jsonl."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.adapters.sandbox.runner import bwrap_problem

REPO = Path(__file__).resolve().parent.parent
SECRET = "sk-cli-probe-must-not-leak"
pytestmark = pytest.mark.skipif(os.geteuid() != 0 and bwrap_problem() is not None,
                                reason="a normal user without unprivileged user namespaces gets the fallback")


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("reasonseg")
    (root / "val/instances").mkdir(parents=True)
    for suffix in (".jpg", ".json"):
        shutil.copy(REPO / "demo/reasonseg/val" / f"coffee_cup{suffix}", root / "val")
    shutil.copy(REPO / "demo/reasonseg/val/instances/coffee_cup.json", root / "val/instances")
    runs = tmp_path_factory.mktemp("runs")
    hostname = Path("/proc/sys/kernel/hostname").read_text()
    proc = subprocess.run(
        [sys.executable, str(REPO / "run_bench.py"), "+dataset=reasonseg", f"dataset.root={root}", "dataset.split=val",
         "+model=dtr1", "policy=scripted", f"policy.turns_file={REPO / 'examples/sandbox_probe.json'}",
         "model.sandbox.isolation=bwrap", f"run.root={runs}", f"leaderboard.dir={runs / 'boards'}"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=dict(os.environ, OPENAI_API_KEY=SECRET))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    record = json.loads((run_dir / "predictions.jsonl").read_text().splitlines()[0])
    return {"run_dir": run_dir, "record": record, "hostname": hostname, "root": root}


def test_every_probe_ends_as_an_error_in_results(probe_run):
    results = re.findall(r"<results>\n?(.*?)</results>", probe_run["record"]["trace"]["rollout"], re.S)
    assert results[0].strip() == "dataset/run files visible: []"
    assert results[1].startswith("FileNotFoundError") and "/etc/shadow" in results[1]
    env, leaks = results[2].split("\nprocesses with OPENAI_API_KEY: ")
    assert "OPENAI_API_KEY" not in env and SECRET not in env and leaks.strip() == "[]"
    assert results[3].startswith("PermissionError") and "/proc/sys/kernel/hostname" in results[3]
    assert results[4].startswith("FileNotFoundError") and "/sys/kernel/mm" in results[4]
    assert results[5].startswith("OSError: [Errno 30] Read-only file system: '/dev/pwn'")


def test_the_outcomes_are_the_models_not_failures(probe_run):
    record = probe_run["record"]
    reasons = [e["reason"] for e in record["trace"]["events"] if e["stage"] == "execute"]
    assert record["error"] is None and reasons == ["ok", "error", "ok", "error", "error", "error"]
    assert {e["isolation"] for e in record["trace"]["events"] if e["stage"] == "execute"} == {"bwrap"}


def test_nothing_reaches_the_host_or_the_run_files(probe_run):
    assert Path("/proc/sys/kernel/hostname").read_text() == probe_run["hostname"]
    assert not Path("/dev/pwn").exists()
    for f in probe_run["run_dir"].rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f
