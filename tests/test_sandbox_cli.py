"""From the command line: a scripted rollout (policy=scripted, examples/sandbox_probe.json) whose
<execute> blocks look for dataset and run files, read /etc/shadow and the environment, open /proc/sys,
/sys and /dev for writing and reach for the network, changing nothing even where they get through.
Each attempt ends as an error, the model's outcome in <results>; nothing reaches the host or
predictions.jsonl. Where bubblewrap cannot run, a run stops before its first sample, and only
model.sandbox.isolation=none runs the code, recorded as such in the summary, report and leaderboard."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rvt_bench.adapters.sandbox.runner import bwrap_problem

REPO = Path(__file__).resolve().parent.parent
SECRET = "sk-cli-probe-must-not-leak"
pytestmark = pytest.mark.skipif(os.geteuid() != 0 and bwrap_problem() is not None,
                                reason="a normal user without unprivileged user namespaces gets the fallback")


def _small_reasonseg(root: Path) -> Path:
    """A ReasonSeg-format root holding one demo image (coffee_cup)."""
    (root / "val/instances").mkdir(parents=True)
    for suffix in (".jpg", ".json"):
        shutil.copy(REPO / "demo/reasonseg/val" / f"coffee_cup{suffix}", root / "val")
    shutil.copy(REPO / "demo/reasonseg/val/instances/coffee_cup.json", root / "val/instances")
    return root


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory):
    root = _small_reasonseg(tmp_path_factory.mktemp("reasonseg"))
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
    return {"run_dir": run_dir, "record": record, "hostname": hostname, "root": root, "runs": runs}


def test_every_probe_ends_as_an_error_in_results(probe_run):
    results = re.findall(r"<results>\n?(.*?)</results>", probe_run["record"]["trace"]["rollout"], re.S)
    assert len(results) == 7
    assert results[:3] == ["FileNotFoundError: no dataset, ground-truth or run file is visible",
                           "FileNotFoundError: [Errno 2] No such file or directory: '/etc/shadow'",
                           "PermissionError: no environment visible here holds OPENAI_API_KEY"]
    # root mode: the sandbox's uid may not open it; a user namespace: /proc/sys is read-only
    assert results[3] in ("PermissionError: [Errno 13] Permission denied: '/proc/sys/kernel/hostname'",
                          "OSError: [Errno 30] Read-only file system: '/proc/sys/kernel/hostname'")
    assert results[4:] == [
        "FileNotFoundError: [Errno 2] No such file or directory: '/sys/kernel/mm/transparent_hugepage/enabled'",
        "OSError: [Errno 30] Read-only file system: '/dev'",
        "OSError: [Errno 97] Address family not supported by protocol"]


def test_the_outcomes_are_the_models_not_failures(probe_run):
    record = probe_run["record"]
    events = [e for e in record["trace"]["events"] if e["stage"] == "execute"]
    assert record["error"] is None and [e["reason"] for e in events] == ["error"] * 7
    assert {e["isolation"] for e in events} == {"bwrap"}


def test_nothing_reaches_the_host_or_the_run_files(probe_run):
    assert Path("/proc/sys/kernel/hostname").read_text() == probe_run["hostname"]
    assert not Path("/dev/pwn").exists()
    for f in probe_run["run_dir"].rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f


def test_a_contained_run_is_recorded_as_bwrap(probe_run):
    board = pd.read_csv(probe_run["runs"] / "boards" / "reasonseg.csv")
    assert list(board["sandbox"]) == ["bwrap"]
    assert json.loads((probe_run["run_dir"] / "manifest.json").read_text())["sandbox"] == "bwrap"


# --- where bubblewrap cannot run ---------------------------------------------------------------------

# What bwrap prints on a kernel without unprivileged user namespaces (bubblewrap's own message).
NO_USERNS = ("bwrap: No permissions to create new namespace, likely because the kernel does not allow "
             "non-privileged user namespaces.")


def _cli_without_bwrap(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """run_bench.py's command line on a machine where bubblewrap cannot start (its bwrap is one that
    fails as on a kernel without user namespaces)."""
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{NO_USERNS}' >&2\nexit 1\n")
    fake.chmod(0o755)
    main = (f"import rvt_bench.adapters.sandbox.world as w; w.bwrap_path = lambda: {str(fake)!r}; "
            "from rvt_bench.harness.main import console; console()")
    return subprocess.run([sys.executable, "-c", main, f"run.root={tmp_path / 'runs'}",
                           f"leaderboard.dir={tmp_path / 'boards'}", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_without_bwrap_a_bare_run_stops_before_any_sample_naming_isolation_none(tmp_path):
    proc = _cli_without_bwrap(tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors == proc.stderr.strip().splitlines()[-1:], proc.stderr[-2000:]
    assert errors[0].startswith("error: SandboxError: model-written code runs only inside bubblewrap")
    assert NO_USERNS[:60] in errors[0] and "model.sandbox.isolation=none" in errors[0]
    assert "Traceback" not in proc.stderr
    assert not [p for p in (tmp_path / "runs").rglob("*") if p.name.startswith(("predictions", "manifest"))]


def test_isolation_none_runs_and_every_record_says_so(tmp_path, probe_run):
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(['<think>p</think><dt_plan>{"SAM2": []}</dt_plan>',
                                 "<think>c</think><execute>print(len(twin['instances']))</execute>",
                                 '<think>a</think><task>segmentation</task><answer>{"instances": [1]}</answer>']))
    proc = _cli_without_bwrap(tmp_path, "+dataset=reasonseg", f"dataset.root={probe_run['root']}", "dataset.split=val",
                              "+model=dtr1", "policy=scripted", f"policy.turns_file={turns}",
                              "model.sandbox.isolation=none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    banner = "SANDBOX OFF (model.sandbox.isolation=none)"
    assert proc.stdout.index(banner) < proc.stdout.index("/ dtr1  run ")  # the banner, at the start (the log), before the summary
    assert "  sandbox: none  WARNING: model-written code ran UNSANDBOXED" in proc.stdout  # the summary
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    record = json.loads((run_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert [e["isolation"] for e in record["trace"]["events"] if e["stage"] == "execute"] == ["none"]
    assert json.loads((run_dir / "manifest.json").read_text())["sandbox"] == "none"
    assert "<strong>sandbox: none</strong>" in (run_dir / "report.html").read_text()
    board = pd.read_csv(tmp_path / "boards" / "reasonseg.csv")
    assert list(board["sandbox"]) == ["none"]
