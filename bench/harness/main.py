"""The command line: `rvt-bench` (= `python run_bench.py`) runs an evaluation through Hydra;
`rvt-bench compare|report|render|visualize|attribute ...` run the helpers on finished runs.

    rvt-bench                                   # DT-R1 (embedded tiny policy) on the bundled demo
    rvt-bench +dataset=revos +model=dtr1 dataset.root=DIR dataset.split=valid
    rvt-bench -m model.max_rounds=2,4           # a Hydra sweep: one run directory and row per point
    rvt-bench +suite=reasoning_seg +model=lisa suite.datasets.revos.root=DIR ...   # several benchmarks, one table
    rvt-bench --list                            # benchmarks, models, policies, perception, judges, loggers
    rvt-bench --help                            # what to run, the groups, the flags, the docs
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
from rvt_bench.core import secrets
from rvt_bench.core.printable import echo, printable
from rvt_bench.core.records import sample_counts
from rvt_bench.core.paths import CONF_DIR
from rvt_bench.harness.cli import exit_on_known_errors, stop
from rvt_bench.harness.runner import format_summary, run
from rvt_bench.harness.secrets import hide_secret_overrides
from rvt_bench.core.types import RvtBenchError
from rvt_bench.harness.cli import stop_reason
from rvt_bench.harness.overrides import config_error, normalise
from rvt_bench.harness.plugins import searchpath_override

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


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(flags with their values, overrides) of a Hydra command line in any order. Hydra's parser
    takes its overrides as one run of positional arguments, so `key=value -m` followed by more
    overrides fails with "unrecognized arguments"; flags first, then every override, parses.
    Which flags take a value comes from Hydra's own parser (`--cfg job`, `--info [topic]`)."""
    from hydra._internal.utils import get_args_parser

    nargs = {opt: action.nargs for action in get_args_parser()._actions for opt in action.option_strings}
    flags: list[str] = []
    overrides: list[str] = []
    k = 0
    while k < len(argv):
        arg = argv[k]
        if arg.startswith("-"):
            flags.append(arg)
            takes = nargs.get(arg.split("=", 1)[0], 0) if "=" not in arg else 0
            nxt = argv[k + 1] if k + 1 < len(argv) else None
            if nxt is not None and (takes is None or (takes == "?" and "=" not in nxt and not nxt.startswith("-"))):
                flags.append(nxt)
                k += 1
        else:
            overrides.append(arg)
        k += 1
    return flags, overrides


def with_default_groups(argv: list[str]) -> list[str]:
    """The command line in the order Hydra parses (flags, then overrides), with `+dataset=demo` /
    `+model=dtr1` added when it selects no dataset / model.

    Hydra refuses `+group=` for a group already in the defaults list, so the demo defaults cannot
    live there if `+dataset=revos` is to work (docs/architecture.md "Conventions")."""
    flags, overrides = split_argv(argv)
    chosen = {a.split("=", 1)[0].lstrip("+~") for a in overrides if "=" in a}
    chosen |= swept_groups(overrides)
    if "suite" in chosen:  # a suite chooses its benchmarks (conf/suite/NAME.yaml)
        chosen.add("dataset")
    return flags + overrides + [f"+{group}={name}" for group, name in DEFAULT_GROUPS.items() if group not in chosen]


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
    if "suite" in cfg:  # +suite=NAME: every benchmark of conf/suite/NAME.yaml, one table at the end
        return _suite(cfg)
    with open_dict(cfg):
        cfg._overrides = task_overrides()
    if _multirun():
        return _sweep_point(cfg)
    # A known problem (missing data, a run dir of another config...): one line saying what to fix.
    result = exit_on_known_errors(lambda: run(cfg))
    value = _report(result, bool(cfg.run.verbose))
    failed = _nothing_to_show(result)
    if failed is not None:
        stop("all_failed", failed)
    return value


def _nothing_to_show(result) -> str | None:
    """Why a finished run is a failure although it ran to its end (every sample failed, none of them
    by the model's own output, or no leaderboard row was published when publishing was on), else
    None: the run exits 10 with it. A model whose every answer failed to parse (kinds parse, sandbox)
    has an honest score of its own, published and exit 0."""
    body = result.metrics or {}
    n, failures = body.get("n"), body.get("failures")
    if isinstance(n, int):  # every sample the run scored or its protocol's rule left out
        n = sum(sample_counts(body)[:2])
    by_kind = body.get("failures_by_kind") or {}
    if isinstance(n, int) and n > 0 and failures == n and not {"parse", "sandbox"} & set(by_kind):
        return (f"every one of the {n} samples failed ({body.get('failures_by_kind')}): see failed_samples in "
                f"{result.run_dir}/metrics.json for the reasons{_first_reason(body)}")
    if result.not_published is not None and result.kept is None:
        return f"nothing was published: {result.not_published}"
    return None


def _first_reason(body: dict) -> str:
    """'; the first: <its message>' of metrics.json's first failed sample (one line, at most 300
    characters), or '' when it names none: the stop line says what went wrong, not only where to look."""
    failed = body.get("failed_samples")
    first = failed[0] if isinstance(failed, list) and failed and isinstance(failed[0], dict) else {}
    message = first.get("message")
    return f"; the first: {echo(message, 300)}" if isinstance(message, str) and message else ""


def _report(result, verbose: bool = False) -> float | None:
    """Print a finished run's summary and where its files are; the headline value for sweepers."""
    print(format_summary(result, verbose=verbose))
    if result.leaderboard is not None:
        print(f"leaderboard: {printable(result.leaderboard)}")
    if result.not_published is not None:
        print(f"leaderboard: {printable(result.not_published)}", file=sys.stderr)
    if result.report is not None:
        print(f"report: {printable(result.report)}")
    if result.logged is not None:
        print(f"logged: {printable(result.logged)}")
    print(f"run directory: {printable(result.run_dir)}")  # a run.root with a newline prints escaped
    # The protocol's headline metric, for Hydra sweepers (optuna & co.); None while shards run.
    value = (result.metrics or {}).get("metrics", {}).get(result.headline) if result.headline else None
    return float(value) if isinstance(value, (int, float)) else None


def _multirun() -> bool:
    from hydra.types import RunMode

    return HydraConfig.get().mode == RunMode.MULTIRUN


def _sweep_point(cfg: DictConfig) -> float | None:
    """One point of a multirun: as a single run, except that a known problem is one line on stderr
    and a line of the sweep's table (rvt_bench.harness.sweep_table), not the end of the sweep."""
    from rvt_bench.harness.cli import one_line, stop_reason
    from rvt_bench.harness.sweep_table import note_point

    where = HydraConfig.get().runtime.output_dir
    bench = {"dataset": cfg.dataset.get("name"), "split": cfg.dataset.get("split")}
    try:
        result = run(cfg)
    except Exception as exc:
        reason = stop_reason(exc)
        if reason in (None, "interrupted"):
            raise
        from rvt_bench.harness.cli import EXIT_CODES

        note_point(where, task_overrides(), [{**bench, "run_dir": "", "metrics": None, "error": one_line(exc),
                                              "exit_code": EXIT_CODES[reason]}])
        print(f"error: {one_line(exc)}", file=sys.stderr, flush=True)
        return None
    from rvt_bench.harness.rundir import derived_name

    note_point(where, task_overrides(), [{**bench, "run_dir": str(result.run_dir),
                                        "metrics": derived_name("metrics.json", cfg.run.limit) if result.metrics else None}])
    return _report(result, bool(cfg.run.verbose))


def task_overrides() -> list[str]:
    """The command line's overrides as written: an override holding an interpolation
    (`model.root=/preds/${dataset.name}`) stays a string, resolved later in the run's own config."""
    return list(OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False))


def _suite(cfg: DictConfig) -> None:
    """Run the suite cfg.suite (rvt_bench.harness.suite), print its table; in a single run, exit 2
    with one line when a benchmark failed (in a sweep the other points go on)."""
    from hydra import compose

    from rvt_bench.harness.suite import format_suite, run_suite

    outcomes = run_suite(cfg.suite, task_overrides(),
                         lambda overrides: compose("config", overrides=overrides), run)
    print(secrets.scrub(format_suite(str(cfg.suite.name), outcomes)))
    if _multirun():
        from rvt_bench.harness.rundir import derived_name
        from rvt_bench.harness.sweep_table import note_point

        note_point(HydraConfig.get().runtime.output_dir, task_overrides(), [
            {"dataset": o.dataset, "split": o.split, "run_dir": o.run_dir, "error": o.error,
             "metrics": derived_name("metrics.json", cfg.run.limit) if o.metrics is not None else None} for o in outcomes])
    failed = [o for o in outcomes if o.error]
    if failed:
        message = (f"suite {cfg.suite.name}: {len(failed)} of {len(outcomes)} benchmarks failed "
                   f"({', '.join(f'{o.dataset} ({o.split})' for o in failed)}); the table above says why")
        if _multirun():
            print(f"error: {message}", file=sys.stderr)
        else:
            stop("error", message)
    return None


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
    if not probe.is_dir():
        return "error", (f"run.root={printable(root)} cannot hold files ({printable(probe)} is not a directory); "
                         f"set run.root to a directory")
    if os.access(probe, os.W_OK | os.X_OK):
        return None
    read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    what = "is on a read-only file system" if read_only else "is not writable (permission denied)"
    return ("read_only" if read_only else "permission",
            f"run.root={printable(root)} {what} ({printable(probe)}); set run.root to a writable directory")


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


def extra_conf_overrides(argv: list[str]) -> list[str]:
    """`hydra.searchpath=[...]` for the directories of RVT_BENCH_CONF_PATH (benchmarks declared
    outside conf/, rvt_bench.core.benchmark), unless the command line sets the search path itself."""
    from rvt_bench.core.benchmark import conf_dirs

    extra = conf_dirs()[1:]
    if not extra or any(a.lstrip("+~").startswith("hydra.searchpath") for a in argv):
        return []
    quoted = ",".join("'file://" + str(Path(d).resolve()).replace("\\", "\\\\").replace("'", "\\'") + "'" for d in extra)
    return [f"hydra.searchpath=[{quoted}]"]


def _console(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        sys.argv = [f"rvt-bench {argv[0]}", *argv[1:]]
        code = importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
        sys.exit(code if isinstance(code, int) else 0)
    if "--list" in argv:  # benchmarks, models, policies, perception, judges, loggers: with descriptions
        from rvt_bench.harness.catalog import catalog
        from rvt_bench.harness.plugins import command_line_sources, entry_point_sources

        print(catalog(sources=entry_point_sources() + command_line_sources(argv)))
        sys.exit(0)
    if "--help" in argv or "-h" in argv:  # this tool's help; Hydra's own stays at --hydra-help
        from rvt_bench.harness.catalog import help_text

        print(help_text())
        sys.exit(0)
    # Secrets never reach Hydra (its multirun.yaml, logged overrides, job logs) nor any file or line we write.
    secrets.scrub_logs()
    secrets.remember_environment()
    # installed packages' models and benchmarks (entry points rvt_bench.models / rvt_bench.datasets)
    argv = searchpath_override(hide_secret_overrides(with_default_groups(normalise(argv))) + extra_conf_overrides(argv))
    sys.argv = [sys.argv[0]] + argv
    problem = unwritable_root(argv)
    if problem is not None:
        stop(*problem)
    main()


_signals.restore(_BEFORE_IMPORTS)
