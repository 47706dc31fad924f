"""Scale-out: the Slurm and local-parallel launcher configs compose; a 3-point multirun and a 2-shard
run each leave exactly one correct leaderboard row per point / run."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from hydra import compose, initialize_config_dir

from rvt_bench.harness.runner import run
from tests.demo_runs import REPO, demo_cfg, write_predictions


def launcher(name, model="precomputed", *overrides):
    root = ["model.root=x"] if model == "precomputed" else []
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=["+dataset=demo", f"+model={model}", *root, f"hydra/launcher={name}", *overrides],
                       return_hydra_config=True).hydra.launcher


def test_slurm_launcher_composes_to_submitit_with_the_models_resources():
    cfg = launcher("slurm")
    assert cfg._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert cfg.timeout_min == 240 and cfg.partition is None
    # conf/model/precomputed.yaml asks for no GPU (sbatch refuses a GPU request on a cluster without GPUs)
    assert (cfg.gpus_per_node, cfg.cpus_per_task, cfg.mem_gb) == (0, 2, 4)


def test_slurm_resources_default_to_one_gpu_and_the_user_wins():
    assert launcher("slurm", "dtr1").gpus_per_node == 1  # a model that names no resources
    assert launcher("slurm", "precomputed", "hydra.launcher.gpus_per_node=2").gpus_per_node == 2


def test_local_parallel_launcher_composes_to_joblib():
    cfg = launcher("local_parallel")
    assert cfg._target_ == "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher" and cfg.n_jobs == 2


def board(tmp_path):
    return pd.read_csv(tmp_path / "boards" / "demo.csv", dtype={"fingerprint": str})


def test_three_point_parallel_multirun_leaves_one_row_per_point(tmp_path):
    roots = [write_predictions(tmp_path / f"p{k}.jsonl", spoil_every=k + 2) for k in range(3)]
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "-m", "hydra/launcher=local_parallel",
                           "+dataset=demo", "+model=precomputed", "model.root=" + ",".join(map(str, roots)),
                           f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}", "run.bootstrap.B=100"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = board(tmp_path)
    assert len(rows) == 3 and rows["fingerprint"].is_unique
    for root in roots:
        # paths in a row are relative (to the working directory here, to run.root for run_dir)
        row = rows[rows["overrides"].str.contains(f"model.root={root.relative_to(tmp_path)}", regex=False)]
        assert len(row) == 1
        metrics = json.loads((tmp_path / "runs" / row["run_dir"].item() / "metrics.json").read_text())
        assert row["image/gIoU"].item() == round(metrics["metrics"]["image/gIoU"], 6)


def test_two_shards_and_their_merge_leave_one_row_equal_to_the_unsharded_run(tmp_path):
    preds = write_predictions(tmp_path / "p.jsonl", spoil_every=4)
    for shard in ("run.shard=0", "run.shard=1"):
        run(demo_cfg(tmp_path, preds, shard, "run.num_shards=2"))
    run(demo_cfg(tmp_path, preds, "run.num_shards=2", "run.merge=true"))
    whole = run(demo_cfg(tmp_path / "whole", preds))
    rows = board(tmp_path)
    assert len(rows) == 1 and rows["n"].item() == 31
    assert rows["image/gIoU"].item() == round(whole.metrics["metrics"]["image/gIoU"], 6)
    assert rows["video/J&F"].item() == round(whole.metrics["metrics"]["video/J&F"], 6)


def test_without_accounting_job_states_come_from_squeue_and_an_unlisted_job_has_ended():
    from rvt_bench.harness.slurm import GONE, QueueWatcher

    watcher = QueueWatcher()
    watcher.accounting = False  # as accounting_enabled() finds on a cluster with accounting_storage/none
    for job in ("7_0", "7_1", "8_0"):
        watcher.register_job(job)
    assert watcher._make_command()[0] == "squeue"
    info = watcher.read_info(b"7_0|RUNNING|node1\n7_[1]|PENDING|\n")  # squeue --format=%i|%T|%N
    assert info["7_0"]["State"] == "RUNNING" and info["7_1"]["State"] == "PENDING"
    assert info["8_0"]["State"] == GONE  # slurmctld forgot it (MinJobAge): it ended without a result
