"""The bars of report.html's breakdown chart: per breakdown value (level, category, type...) the
part's first headline metric that the breakdown holds, its 95% bootstrap CI and what an empty
prediction scores on the same samples.

The value is metrics.json's own. Its interval comes from the estimator the protocol declares for
the metric (`Protocol.estimator`) over the group's records, drawn only when the estimator
reproduces the value (as bootstrap.headline_cis requires of headline intervals). The baseline is
the protocol's own empty-prediction aggregate over the group when that aggregate reproduces the
value; None otherwise. Groups of one value (they repeat the overall number) are left out.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from rvt_bench.core.records import ScoreRecord
from rvt_bench.harness import bootstrap
from rvt_bench.harness.view import metric_unit

TOLERANCE = 1e-6


@dataclass(frozen=True)
class Bar:
    """One breakdown value: label ("video · level 2"), metric key ("video/J&F"), value, low, high,
    baseline (fractions, None when not known), n (samples)."""

    label: str
    key: str
    value: float
    low: float | None
    high: float | None
    baseline: float | None
    n: int | None


def _part(protocol: Any, path: list[str], records: list[ScoreRecord]) -> tuple[Any, list[ScoreRecord]] | None:
    """The protocol part at `path` (["rvt", "grounding"]) and its records; None when it has no such part."""
    for name in path:
        parts = getattr(protocol, "parts", None)
        if not isinstance(parts, dict) or name not in parts:
            return None
        records = [r for r in records if protocol.part_of_record(r) == name]
        protocol = parts[name]
    return protocol, records


def _quiet_aggregate(protocol: Any, records: list[ScoreRecord]) -> dict:
    # the run already logged the protocol's warnings; a group's aggregate would repeat them
    logger = logging.getLogger("rvt_bench.metrics")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return protocol.aggregate(records)
    finally:
        logger.setLevel(level)


def _close(a: Any, b: float) -> bool:
    return isinstance(a, (int, float)) and abs(float(a) - b) <= TOLERANCE


def breakdown_bars(metrics: dict[str, Any], protocol: Any | None, records: list[ScoreRecord],
                   b: int = bootstrap.DEFAULT_B, seed: int = bootstrap.DEFAULT_SEED) -> list[Bar]:
    """The bars of every breakdown group with at least two values (metrics.json order). protocol:
    the run's protocol (None: values only, no intervals or baselines); records: scores.jsonl."""
    from rvt_bench.metrics.protocols.base import group_key

    headline = [k for k in metrics.get("headline") or []]
    bars: list[Bar] = []
    for group, values in (metrics.get("breakdown") or {}).items():
        rows = {name: v for name, v in (values or {}).items() if isinstance(v, dict)}
        if len(rows) < 2:
            continue
        prefix, _, meta_key = group.rpartition("/")
        path = prefix.split("/") if prefix else []
        # the part's first headline metric that every value of the group has, a fraction
        metric = next((k.rpartition("/")[2] for k in headline if k.rpartition("/")[0] == prefix
                       and metric_unit(metrics, k) == "%"
                       and all(isinstance(v.get(k.rpartition("/")[2]), (int, float)) for v in rows.values())), None)
        if metric is None:
            continue
        part = _part(protocol, path, records) if protocol is not None else None
        for name, vals in rows.items():
            value = float(vals[metric])
            low = high = base = None
            if part is not None:
                sub, own = part
                # ReVOS breaks "type" down by the records' meta "type_id"
                field = next((k for k in (meta_key, f"{meta_key}_id") if any(k in r.meta for r in own)), meta_key)
                group_records = [r for r in own if field in r.meta and group_key(r.meta[field]) == name]
                low, high, base = _interval_and_baseline(sub, metric, group_records, value, b, seed)
            named = (getattr(part[0], "group_names", None) or {}).get(meta_key, {}) if part is not None else {}
            shown = named.get(name) or f"{meta_key} {name}"  # the benchmark's name of the value, else the raw code
            label = f"{prefix.replace('/', ' · ')} · {shown}" if prefix else shown
            n = vals.get("n")
            bars.append(Bar(label, f"{prefix}/{metric}" if prefix else metric, value, low, high, base,
                            n if isinstance(n, int) else None))
    return bars


def _interval_and_baseline(protocol: Any, metric: str, records: list[ScoreRecord], value: float, b: int,
                           seed: int) -> tuple[float | None, float | None, float | None]:
    if not records:
        return None, None, None
    low = high = base = None
    est = protocol.estimator(metric, records)
    if not isinstance(est, str) and _close(est.value(), value) and b > 0:
        ci = bootstrap.confidence_interval(est, b, seed)
        low, high = ci["low"], ci["high"]
    try:
        agg = _quiet_aggregate(protocol, records)
    except Exception:  # noqa: BLE001  a protocol that cannot aggregate a group: no baseline for it, the bar stays
        agg = {}
    if _close((agg.get("metrics") or {}).get(metric), value):
        found = (agg.get("baseline_empty") or {}).get(metric)
        base = float(found) if isinstance(found, (int, float)) else None
    return low, high, base
