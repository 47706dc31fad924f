#!/usr/bin/env python
"""Evaluate a model on a reasoning-visual-task benchmark.

    python run_bench.py                                   # DT-R1 (embedded tiny policy) on the bundled demo
    python run_bench.py +dataset=revos +model=dtr1 dataset.root=DIR dataset.split=valid
    python run_bench.py -m model.max_rounds=2,4           # a Hydra sweep: one run directory and row per point
    python run_bench.py --list                            # benchmarks, models, policies, perception, judges

The last line printed names the run directory (config.yaml, manifest.json, predictions.jsonl,
scores.jsonl, metrics.json).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from bench.cli import exit_on_known_errors
from bench.runner import format_summary, run

REPO_ROOT = Path(__file__).resolve().parent
DEFAULT_GROUPS = {"dataset": "demo", "model": "dtr1"}

# ${repo:demo} -> absolute path inside this checkout, whatever the working directory.
OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO_ROOT / rel), replace=True)

log = logging.getLogger("run_bench")


def with_default_groups(argv: list[str]) -> list[str]:
    """Add `+dataset=demo` / `+model=dtr1` when the command line selects no dataset / model.

    Hydra refuses `+group=` for a group already in the defaults list, so the demo defaults cannot
    live there if `+dataset=revos` is to work (design.md section 6)."""
    chosen = {a.split("=", 1)[0].lstrip("+~") for a in argv if "=" in a and not a.startswith("-")}
    return argv + [f"+{group}={name}" for group, name in DEFAULT_GROUPS.items() if group not in chosen]


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
    print(f"run directory: {result.run_dir}")
    # The protocol's headline metric, for Hydra sweepers (optuna & co.); None while shards run.
    value = (result.metrics or {}).get("metrics", {}).get(result.headline) if result.headline else None
    return float(value) if isinstance(value, (int, float)) else None


if __name__ == "__main__":
    if "--list" in sys.argv[1:]:  # benchmarks, models, policies, perception, judges: one line each
        from bench.catalog import main as list_components

        list_components()
        sys.exit(0)
    sys.argv = [sys.argv[0]] + with_default_groups(sys.argv[1:])
    main()
