"""Building blocks of the adapters' reports (Adapter.measures): seconds summed from the
predictions' timings, rates, means; each gives no Measure where nothing was measured."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from rvt_bench.adapters.base import ScoredSample
from rvt_bench.core.records import Measure

TOTAL = ("total", "total")
"""Prediction.timings["total"]: the wall seconds the harness timed around each predict call."""


def timings(item: ScoredSample) -> dict[str, Any]:
    """The seconds a prediction recorded: Prediction.timings, and, for a failure whose adapter kept
    them in its trace (trace["timings"]), those."""
    trace = item.prediction.trace
    kept = trace.get("timings") if isinstance(trace, dict) and isinstance(trace.get("timings"), dict) else {}
    return {**kept, **(item.prediction.timings or {})}


def latency(scored: Sequence[ScoredSample], keys: Iterable[tuple[str, str]]) -> list[Measure]:
    """Per (timing key, label): Measure("<label>_s", label, seconds summed over the predictions that
    recorded the key, "s"); no Measure for a key no prediction recorded (never a 0 that was not
    measured)."""
    out = []
    for key, label in keys:
        values = [float(t[key]) for t in map(timings, scored) if isinstance(t.get(key), (int, float))]
        if values:
            out.append(Measure(f"{label}_s", label, round(sum(values), 3), "s"))
    return out


def rate(key: str, label: str, num: int, den: int) -> list[Measure]:
    """[Measure(key, label, num / den, "fraction")] rounded to 4 digits, [] when den is 0."""
    return [Measure(key, label, round(num / den, 4), "fraction")] if den else []


def mean(key: str, label: str, values: Sequence[float], unit: str = "") -> list[Measure]:
    """[Measure(key, label, mean of values rounded to 3 digits, unit)], [] for no values."""
    return [Measure(key, label, round(sum(values) / len(values), 3), unit)] if values else []


def no_target(scored: Sequence[ScoredSample]) -> list[Measure]:
    """The share of predictions whose answer is "no target" (Prediction.no_target), among those
    that did not fail; nothing when no prediction said it."""
    answered = [item.prediction for item in scored if item.prediction.error is None]
    said = sum(1 for p in answered if p.no_target)
    return rate("no_target", "answered no target", said, len(answered)) if said else []
