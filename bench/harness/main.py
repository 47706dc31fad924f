"""The command line: `rvt-bench` (= `python run_bench.py`) runs an evaluation through Hydra;
`rvt-bench compare|report|render|visualize|attribute ...` run the helpers on finished runs.

    rvt-bench                                   # DT-R1 (embedded tiny policy) on the bundled demo
    rvt-bench +dataset=revos +model=dtr1 dataset.root=DIR dataset.split=valid
    rvt-bench -m model.max_rounds=2,4           # a Hydra sweep: one run directory and row per point
    rvt-bench --list                            # benchmarks, models, policies, perception, judges
    rvt-bench compare RUN_A RUN_B               # paired deltas of two runs (and report, render, ...)
"""
from __future__ import annotations

from rvt_bench.harness import signals as _signals

# The imports below take seconds; a Ctrl-C (or SIGTERM, SIGHUP) during them is one line too (so
# they follow this statement: E402 by design). The handlers come back at the end of this module.
_BEFORE_IMPORTS = _signals.during_import()

import importlib
import logging
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

import rvt_bench.harness.config  # noqa: F401  registers the structured configs conf/ extends (run, leaderboard, judge, model)
from rvt_bench.core.paths import CONF_DIR
from rvt_bench.harness.cli import exit_on_known_errors, stop
from rvt_bench.harness.runner import format_summary, run
from rvt_bench.core.types import RvtBenchError
from rvt_bench.harness.cli import stop_reason
from rvt_bench.harness.overrides import config_error, normalise

DEFAULT_GROUPS = {"dataset": "demo", "model": "dtr1"}
# `rvt-bench NAME ...`: the helpers on finished runs, each a module with main(argv)
COMMANDS = {
    "compare": "rvt_bench.harness.compare",
    "report": "rvt_bench.harness.report",
    "render": "rvt_bench.leaderboards.render",
    "visualize": "rvt_bench.harness.visualize",
    "attribute": "rvt_bench.harness.attribute",
}

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
        path = CONF_DIR / "sweep" / f"{name}.yaml"
        if key.lstrip("+") == "sweep" and path.is_file():
            params = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") or {}
            out |= {str(k).lstrip("+~") for k in params}
    return out


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
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


def console(argv: list[str] | None = None) -> None:
    """Entry of `rvt-bench` and `python run_bench.py`: a helper command, `--list`, or an evaluation.
    Every stop is one line with its exit status: a stop signal at any moment (rvt_bench.harness.signals),
    a config mistake Hydra or a schema finds (rvt_bench.harness.overrides, status 2)."""
    _signals.install()
    full_error = os.environ.get("HYDRA_FULL_ERROR") == "1"  # the user asked for Hydra's tracebacks
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra then raises its composition errors instead of printing them
    try:
        _console(argv)
    except KeyboardInterrupt as exc:  # before or after the run itself (composing the config, printing)
        stop(_signals.reason(exc), f"{_signals.said(exc)}; the same command resumes the run")
    except RvtBenchError as exc:  # a command-line mistake found before Hydra (normalise)
        stop(stop_reason(exc) or "error", str(exc))
    except Exception as exc:
        line = None if full_error else config_error(exc)
        if line is None:
            raise
        stop("error", line)
    finally:
        _signals.quiet()


def _console(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        sys.argv = [f"rvt-bench {argv[0]}", *argv[1:]]
        code = importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
        sys.exit(code if isinstance(code, int) else 0)
    if "--list" in argv:  # benchmarks, models, policies, perception, judges: one line each
        from rvt_bench.harness.catalog import main as list_components

        list_components()
        sys.exit(0)
    argv = with_default_groups(normalise(argv))
    sys.argv = [sys.argv[0]] + argv
    problem = unwritable_root(argv)
    if problem is not None:
        stop(*problem)
    main()


_signals.restore(_BEFORE_IMPORTS)
