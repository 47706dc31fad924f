"""What a person reads after a run: the terminal summary and the markdown results table.

Files (metrics.json, leaderboard CSVs) hold fractions in [0, 1]; everything printed here is in
percent and says so ("%" in the value or the column head). A value that does not exist is printed
"n/a" with its reason (metrics.json "unavailable").
"""
from __future__ import annotations

from typing import Any

from rvt_bench.core.units import NA, SCORE_METRICS, ci_text, pct, show, unit  # noqa: F401  (re-exported)
from rvt_bench.harness.funnel import summary_lines as funnel_lines

def results_table(metrics: dict[str, Any], keys: list[str] | None = None, digits: int = 1) -> str:
    """Markdown table `| benchmark | metric | value | 95% CI | unit | n |` of a metrics.json body
    (unit "%": the value x100; "score": as stored, e.g. CIDEr; "count").

    keys: the metrics shown (default: the protocol's headline metrics). n: samples behind the value
    (the interval's n; the run's n for an unprefixed metric without an interval; else n/a).
    """
    values = metrics.get("metrics") or {}
    headline = [k for k in metrics.get("headline") or [] if k in values]
    keys = keys if keys is not None else (headline or list(values))
    cis = metrics.get("ci") or {}
    bench = f"{metrics.get('dataset')} ({metrics.get('split')})" if metrics.get("split") else str(metrics.get("dataset"))
    lines = ["| benchmark | metric | value | 95% CI | unit | n |", "|---|---|---:|---|---|---:|"]
    for key in keys:
        value = values.get(key)
        n = (cis.get(key) or {}).get("n", metrics.get("n") if "/" not in key else NA)
        u = "count" if isinstance(value, int) and not isinstance(value, bool) else unit(key)
        lines.append(f"| {bench} | {key} | {show(key, value, digits)} | {ci_text(cis.get(key), digits, key)} | {u} | {n} |")
    return "\n".join(lines)


def _flat(prefix: str, node: Any) -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [kv for k, v in node.items() for kv in _flat(f"{prefix}.{k}" if prefix else str(k), v)]
    return [(prefix, node)]


def _extra_blocks(m: dict[str, Any]) -> list[str]:
    """Warnings other parts of the harness add to metrics.json (metrics/protocols), printed as they are."""
    lines: list[str] = []
    for w in m.get("warnings") or []:
        lines.append(f"  WARNING: {w}")
    return lines


def latency_line(metrics: dict[str, Any], scoring_s: float | None) -> list[str]:
    """The summary's latency line, seconds summed over samples: generation, perception, code, total
    (metrics.json analytics.latency_s) and this scoring's wall time (manifest.json "scoring"; it is
    not in metrics.json, which a re-scoring must reproduce byte for byte)."""
    latency = dict((metrics.get("analytics") or {}).get("latency_s") or {})
    if scoring_s is not None:
        latency["scoring"] = round(float(scoring_s), 3)
    shown = [f"{k} {v:.3f}" for k, v in latency.items() if isinstance(v, (int, float))]
    return [f"  latency (s): {', '.join(shown)}"] if shown else []


def sandbox_lines(sandbox: str | None) -> list[str]:
    """How model-written code ran (manifest.json "sandbox"): nothing for a model that runs none,
    one line for bubblewrap, a warning for a run that ran it unsandboxed."""
    if sandbox == "none":
        return ["  sandbox: none  WARNING: model-written code ran UNSANDBOXED as this user (isolation=none); "
                "these numbers are not from a contained run"]
    return [f"  sandbox: {sandbox}"] if sandbox else []


def format_summary(result: Any) -> str:
    """The run summary for the terminal of `result` (a rvt_bench.harness.runner.RunResult, or anything with
    its `metrics`, `scoring_s` and optionally `sandbox`): header, sandbox, failures, judge, every metric
    in percent with its 95% CI, breakdowns, and last the markdown results table."""
    m = result.metrics
    if m is None:
        return "scoring skipped: predictions missing (shards still running?)"
    lines = [f"{m['dataset']} ({m['split']}) / {m['model']}  run {m['run_name']}  "
             f"n={m['n']} failures={m['failures']} parse_rate="
             + (NA if m["parse_rate"] is None else f"{100 * m['parse_rate']:.1f}%")]
    lines.append("  tasks: " + ", ".join(f"{t}={n}" for t, n in (m.get("tasks") or {}).items()))
    lines += sandbox_lines(getattr(result, "sandbox", ""))
    lines += funnel_lines(m)  # decoding mode, stage funnel, rollout analytics (bench/harness/funnel.py), before the scores
    lines += latency_line(m, result.scoring_s)
    if m.get("failures"):
        lines.append(f"  failures by kind: {m['failures_by_kind']} (reasons in metrics.json 'failed_samples'; "
                     f"pictures: python -m rvt_bench.harness.visualize <run dir> --worst 10)")
    if m.get("data_errors"):
        lines.append(f"  DATA ERRORS: {m['data_errors']} samples could not be loaded and are not in n "
                     f"(listed in metrics.json 'data_error_samples')")
    judge = m.get("judge") or {}
    if "n" in judge:
        lines.append(f"  {judge['status']}: n={judge['n']} failed={judge['n_failed']} "
                     f"failure_rate={100 * judge['failure_rate']:.1f}% (max {100 * judge['max_failure_rate']:.1f}%)")
    elif judge:
        lines.append(f"  {judge['status']}")
    values, cis, why = m["metrics"], m.get("ci") or {}, m.get("unavailable") or {}
    baseline = m.get("baseline_empty") or {}
    width = max((len(k) for k in values), default=8)
    lines.append(f"  {'metric':<{width}}  {'value':>9}  unit   95% CI")
    for key, value in values.items():
        if value is None:
            lines.append(f"  {key:<{width}}  {NA:>9}  ({why.get(key, 'no value')})")
        else:
            u = "count" if isinstance(value, int) and not isinstance(value, bool) else unit(key)
            ci = ci_text(cis[key], 2, key) if key in cis else ""
            base = baseline.get(key)  # what empty predictions score here (metrics/protocols: baseline_empty)
            shown_base = "" if not isinstance(base, (int, float)) else \
                f"   (empty prediction: {100 * base:6.2f})" if u == "%" else f"   (empty prediction: {show(key, base, 2)})"
            lines.append(f"  {key:<{width}}  {show(key, value, 2):>9}  {u:<5}  {ci}".rstrip() + shown_base)
    for group, rows in (m.get("breakdown") or {}).items():
        for name, vals in rows.items():
            if isinstance(vals, dict):
                shown = "  ".join(f"{k}={show(k, v, 2)}{'%' if unit(k) == '%' else ''}" for k, v in vals.items()
                                  if isinstance(v, float) and k != "n" and not k.endswith("_n"))
                n = vals.get("n")
                lines.append(f"  {group}={name}{f' (n={n})' if n is not None else ''}: {shown}")
    lines += _extra_blocks(m)
    lines += ["", results_table(m)]
    return "\n".join(lines)
