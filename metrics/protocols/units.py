"""A protocol composed of metric units (metrics/units/) from config: per sample the units' values
in one record, per run their aggregates, breakdowns, empty-prediction baseline and warnings. With
CompositeProtocol routing samples by task to one of these per task, an RVTBench / JiTBench-style
benchmark is YAML only (conf/dataset/rvtbench.yaml)."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.estimators import Found
from rvt_bench.metrics.protocols.base import Protocol, baseline_warnings, empty_gt_warnings, group_by, record_header
from rvt_bench.metrics.units.base import Unit

log = logging.getLogger(__name__)


def _build(spec: Any) -> Unit:
    if hasattr(spec, "score") and hasattr(spec, "aggregate"):
        return spec
    if isinstance(spec, Mapping) or hasattr(spec, "_target_"):  # a config not yet instantiated
        from hydra.utils import instantiate

        return instantiate(spec)
    raise TypeError(f"unit protocol: expected a rvt_bench.metrics.units Unit or a config with _target_, got {type(spec).__name__}")


class UnitProtocol(Protocol):
    """Scores every sample with each unit; metrics are the units' aggregates, merged in order.

    units:     rvt_bench.metrics.units.Unit objects or their Hydra configs ({"_target_": ..., **options}).
    name:      the protocol's name (records and metrics.json say it), e.g. "segmentation".
    headline:  metric keys for the leaderboard, best first; default: the first unit's first key
               (known after the first aggregate; set it in config to have it before).
    meta_keys: sample.meta keys copied to records and broken down by (default: level, category).
    what:      what the samples are called in warnings (default: "<name> samples").
    baseline_keys: the metric keys whose equality with the empty-prediction baseline is warned
               about (default: the headline).
    empty_breakdowns: True keeps a meta key no record has in the breakdown, as {} (ReasonSeg's
               metrics.json); False (default) leaves it out.
    aggregate(records) -> {"metrics", "breakdown": {meta key: {value: {metric: value, "n"}}}, "n",
    "baseline_empty", "warnings"}; records are sorted by sample_id first, so the result does not
    depend on their order. Empty records -> no metrics.
    estimator(key, records): the estimator of the first unit that has a metric `key`.
    """

    def __init__(self, units: Sequence[Any], name: str = "units", headline: Sequence[str] | None = None,
                 meta_keys: Sequence[str] = ("level", "category"), what: str | None = None,
                 baseline_keys: Sequence[str] | None = None, empty_breakdowns: bool = False) -> None:
        if not units:
            raise ValueError("unit protocol: no units given")
        self.units: list[Unit] = [_build(u) for u in units]
        self.name = str(name)
        self.headline = list(headline) if headline is not None else []
        self.meta_keys = tuple(meta_keys)
        self.what = what or f"{self.name} samples"
        self.baseline_keys = None if baseline_keys is None else list(baseline_keys)
        self.empty_breakdowns = bool(empty_breakdowns)

    def attach_judge(self, judge: Any) -> None:
        """Give the judge to every unit (only a judge unit uses it)."""
        self.judge = judge
        for unit in self.units:
            unit.attach_judge(judge)

    def judge_records(self, records: list[ScoreRecord]) -> None:
        for unit in self.units:
            unit.judge_records(records)

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        """Record: header (base.record_header) + every unit's typed values (ScoreRecord.add).
        Raises what the units raise (DatasetFormatError, AdapterError)."""
        record = record_header(sample, pred, self.meta_keys)
        for unit in self.units:
            record.add(unit.score(sample, pred))
        return record

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        if not records:
            return f"no {self.what}"
        for unit in self.units:
            found = unit.estimator(key, records)
            if found is not None:
                return found
        return f"no per-sample estimator for {key!r}"

    def metrics_of(self, records: list[ScoreRecord]) -> dict:
        """The units' aggregates over `records`, merged in unit order."""
        out: dict = {}
        for unit in self.units:
            out.update(unit.aggregate(records))
        return out

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        records = sorted(records, key=lambda r: r.sample_id)
        if not records:
            return {"metrics": {}, "breakdown": {k: {} for k in self.meta_keys} if self.empty_breakdowns else {},
                    "n": 0, "baseline_empty": {}, "warnings": []}
        metrics = self.metrics_of(records)
        if not self.headline:
            self.headline = list(metrics)[:1]
        breakdown = {}
        for key in self.meta_keys:
            groups = group_by(records, key)
            if groups or self.empty_breakdowns:
                breakdown[key] = {value: {**self.metrics_of(group), "n": len(group)} for value, group in groups.items()}
        baseline: dict = {}
        for unit in self.units:
            baseline.update(unit.baseline(records))
        warnings = self._empty_gt_warnings(records)
        warnings += [w for unit in self.units for w in unit.warnings(records)]
        warnings += baseline_warnings(metrics, baseline, self.headline if self.baseline_keys is None else self.baseline_keys)
        for w in warnings:
            log.warning("%s: %s", self.name, w)
        return {"metrics": metrics, "breakdown": breakdown, "n": len(records), "baseline_empty": baseline,
                "warnings": warnings}

    def _empty_gt_warnings(self, records: list[ScoreRecord]) -> list[str]:
        # a sample's GT is empty when every unit that can tell says so; no warning at all when none can
        flags = [[f for f in (unit.gt_empty(r) for unit in self.units) if f is not None] for r in records]
        if not any(flags):
            return []
        return empty_gt_warnings([r.sample_id for r, row in zip(records, flags) if row and all(row)], len(records),
                                 self.what)
