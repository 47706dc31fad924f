#!/usr/bin/env python
"""Evaluate a model on a reasoning-visual-task benchmark.

    python run_bench.py                                   # DT-R1 (embedded tiny policy) on the bundled demo
    python run_bench.py +dataset=revos +model=dtr1 dataset.root=DIR dataset.split=valid
    python run_bench.py -m model.max_rounds=2,4           # a Hydra sweep: one run directory and row per point

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
from omegaconf.errors import MissingMandatoryValue

from bench.runner import format_summary, run
from bench.types import RvtBenchError

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


def _our_error(exc: BaseException) -> RvtBenchError | None:
    """The RvtBenchError behind `exc` (Hydra wraps errors raised while instantiating), if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, RvtBenchError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    with open_dict(cfg):
        cfg._overrides = list(HydraConfig.get().overrides.task)
    try:
        result = run(cfg)
    except MissingMandatoryValue as exc:
        key = exc.full_key or "a required value"
        print(f"error: {key} is required: pass {key}=... on the command line (see conf/ for what it means)",
              file=sys.stderr)
        sys.exit(2)
    except Exception as exc:
        ours = _our_error(exc)
        if ours is None:
            raise
        # A known problem (missing data, a run dir of another config...): its message says what to fix.
        print(f"error ({type(ours).__name__}): {ours}", file=sys.stderr)
        sys.exit(2)
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
    sys.argv = [sys.argv[0]] + with_default_groups(sys.argv[1:])
    main()
