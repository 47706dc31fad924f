"""What a person reads after a run: the terminal summary and the markdown results table.

Files (metrics.json, leaderboard CSVs) hold fractions in [0, 1]; everything printed here is in
percent and says so ("%" in the value or the column head). A value that does not exist is printed
"n/a" with its reason (metrics.json "unavailable"). The summary fits a screen: the headline table,
the model's funnel and measures, failures, judge and warnings, the paste-ready table, and where the
rest is (report.html, metrics.json); `run.verbose=true` adds every metric and breakdown.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rvt_bench.core.records import sample_counts, submission_of
from rvt_bench.core.units import NA, SCORE_METRICS, ci_text, pct, show, unit  # noqa: F401  (re-exported)
from rvt_bench.harness.view import (adapter_report, averages_of, breakdown_rows, companion_keys, funnel_text, headline_rows,
                                    measure_text, metric_unit)

WIDTH = 110       # wrap long lines (funnel, measures) at this many characters
MAX_WARNINGS = 5  # more are counted and left to metrics.json "warnings" (all of them with run.verbose=true)


def results_table(metrics: dict[str, Any], keys: list[str] | None = None, digits: int = 1) -> str:
    """Markdown table `| benchmark | metric | value | 95% CI | unit | n |` of a metrics.json body
    (unit "%": the value x100; "score": as stored, e.g. CIDEr; "count").

    keys: the metrics shown (default: the protocol's headline metrics). n: samples behind the value
    (the interval's n; the run's n for an unprefixed metric without an interval; else n/a).
    """
    bench = f"{metrics.get('dataset')} ({metrics.get('split')})" if metrics.get("split") else str(metrics.get("dataset"))
    lines = ["| benchmark | metric | value | 95% CI | unit | n |", "|---|---|---:|---|---|---:|"]
    for row in headline_rows(metrics, digits, keys):
        lines.append(f"| {bench} | {row.key} | {row.value_text} | {row.ci_text} | {row.unit} | "
                     f"{NA if row.n is None else row.n} |")
    return "\n".join(lines)


def latency_line(metrics: dict[str, Any], scoring_s: float | None, prediction: dict[str, Any] | None = None,
                 predicted_now: int | None = None) -> list[str]:
    """The summary's latency lines, the two kinds of seconds apart: the seconds the model's report
    measured per request (generation, perception, code, total), summed over requests (requests that
    ran at the same time overlap, so a sum can exceed the wall time); then the wall time of this
    invocation's prediction (manifest.json "prediction": {"seconds", "samples"}) and of its scoring
    (manifest.json "scoring"). Neither wall time is in metrics.json, which a re-scoring must
    reproduce byte for byte. predicted_now: the samples this invocation predicted; 0 (a resume with
    nothing left to predict) names the prediction time as an earlier invocation's, with its date; None
    (a report built from the run's files) names it by the date its invocation finished."""
    report = adapter_report(metrics)
    shown = [f"{m.label.removesuffix(' time')} {float(m.value):.3f}" for m in (report.measures if report else [])
             if m.unit == "s" and isinstance(m.value, (int, float))]
    lines = [f"  latency, summed per request (s): {', '.join(shown)}"] if shown else []
    wall = []
    if prediction and isinstance(prediction.get("seconds"), (int, float)):
        samples = prediction.get("samples", "?")
        when = f" on {prediction['finished_utc']}" if prediction.get("finished_utc") else ""
        if predicted_now == 0:
            wall.append(f"prediction {float(prediction['seconds']):.3f} ({samples} samples predicted by an earlier "
                        f"invocation{when}; this one predicted none)")
        elif predicted_now is None:  # a report rebuilt later: which invocation is "latest" is not known here
            wall.append(f"prediction {float(prediction['seconds']):.3f} ({samples} samples, by the invocation "
                        f"that finished predicting{when})")
        else:
            wall.append(f"prediction {float(prediction['seconds']):.3f} ({samples} samples predicted by the latest "
                        "invocation)")
    if scoring_s is not None:
        wall.append(f"scoring {float(scoring_s):.3f}")
    return lines + ([f"  wall time (s): {', '.join(wall)}"] if wall else [])


def sandbox_lines(sandbox: str | None) -> list[str]:
    """How model-written code ran (manifest.json "sandbox"): nothing for a model that runs none,
    one line for bubblewrap, a warning for a run that ran it unsandboxed."""
    if sandbox == "none":
        return ["  sandbox: none  WARNING: model-written code ran UNSANDBOXED as this user (isolation=none); "
                "these numbers are not from a contained run"]
    return [f"  sandbox: {sandbox}"] if sandbox else []


def _wrapped(head: str, items: list[str], sep: str) -> list[str]:
    """`head` + items joined by `sep`, broken between items (never inside one) at WIDTH."""
    lines, line = [], head
    for k, item in enumerate(items):
        piece = item + (sep.rstrip() if k < len(items) - 1 else "")
        if line != head and not line.isspace() and len(line) + len(piece) > WIDTH:
            lines.append(line.rstrip())
            line = " " * len(head)
        line += piece + " "
    return lines + [line.rstrip()]


def model_lines(metrics: dict[str, Any]) -> list[str]:
    """The model's own report (AdapterReport), as the adapter labelled it: its funnel on one line
    (wrapped), its measures other than seconds on another (seconds: latency_line)."""
    report = adapter_report(metrics)
    if report is None:
        return []
    lines = []
    if report.stages:
        how = f" ({report.decoding} decoding)" if report.decoding else ""
        lines += _wrapped(f"  funnel{how}: ", funnel_text(report).split(" > "), " > ")
    measures = [f"{m.label} {measure_text(m)}" for m in report.measures if m.unit != "s"]
    if measures:
        lines += _wrapped("  measures: ", measures, ", ")
    return lines


def metric_lines(metrics: dict[str, Any], keys: list[str] | None, digits: int = 2) -> list[str]:
    """The headline table (or `keys`): metric, value, 95% CI, what an empty prediction scores, unit, n."""
    rows = headline_rows(metrics, digits, keys)
    width = max([len(r.key) for r in rows] + [6])
    ci_width = max([len(r.ci_text) for r in rows if r.value is not None] + [6])
    out = [f"  {'metric':<{width}}  {'value':>8}  {'95% CI':<{ci_width}}  {'empty pred.':>11}  unit   {'n':>5}"]
    for r in rows:
        if r.value is None:
            out.append(f"  {r.key:<{width}}  {NA:>8}  ({r.why})")
            continue
        n = "" if r.n is None else str(r.n)
        base = "" if r.baseline is None else r.baseline_text
        out.append(f"  {r.key:<{width}}  {r.value_text:>8}  {r.ci_text:<{ci_width}}  {base:>11}  {r.unit:<5}  {n:>5}".rstrip())
    averaged, groups = averages_of(metrics), {}
    for r in rows:  # a protocol whose means are not over its samples: what the n column counts
        if r.key in averaged:
            groups.setdefault((averaged[r.key]["n"], averaged[r.key]["of"]), []).append(r.key)
    out += [f"  n of {', '.join(names)}: {count} {of}" for (count, of), names in groups.items()]
    return out


def breakdown_lines(metrics: dict[str, Any]) -> list[str]:
    """One line per breakdown value: `group=name (n=N): metric=value% ...` (scores as scores)."""
    lines = []
    seen: dict[tuple[str, str], list[str]] = {}
    for row in breakdown_rows(metrics, fraction_only=False):
        shown = f"{row.metric}={show(row.key, row.value, 2)}{'%' if metric_unit(metrics, row.key, row.value) == '%' else ''}"
        seen.setdefault((row.group, row.name), []).append(shown)
    counts = {(g, name): vals.get("n") for g, rows in (metrics.get("breakdown") or {}).items() for name, vals in (rows or {}).items()
              if isinstance(vals, dict)}
    for (group, name), shown in seen.items():
        n = counts.get((group, name))
        lines.append(f"  {group}={name}{f' (n={n})' if n is not None else ''}: {'  '.join(shown)}")
    return lines


def format_summary(result: Any, verbose: bool = False) -> str:
    """The run summary for the terminal of `result` (a rvt_bench.harness.runner.RunResult, or anything with
    its `metrics` and `scoring_s`): header, the model's funnel and measures, latency, failures,
    judge, the headline table, warnings, the paste-ready markdown results table and where the rest
    is. verbose: every metric in the table and every breakdown value too (run.verbose=true)."""
    m = result.metrics
    if m is None:
        return "scoring skipped: predictions missing (shards still running?)"
    if submission_of(m) is not None:
        return submission_summary(result)
    n, excluded, failures = sample_counts(m)
    lines = [f"{m['dataset']} ({m['split']}) / {m['model']}  run {m['run_name']}  "
             f"n={n}" + (f" excluded={excluded}" if excluded else "") + f" failures={failures} parse_rate="
             + (NA if m["parse_rate"] is None else f"{100 * m['parse_rate']:.1f}%")]
    if m.get("variant"):
        lines.append(f"  protocol variant: {m['variant']} (the headline is this variant's number, not the one the "
                     "reference prints; the reference's stands beside it)")
    if excluded:
        why = "; ".join(f"{k} {v}" for k, v in (m.get("excluded") or {}).items())
        named = " (named in metrics.json 'excluded_samples')" if m.get("excluded_samples") else ""
        lines.append(f"  excluded by the protocol's rule from the headline (not in n): {why}{named}")
    lines.append("  tasks: " + ", ".join(f"{t}={n}" for t, n in (m.get("tasks") or {}).items()))
    lines += sandbox_lines(getattr(result, "sandbox", ""))
    lines += model_lines(m)
    lines += latency_line(m, result.scoring_s, getattr(result, "prediction", None), getattr(result, "predicted", None))
    if m.get("failures"):
        kinds = ", ".join(f"{k} {v}" for k, v in (m.get("failures_by_kind") or {}).items())
        lines.append(f"  failures by kind: {kinds} (reasons in metrics.json 'failed_samples'; "
                     f"pictures: rvt-bench visualize <run dir> --worst 10)")
    if m.get("data_errors"):
        lines.append(f"  DATA ERRORS: {m['data_errors']} samples could not be loaded and are not in n "
                     f"(listed in metrics.json 'data_error_samples')")
    judge = m.get("judge") or {}
    if "n" in judge:
        lines.append(f"  {judge['status']}: n={judge['n']} failed={judge['n_failed']} "
                     f"failure_rate={100 * judge['failure_rate']:.1f}% (max {100 * judge['max_failure_rate']:.1f}%)")
    elif judge:
        lines.append(f"  {judge['status']}")
    values = m.get("metrics") or {}
    # both numbers of a run whose protocol has a variant: the headline's, then the other rule's
    lines += metric_lines(m, list(values) if verbose else [r.key for r in headline_rows(m)] + companion_keys(m))
    warnings = list(m.get("warnings") or [])
    shown = warnings if verbose else warnings[:MAX_WARNINGS]
    lines += [f"  WARNING: {w}" for w in shown]
    if len(shown) < len(warnings):
        lines.append(f"  ... {len(warnings) - len(shown)} more warnings in metrics.json 'warnings'")
    if verbose:
        lines += breakdown_lines(m)
    # the paste-ready results table: the benchmark's paper layout where it has one
    board = getattr(result, "leaderboard", None)
    lines += ["", paste_table(m, Path(board).parent if board is not None else getattr(result, "board_dir", None))]
    if not verbose:
        headline = {r.key for r in headline_rows(m)}
        others = len([k for k in values if k not in headline])
        n_break = len({(r.group, r.name) for r in breakdown_rows(m, fraction_only=False)})
        lines.append(f"more: {others} other metrics and {n_break} breakdown values in report.html and metrics.json "
                     f"(run.verbose=true prints them here)")
    return "\n".join(lines)


def submission_summary(result: Any) -> str:
    """The end of a run without GT (rvt_bench.core.records.submission_of): what it produced and the
    command that zips it for the benchmark's server; no metrics, funnel or paper table."""
    m = result.metrics
    block = submission_of(m) or {}
    _, excluded, failures = sample_counts(m)
    run_dir = getattr(result, "run_dir", None)
    command = str(block.get("command", ""))
    if run_dir is not None:
        command = command.replace("RUN_DIR", str(run_dir))
    server = block.get("server") or _configured_server(run_dir)
    lines = [f"{m['dataset']} ({m['split']}) / {m['model']}  run {m['run_name']}  no public GT: nothing is scored "
             "here, the benchmark's server scores the predictions",
             f"  produced: predictions of {excluded} samples" + (f" ({failures} failed: reasons in metrics.json "
                                                                 "'failed_samples')" if failures else "")
             + (f" in {run_dir}" if run_dir is not None else "")]
    lines += sandbox_lines(getattr(result, "sandbox", ""))
    lines += latency_line(m, result.scoring_s, getattr(result, "prediction", None), getattr(result, "predicted", None))
    if m.get("data_errors"):
        lines.append(f"  DATA ERRORS: {m['data_errors']} samples could not be loaded and have no prediction "
                     f"(listed in metrics.json 'data_error_samples')")
    lines.append(f"next: {command}" + (f"\n  then upload submission.zip to {server}" if server else ""))
    return "\n".join(lines)


def _configured_server(run_dir: Any) -> str | None:
    """dataset.submission.server of a run's config.yaml, None when it names none or cannot be read."""
    if run_dir is None:
        return None
    try:
        from rvt_bench.harness.names import load_run_config

        cfg = load_run_config(Path(run_dir) / "config.yaml")
        return str(cfg.dataset.submission.server)
    except Exception:  # noqa: BLE001  the command is the answer; the server is a courtesy
        return None


def paste_table(metrics: dict[str, Any], board_dir: str | Path | None = None) -> str:
    """The table to paste into a paper: the run in its benchmark's published layout
    (rvt_bench.leaderboards.tables, e.g. VISA's for ReVOS), else `results_table`; under a layout,
    the `rvt-bench render` command that prints it in LaTeX, with `--dir board_dir` when the run's
    leaderboard folder (leaderboard.dir) is not render's default (None: not known, left out)."""
    from rvt_bench.leaderboards.tables import has_layout, paper_table

    if has_layout(metrics.get("dataset")):
        return paper_table(metrics) + f"\n(LaTeX, with the published rows: {render_command(metrics['dataset'], board_dir)})"
    return results_table(metrics)


def render_command(dataset: str, board_dir: str | Path | None = None) -> str:
    """`rvt-bench render DATASET --format latex`, with `--dir board_dir` (shell-quoted) unless
    board_dir is None or the folder render reads by default (leaderboards/config.py)."""
    import shlex

    from rvt_bench.leaderboards.config import LeaderboardConfig

    command = f"rvt-bench render {shlex.quote(str(dataset))} --format latex"
    if board_dir is None or os.path.abspath(board_dir) == os.path.abspath(LeaderboardConfig.dir):
        return command
    return f"{command} --dir {shlex.quote(str(board_dir))}"
