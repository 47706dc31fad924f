#!/usr/bin/env python
"""Evaluate a model on a reasoning-visual-task benchmark.

    python run_bench.py                                   # DT-R1 (embedded tiny policy) on the bundled demo
    python run_bench.py +dataset=revos +model=dtr1 dataset.root=DIR dataset.split=valid
    python run_bench.py -m model.max_rounds=2,4           # a Hydra sweep: one run directory and row per point
    python run_bench.py --list                            # benchmarks, models, policies, perception, judges

The last line printed names the run directory (config.yaml, manifest.json, predictions.jsonl,
scores.jsonl, metrics.json, report.html; docs/architecture.md "Run directory").
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from harness.cli import exit_on_known_errors, stop
from harness.runner import format_summary, run

REPO_ROOT = Path(__file__).resolve().parent
DEFAULT_GROUPS = {"dataset": "demo", "model": "dtr1"}

# ${repo:demo} -> absolute path inside this checkout, whatever the working directory.
OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO_ROOT / rel), replace=True)

log = logging.getLogger("run_bench")


def with_default_groups(argv: list[str]) -> list[str]:
    """Add `+dataset=demo` / `+model=dtr1` when the command line selects no dataset / model.

    Hydra refuses `+group=` for a group already in the defaults list, so the demo defaults cannot
    live there if `+dataset=revos` is to work (docs/architecture.md "Conventions")."""
    chosen = {a.split("=", 1)[0].lstrip("+~") for a in argv if "=" in a and not a.startswith("-")}
    chosen |= swept_groups(argv)
    return argv + [f"+{group}={name}" for group, name in DEFAULT_GROUPS.items() if group not in chosen]


def swept_groups(argv: list[str]) -> set[str]:
    """Groups a chosen sweep preset (`+sweep=NAME`, conf/sweep/NAME.yaml) sweeps in its
    hydra.sweeper.params, e.g. conf/sweep/baselines.yaml's `+model: dtr1,jit,vlm`: those are chosen
    by the preset, not left to the demo defaults."""
    out: set[str] = set()
    for arg in argv:
        key, _, name = arg.partition("=")
        path = REPO_ROOT / "conf" / "sweep" / f"{name}.yaml"
        if key.lstrip("+") == "sweep" and path.is_file():
            params = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") or {}
            out |= {str(k).lstrip("+~") for k in params}
    return out


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    with open_dict(cfg):
        cfg._overrides = list(HydraConfig.get().overrides.task)
    # A known problem (missing data, a run dir of another config...): one line saying what to fix.
    result = exit_on_known_errors(lambda: run(cfg))
    print(format_summary(result))
    if result.leaderboard is not None:
        print(f"leaderboard: {result.leaderboard}")
    if result.not_published is not None:
        print(f"leaderboard: {result.not_published}", file=sys.stderr)
    if result.report is not None:
        print(f"report: {result.report}")
    print(f"run directory: {result.run_dir}")
    # The protocol's headline metric, for Hydra sweepers (optuna & co.); None while shards run.
    value = (result.metrics or {}).get("metrics", {}).get(result.headline) if result.headline else None
    return float(value) if isinstance(value, (int, float)) else None


def unwritable_root(argv: list[str]) -> tuple[str, str] | None:
    """(stop reason, message) when run.root (from `run.root=...`, default `runs`) cannot be written:
    Hydra creates its job directory there before any of our code runs, and would stop with a
    traceback. None when it looks writable (or does not matter: --cfg, --help)."""
    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return None
    root = Path(next((a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("run.root=")), "runs"))
    if "${" in str(root):
        return None
    probe = root.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK | os.X_OK):
        return None
    read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    what = "is on a read-only file system" if read_only else "is not writable (permission denied)"
    return ("read_only" if read_only else "permission",
            f"run.root={root} {what} ({probe}); set run.root to a writable directory")


if __name__ == "__main__":
    if "--list" in sys.argv[1:]:  # benchmarks, models, policies, perception, judges: one line each
        from harness.catalog import main as list_components

        list_components()
        sys.exit(0)
    argv = with_default_groups(sys.argv[1:])
    sys.argv = [sys.argv[0]] + argv
    problem = unwritable_root(argv)
    if problem is not None:
        stop(*problem)
    try:
        main()
    except KeyboardInterrupt:  # before or after the run itself (composing the config, printing)
        stop("interrupted", "interrupted (Ctrl-C); the same command resumes the run")
