"""Suites: `rvt-bench +suite=NAME +model=...` runs every benchmark (and split) of conf/suite/NAME.yaml
for one model, each as its own run (run directory, leaderboard row, report), then prints one table
of all of them and each benchmark's paper-layout table. A benchmark that fails (no data, a bad
config, a stop) is a line of that table with its reason; the others still run.

    conf/suite/reasoning_seg.yaml
    name: reasoning_seg
    benchmarks:                               # each: dataset (conf/dataset/<name>), split, overrides
      - {dataset: reasonseg, split: val}
      - {dataset: revos, split: valid}
    datasets:                                 # per dataset: where its data is
      reasonseg: {root: null, hf_dataset: null}   # suite.datasets.reasonseg.root=DIR on the command line

Every other override of the command line (model, run.root, leaderboard.dir, ...) applies to every
benchmark; `model.root=/preds/${dataset.name}_${dataset.split}` gives each its own predictions.
"""
from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import MissingMandatoryValue

from rvt_bench.core.units import NA, ci_text, show, unit
from rvt_bench.harness.cli import _traceback_to_log_files, one_line, stop_reason

log = logging.getLogger(__name__)

_PLAIN = re.compile(r"^[A-Za-z0-9_./:@+-]*$")


@dataclass
class Outcome:
    """One benchmark of a suite: what ran and how it ended."""

    dataset: str
    split: str
    metrics: dict[str, Any] | None = None   # metrics.json body; None when the benchmark failed
    run_dir: str = ""
    error: str = ""                          # why it failed ("" when it ran)
    overrides: list[str] = field(default_factory=list)
    sandbox: str = ""                        # how model-written code ran ("bwrap", "none"; "" when none ran)


def _quote(value: Any) -> str:
    text = str(value)
    return text if _PLAIN.match(text) else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def benchmark_overrides(suite: dict[str, Any], entry: dict[str, Any], user: list[str]) -> list[str]:
    """The overrides composing one benchmark's run: the command line's (without the suite's own and
    without any +dataset choice), the benchmark's dataset and split, its data location from
    suite.datasets.<dataset>, and the entry's own overrides."""
    name = str(entry["dataset"])
    kept = [o for o in user if not o.lstrip("+~").startswith(("suite", "dataset=", "dataset."))]
    out = [*kept, f"+dataset={name}"]
    if entry.get("split") is not None:
        out.append(f"dataset.split={_quote(entry['split'])}")
    for key, value in _dotted((suite.get("datasets") or {}).get(name) or {}):
        if value is not None:
            out.append(f"dataset.{key}={_quote(value)}")
    return out + [str(o) for o in entry.get("overrides") or []]


def dataset_overrides_ignored(user: list[str]) -> list[str]:
    """The command line's dataset overrides, which a suite does not apply to every benchmark (a key
    of one benchmark's config is unknown to another's): suite.datasets.<name>.<key>=... says whose."""
    return [o for o in user if o.lstrip("+~").startswith(("dataset=", "dataset."))]


def _dotted(node: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in node.items():
        path = f"{prefix}{key}"
        out += _dotted(value, path + ".") if isinstance(value, dict) else [(path, value)]
    return out


def _reason(exc: BaseException, dataset: str) -> str:
    if isinstance(exc, MissingMandatoryValue) and "root" in str(exc.full_key or ""):
        return (f"no data: set suite.datasets.{dataset}.root=DIR (the official files) or "
                f"suite.datasets.{dataset}.hf_dataset=ID (docs/benchmarks/{dataset}.md)")
    if stop_reason(exc) is None:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} (a bug: traceback in the log)"
    return " ".join(one_line(exc).split())


def run_suite(suite: DictConfig, user: list[str], compose: Callable[[list[str]], DictConfig],
              run: Callable[[DictConfig], Any]) -> list[Outcome]:
    """Run every benchmark of `suite` (the composed suite node): compose(overrides) builds its
    config, run(cfg) evaluates it (rvt_bench.harness.runner.run). Ctrl-C ends the suite (it
    propagates); any other error fails that benchmark only, recorded with its one-line reason."""
    plain = OmegaConf.to_container(suite, resolve=True)
    ignored = dataset_overrides_ignored(user)
    if ignored:
        log.warning("suite %s: %s not applied (each benchmark has its own dataset config): use "
                    "suite.datasets.<dataset>.<key>=VALUE", plain.get("name"), " ".join(ignored))
    outcomes = []
    entries = list(plain.get("benchmarks") or [])
    for k, entry in enumerate(entries, 1):
        name, split = str(entry["dataset"]), str(entry.get("split", ""))
        overrides = benchmark_overrides(plain, entry, user)
        outcome = Outcome(name, split, overrides=overrides)
        print(f"[{k}/{len(entries)}] {name} ({split}) ...", file=sys.stderr, flush=True)
        try:
            cfg = compose(overrides)
            with open_dict(cfg):
                cfg._overrides = overrides
            result = run(cfg)
            outcome.metrics, outcome.run_dir = result.metrics, str(result.run_dir)
            outcome.sandbox = str(getattr(result, "sandbox", "") or "")
            if result.metrics is None:
                outcome.error = "scoring waits for the other shards (run.merge=true once all are done)"
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # one benchmark's failure is a line of the table, not the suite's end
            if stop_reason(exc) == "interrupted":
                raise
            outcome.error = _reason(exc, name)
            _traceback_to_log_files(exc)  # the terminal gets the table's one line, the log files the traceback
        print(f"[{k}/{len(entries)}] {name} ({split}): " + (f"FAILED: {outcome.error}" if outcome.error
                                                            else f"done -> {outcome.run_dir}"), file=sys.stderr, flush=True)
        outcomes.append(outcome)
    return outcomes


def suite_table(name: str, outcomes: list[Outcome], digits: int = 1) -> str:
    """One markdown table of a suite: per benchmark and headline metric, value [95% CI] in its unit,
    n, failures and the run directory; a failed benchmark is one line saying why."""
    lines = [f"## suite {name}: {sum(1 for o in outcomes if not o.error)} of {len(outcomes)} benchmarks ran", ""]
    unsandboxed = [o.dataset for o in outcomes if o.sandbox == "none"]
    if unsandboxed:
        lines += [f"WARNING: model-written code ran UNSANDBOXED (isolation=none) in: {', '.join(unsandboxed)}", ""]
    lines += ["| benchmark | split | metric | value | 95% CI | unit | n | failures | run directory |",
              "|---|---|---|---:|---|---|---:|---:|---|"]
    for o in outcomes:
        m = o.metrics
        if o.error or m is None:
            lines.append(f"| {o.dataset} | {o.split} | FAILED | {NA} | {NA} | | | | {' '.join(o.error.split())} |")
            continue
        values, cis = m.get("metrics") or {}, m.get("ci") or {}
        keys = [k for k in m.get("headline") or [] if k in values] or list(values)
        for key in keys:
            bench = o.dataset + (" [UNSANDBOXED]" if o.sandbox == "none" else "")
            lines.append(f"| {bench} | {o.split} | {key} | {show(key, values.get(key), digits)} | "
                         f"{ci_text(cis.get(key), digits, key)} | {unit(key)} | {m.get('n')} | {m.get('failures')} | "
                         f"{o.run_dir} |")
    return "\n".join(lines)


def paper_tables(outcomes: list[Outcome]) -> list[str]:
    """Each benchmark's paper-layout table (rvt_bench.leaderboards.tables) over the suite's runs of
    it, splits of one benchmark together (ReasonSeg val + test in LISA's layout)."""
    from rvt_bench.leaderboards.tables import paper_table

    by_dataset: dict[str, list[dict]] = {}
    for o in outcomes:
        if o.metrics is not None and not o.error:
            by_dataset.setdefault(o.dataset, []).append(o.metrics)
    return [paper_table(runs) for runs in by_dataset.values()]


def format_suite(name: str, outcomes: list[Outcome]) -> str:
    """The suite's report for the terminal: the combined table, then the paper-layout tables."""
    return "\n\n".join([suite_table(name, outcomes), *paper_tables(outcomes)])
