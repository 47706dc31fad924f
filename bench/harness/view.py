"""What a reader sees of a scored run's metrics.json, as display-ready rows: the headline table
(value, 95% CI, empty-prediction baseline, unit, n), the model's own report (AdapterReport: funnel
stages and measures) and the breakdowns. The terminal summary, report.html and the experiment
loggers all render these rows, so a number reads the same everywhere: fractions in percent with
"%", unbounded scores (CIDEr) as scores, counts as integers, missing values as "n/a".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rvt_bench.core.records import AdapterReport, Measure, headline_n, report_from_v2
from rvt_bench.core.units import NA, ci_text, show, unit
from rvt_bench.leaderboards.tables import companion_keys  # noqa: F401  (re-exported for the summary)


@dataclass(frozen=True)
class HeadlineRow:
    """One headline metric. value, low, high, baseline: as stored (fractions in [0, 1], scores as
    they are), None when missing; text fields: as shown, in `unit` ("%", "score", "count")."""

    key: str
    value: float | None
    low: float | None
    high: float | None
    baseline: float | None
    unit: str
    n: int | None
    value_text: str
    ci_text: str
    baseline_text: str
    why: str  # why the value is missing ("" when it is not)
    resampled: str = ""  # what the interval's bootstrap resampled (metrics.json ci "resampled"), "" when none


def resampling_groups(rows: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """(key, how it was resampled) pairs -> one (keys, how) group per method, in first-seen order;
    pairs with no method ("") are left out. The terminal (compare's "Resampled" lines) and the
    pages (report.html, compare --html: one list item per group) name each metric with its method
    from these groups."""
    found: dict[str, list[str]] = {}
    for key, how in rows:
        if how and key not in found.get(how, []):
            found.setdefault(how, []).append(key)
    return [(keys, how) for how, keys in found.items()]


def metric_unit(metrics: dict[str, Any], key: str, value: Any = None) -> str:
    """"%" (a fraction, shown x100), "score" (CIDEr) or "count" (an integer), from metrics.json
    "metric_units" when it names the key, else from the key (rvt_bench.core.units.unit)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return "count"
    given = (metrics.get("metric_units") or {}).get(key)
    if given in ("fraction", "score"):
        return "%" if given == "fraction" else "score"
    return unit(key)


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def headline_rows(metrics: dict[str, Any], digits: int = 1, keys: list[str] | None = None) -> list[HeadlineRow]:
    """The rows of the headline table (keys: default the protocol's headline metrics present in
    metrics.json, else every metric)."""
    values = metrics.get("metrics") or {}
    if keys is None:
        keys = [k for k in metrics.get("headline") or [] if k in values] or list(values)
    cis, base, why = metrics.get("ci") or {}, metrics.get("baseline_empty") or {}, metrics.get("unavailable") or {}
    averaged = averages_of(metrics)
    rows = []
    for key in keys:
        value, ci = values.get(key), cis.get(key) or {}
        u = metric_unit(metrics, key, value)
        n = ci.get("n", headline_n(metrics) if "/" not in key and "n" in metrics else None)
        if key in averaged:  # the protocol's means are over something else than its samples (they say what)
            n = averaged[key]["n"]
        b = _number(base.get(key))
        rows.append(HeadlineRow(
            key=key, value=_number(value), low=_number(ci.get("low")), high=_number(ci.get("high")), baseline=b,
            unit=u, n=n if isinstance(n, int) else None, value_text=show(key, value, digits),
            ci_text=ci_text(ci, digits, key), baseline_text=NA if b is None else show(key, b, digits),
            why="" if value is not None else str(why.get(key) or ci.get("reason") or "no value"),
            resampled=str(ci.get("resampled") or "")))
    return rows


def averages_of(metrics: dict[str, Any]) -> dict[str, Any]:
    """{metric key: {"n", "of"}} for the metrics a protocol says are means over something other than
    its scored samples (metrics.json "averages": {"metrics", "n", "of"}; ReferFormer's Ref-DAVIS17:
    GT objects per annotator set); {} when it says nothing."""
    found = metrics.get("averages")
    if not isinstance(found, dict) or not isinstance(found.get("n"), int) or not isinstance(found.get("metrics"), list):
        return {}
    return {str(k): {"n": found["n"], "of": str(found.get("of") or "")} for k in found["metrics"]}


def adapter_report(metrics: dict[str, Any]) -> AdapterReport | None:
    """The model's report in metrics.json: its "adapter_report" block, or, for a file written
    before adapters reported themselves (schema 2), the one RunMetrics reads from its DT-R1
    "funnel" / "analytics" / "decoding" blocks (rvt_bench.core.records.report_from_v2). None when
    the run has neither."""
    if isinstance(metrics.get("adapter_report"), dict):
        return AdapterReport.from_json(metrics["adapter_report"])
    return report_from_v2(metrics)


def measure_text(measure: Measure, digits: int = 1) -> str:
    """A measure's value with its unit: fraction -> "40.0 %", "s" -> "214.3 s", "rounds" ->
    "1.0 rounds", "count" -> "3" (a mean count, e.g. objects per sample: "0.6"); text as it is."""
    v = measure.value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if not math.isfinite(v):
        return NA
    if measure.unit == "fraction":
        return f"{100 * v:.{digits}f} %"
    if measure.unit == "count":
        return str(int(v)) if float(v).is_integer() else f"{v:.{digits}f}"
    text = str(v) if isinstance(v, int) else f"{v:.{digits}f}"
    return f"{text} {measure.unit}" if measure.unit else text


def funnel_text(report: AdapterReport) -> str:
    """The funnel on one line: "plan emitted 10 > DAG valid 10 > ... > result correct 3 (30.0 %)"."""
    n = report.n or 0
    steps = [f"{s.label} {s.reached}" for s in report.stages]
    last = report.stages[-1].reached if report.stages else 0
    share = f" ({100 * last / n:.1f} % of {n})" if n and report.stages else ""
    return " > ".join(steps) + share


@dataclass(frozen=True)
class BreakdownRow:
    """One value of one breakdown: group (e.g. "video/level"), name ("2"), metric ("J&F"), its value
    (as stored), n (samples), and the display key of the metric ("video/J&F")."""

    group: str
    name: str
    metric: str
    value: float
    n: int | None
    key: str


def breakdown_rows(metrics: dict[str, Any], fraction_only: bool = True) -> list[BreakdownRow]:
    """Every numeric value of metrics.json "breakdown" (its order), one row per (group, value, metric);
    fraction_only: leave out scores (CIDEr) and counts."""
    rows = []
    for group, values in (metrics.get("breakdown") or {}).items():
        part = group.rpartition("/")[0]
        for name, vals in (values or {}).items():
            if not isinstance(vals, dict):
                continue
            for metric, value in vals.items():
                key = f"{part}/{metric}" if part else metric
                if _number(value) is None or metric == "n" or metric.endswith("_n") or isinstance(value, bool):
                    continue
                if fraction_only and metric_unit(metrics, key, value) != "%":
                    continue
                n = vals.get("n")
                rows.append(BreakdownRow(group, str(name), metric, float(value), n if isinstance(n, int) else None, key))
    return rows
