"""`-m hydra/launcher=slurm` on a real single-node Slurm cluster (tests/slurm_cluster.py; no job
accounting, no GPU): a 2-point sweep, a 2-shard run and its merge, and a job cancelled with scancel
mid-run then resumed by the same command. Each leaves exactly one leaderboard row per run, with the
values of the same run done locally, and the launcher prints no sacct noise.

Needs Debian's slurm-wlm and munge (.ci/run installs them); skipped where they are not installed,
except under CI, where that is a failure."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from rvt_bench.harness.runner import run
from tests.demo_runs import REPO, demo_cfg, write_predictions
from tests.slurm_cluster import SlurmCluster, missing_binaries
from tests.vlm_server import ChatServer, default_reply

LOCAL = ["run.verify_frames=false", "run.bootstrap.B=100", "run.report=false"]
# one CPU per job, so that two jobs run side by side on a 2-core node
SLURM = ["-m", "hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1"]
NOISE = ("sacct", "accounting storage is disabled")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = missing_binaries()
    reason = None
    if os.geteuid() != 0:
        reason = "the test cluster runs slurmd and slurmctld as root (CI's user)"
    elif missing:
        reason = f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge, as .ci/run does"
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    c = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    yield c
    c.stop()


def bench(cluster: SlurmCluster, tmp_path: Path, *args: str, wait: bool = True):
    """run_bench.py with `args` as a user types it, on the cluster; the finished process (or the
    running one when wait=False)."""
    argv = [sys.executable, str(REPO / "run_bench.py"), *args, f"run.root={tmp_path / 'runs'}",
            f"leaderboard.dir={tmp_path / 'boards'}", *LOCAL]
    if not wait:
        return subprocess.Popen(argv, cwd=tmp_path, env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(argv, cwd=tmp_path, env=cluster.env(), capture_output=True, text=True, timeout=600)


def board(tmp_path: Path) -> pd.DataFrame:
    return pd.read_csv(tmp_path / "boards" / "demo.csv", dtype={"fingerprint": str})


def same_values(row: pd.Series, metrics: dict) -> None:
    assert row["n"] == metrics["n"] and row["failures"] == metrics["failures"]
    for key in ("image/gIoU", "image/cIoU", "video/J&F", "rvt/grounding/m_vIoU"):
        assert row[key] == round(metrics["metrics"][key], 6), key


def test_a_two_point_sweep_runs_as_two_jobs_and_leaves_one_row_each(cluster, tmp_path):
    roots = [write_predictions(tmp_path / f"p{k}.jsonl", spoil_every=k + 2) for k in range(2)]
    jobs_before = len(cluster.jobs())
    proc = bench(cluster, tmp_path, *SLURM, "+dataset=demo", "dataset.split=demo",
                 "+model=precomputed", "model.root=" + ",".join(map(str, roots)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not [w for w in NOISE if w in proc.stderr], proc.stderr[-2000:]
    assert len(cluster.jobs()) == jobs_before + 2  # one Slurm job per point
    rows = board(tmp_path)
    assert len(rows) == 2 and rows["fingerprint"].is_unique
    for root in roots:
        local = run(demo_cfg(tmp_path / "local" / root.stem, root, *LOCAL))
        (row,) = [r for _, r in rows.iterrows() if f"/{root.name}" in "/" + r["overrides"].split("model.root=", 1)[1]]  # portable paths
        same_values(row, local.metrics)


def test_two_shards_as_two_jobs_then_the_merge_leave_one_row_equal_to_the_local_run(cluster, tmp_path):
    preds = write_predictions(tmp_path / "p.jsonl", spoil_every=4)
    common = ["+dataset=demo", "dataset.split=demo", "+model=precomputed", f"model.root={preds}", "run.num_shards=2"]
    jobs_before = len(cluster.jobs())
    proc = bench(cluster, tmp_path, *SLURM, *common, "run.shard=0,1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(cluster.jobs()) == jobs_before + 2
    merged = bench(cluster, tmp_path, *common, "run.merge=true")
    assert merged.returncode == 0, merged.stderr[-3000:]
    rows = board(tmp_path)
    assert len(rows) == 1 and rows["n"].item() == 31
    whole = run(demo_cfg(tmp_path / "whole", preds, *LOCAL))
    same_values(rows.iloc[0], whole.metrics)


class Gate:
    """A chat reply function that answers the first `open_for` requests and holds every later one
    until `release()` (at most `hold_s` seconds)."""

    def __init__(self, open_for: int, hold_s: float = 300.0):
        self.left, self.hold_s = open_for, hold_s
        self.held = 0
        self.released = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        with self.lock:
            holding = self.left <= 0 and not self.released.is_set()
            self.left -= 1
            self.held += holding
        if holding:
            self.released.wait(self.hold_s)
        return default_reply(body)

    def release(self) -> None:
        self.released.set()


def _wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {timeout_s} s"
        time.sleep(0.2)


def test_a_job_cancelled_mid_run_is_resumed_by_the_same_command(cluster, tmp_path):
    # The VLM adapter against a served model (the loopback chat server): a job that waits on its
    # server mid-run, as a GPU job does. No SAM2 here, so segmentation samples fail after the reply
    # (the same way locally), and the resume does not retry them (run.retry_failed=[]).
    gate = Gate(open_for=4)  # the preflight's request (an image: rvt_bench.adapters.vlm), then 3 samples
    server = ChatServer(model="tiny-vlm", reply=gate)
    model = ["+dataset=demo", "+model=vlm", "model.model=tiny-vlm", f"model.base_url={server.url}", "model.sam2=null",
             "model.frames.num_frames=2", "run.batch_size=1", "run.retry_failed=[]",
             "run.stop_after_same_failures=0"]  # the segmentation samples fail alike (no SAM2), on purpose
    # an API-served model: the job needs no GPU and little memory
    command = [*SLURM, "hydra.launcher.gpus_per_node=0", "hydra.launcher.mem_gb=2", *model]
    try:
        first = bench(cluster, tmp_path, *command, wait=False)
        try:
            _wait_for(lambda: gate.held > 0, 300, "request held by the server")
            (preds,) = (tmp_path / "runs").glob("demo/vlm/*/predictions.jsonl")
            before = preds.read_text().splitlines()
            assert len(before) == 3  # 3 samples answered, the 4th in flight
            (job,) = [j for j, state in cluster.jobs() if state == "RUNNING"]
            subprocess.run(["scancel", job], env=cluster.env(), check=True)
            _, err = first.communicate(timeout=180)
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode != 0  # the sweep reports its cancelled job
        assert not [w for w in NOISE if w in err], err[-2000:]
        gate.release()

        again = bench(cluster, tmp_path, *command)
        assert again.returncode == 0, again.stderr[-3000:]
        after = preds.read_text().splitlines()
        assert after[:3] == before  # the resume kept the finished samples and predicted the rest once
        assert len({json.loads(line)["sample_id"] for line in after}) == len(after) == 10  # the quick split
        rows = board(tmp_path)
        assert len(rows) == 1
        local = run(_local_cfg(tmp_path / "local", model))
    finally:
        gate.release()
        server.close()
    same_values(rows.iloc[0], local.metrics)


def _local_cfg(tmp_path: Path, model: list[str]):
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*model, f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}",
                                           *LOCAL])
    with open_dict(cfg):
        cfg._overrides = list(model)
    return cfg
