"""Ref-SAV protocol, following bytedance/Sa2VA `tools/eval/eval_ref_sav.py` (9832e1a): per
expression J, F (davis2017's measures, metrics/units/video_jf.py) and A (R2VOS pixel accuracy)
averaged over every frame, each kept as round(100 * x, 2); per split (type_id 0 "long", 1 "short")
the mean of those rounded percentages, J&F = (J + F) / 2 of the means; overall = the mean of the two
splits' values. The reference's rules for a failed prediction and each option: docs/benchmarks/ref_sav.md.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Estimator, Found, stratum
from rvt_bench.metrics.masks import DAVIS_BOUND_TH
from rvt_bench.metrics.protocols.base import (Protocol, baseline_warnings, empty_gt_warnings, excluded_block, group_by,
                                             record_header)
from rvt_bench.metrics.protocols.revos import _anno_tracks, _gt_count, visa_percent
from rvt_bench.metrics.units.base import CORRECT_IOU
from rvt_bench.metrics.units.rle import predicted_masks
from rvt_bench.metrics.units.video_jf import empty_frame_jf, frame_crops, frame_jf, gt_mask_list, mean

log = logging.getLogger(__name__)

SPLITS = {0: "long", 1: "short"}  # eval_ref_sav.py: is_long = type_id == 0, is_short = type_id == 1
FAILED = ("reference", "zero")
SCORED, ZERO, DROPPED = "scored", "zero", "dropped"
FAILED_OUTCOMES = (DROPPED, ZERO)
METRICS = ("J", "F", "A")
WORKERS = 128  # eval_ref_sav.py's NUM_WOEKERS: each dropped expression ends one of its worker processes
ZERO_TAG = "[failed-zero]"
DROPPED_WHY = "dropped as eval_ref_sav.py drops it: its prediction is missing or unusable"
OTHER_TYPE_WHY = "a type_id other than 0 (long) and 1 (short): eval_ref_sav.py averages it in neither split"


@dataclass
class RefSAVValues(UnitValues):
    """One expression as eval_ref_sav.py scores it: type_id; J, F, A = means over frames (float64,
    unrounded fractions); jf ("J&F") = (J + F) / 2; frames = {"I", "U", "J", "F", "A"} per frame ({}
    when not scored); outcome = "scored" or "dropped" (failed: left out of every mean by the
    reference, 0 in the "[failed-zero]" ones; "zero" in records written before both were in one
    run); gt_empty = the GT is empty in every frame; baseline =
    {"J", "F", "A"} of an empty prediction."""

    kind = "ref_sav"
    type_id: int
    J: float
    F: float
    A: float
    jf: float = field(metadata={"key": "J&F"})
    frames: dict[str, list]
    outcome: str
    gt_empty: bool | None = None
    baseline: dict[str, float] | None = None

    def correct(self) -> bool | None:
        return None if self.outcome in FAILED_OUTCOMES else self.J > CORRECT_IOU

    def sample_score(self) -> float | None:
        return None if self.outcome in FAILED_OUTCOMES else self.jf


class RefSAVProtocol(Protocol):
    """J, F, A, J&F per split (long, short) and overall, as eval_ref_sav.py prints them.

    failed: "reference" (default): a failed prediction (missing from the results, too few frames, a
        mask of another size, a model's failure) is dropped from every mean with a warning naming it,
        as eval_ref_sav.py, whose worker process dies on it without a word; "zero" (corrected): it
        scores J = F = A = 0 (metric keys get "[failed-zero]"). Both numbers are in every run; this
        picks the headline's (`variant_label`).
    bound_th: F's boundary tolerance (fraction of the frame diagonal), davis2017's 0.008.
    Raises ValueError for an unknown `failed`.
    """

    name = "ref_sav"
    version = 1
    meta_keys = ("type_id",)
    group_names = {"type": {str(k): v for k, v in SPLITS.items()}}

    def __init__(self, failed: str = "reference", bound_th: float = DAVIS_BOUND_TH) -> None:
        if failed not in FAILED:
            raise ValueError(f"ref_sav protocol: failed must be one of {FAILED}, got {failed!r}")
        self.failed = failed
        self.bound_th = float(bound_th)
        self.headline = [self.key("J&F"), self.key("J"), self.key("F")]

    def key(self, metric: str) -> str:
        """The published name of `metric` under this protocol's options, e.g. "J&F[failed-zero]"."""
        return metric + (ZERO_TAG if self.failed == "zero" else "")

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        """Record: header + RefSAVValues. Raises DatasetFormatError when the sample has no int
        type_id or no GT masks; AdapterError when the prediction's frame count or mask size
        differs from the sample's."""
        type_id = sample.meta.get("type_id")
        if not isinstance(type_id, int) or isinstance(type_id, bool):
            raise DatasetFormatError(f"sample {sample.id!r}: Ref-SAV protocol needs an int meta['type_id'], got {type_id!r}")
        gt_masks = gt_mask_list(sample)
        failed = pred.error is not None
        pred_masks = [None] * sample.num_frames if failed else predicted_masks(sample, pred)
        tracks = _anno_tracks(sample)
        counts: dict[int, np.ndarray] = {}  # the reference's uint8 sum of the annos, where two meet

        def gt_crop(k: int, box: tuple[int, int, int, int]) -> np.ndarray | None:
            count = _gt_count(tracks, k, box)
            if count is None:
                return None
            counts[k] = count
            return count != 0

        frames: dict[str, list] = {"I": [], "U": [], "J": [], "F": [], "A": []}
        base: dict[str, list] = {"J": [], "F": [], "A": []}
        for crop in frame_crops(sample, gt_masks, pred_masks, gt_crop):
            row, empty = frame_jf(crop, self.bound_th), empty_frame_jf(crop)
            if crop is None:
                row["A"] = empty["A"] = 1.0
            else:
                gt_count = counts.pop(crop.index, None)
                gt_count = crop.gt.view(np.uint8) if gt_count is None else gt_count
                n = crop.shape[0] * crop.shape[1]
                # get_r2vos_accuracy: np.mean(gt_mask == pred_mask), the GT a uint8 sum (2 where two annos
                # overlap, never equal to a decoded 0/1 prediction)
                row["A"] = (n - int(np.count_nonzero(gt_count != crop.pred.view(np.uint8)))) / n
                empty["A"] = (n - int(np.count_nonzero(gt_count))) / n
            for key in frames:
                frames[key].append(row[key])
            for key in base:
                base[key].append(empty[key])
        record = record_header(sample, pred, self.meta_keys)
        record.meta["type_id"] = type_id
        baseline = {key: mean(base[key]) for key in base}
        gt_empty = all(m is None for m in gt_masks)
        if failed:  # the reference's outcome, whatever `failed` picks for the headline (aggregate has both)
            record.add(RefSAVValues(type_id, 0.0, 0.0, 0.0, 0.0, {}, DROPPED, gt_empty, baseline))
            return record
        j, f, a = mean(frames["J"]), mean(frames["F"]), mean(frames["A"])
        record.add(RefSAVValues(type_id, j, f, a, (j + f) / 2, frames, SCORED, gt_empty, baseline))
        return record

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        """Both numbers in one run: metrics "J&F", "J", "F", "A" (overall), "long/J", ..., "short/..."
        as eval_ref_sav.py prints them (a failed expression dropped) and the same keys with
        "[failed-zero]" (every failed expression 0), the headline's (`failed`) first; fractions in
        [0, 1] (the reference's percentages / 100). breakdown: "type" (every type_id, each its
        metrics under both rules and "n", the headline's). "n": the expressions the headline averages
        (type_id 0 or 1, not dropped under its rule); "excluded" / "excluded_samples"
        (base.excluded_block): the ones it leaves out, each with its reason (dropped as the reference
        drops it; a type_id in neither split); "dropped": ids of failed expressions the headline
        leaves out; "zeroed": ids it scores 0; "baseline_empty": the same metrics for an empty
        prediction on the same expressions; "warnings": one-line strings (dropped expressions by
        name, a split absent, an all-empty GT, a headline equal to the baseline)."""
        records = sorted(records, key=lambda r: r.sample_id)
        failed = [r.sample_id for r in records if _v(r).outcome in FAILED_OUTCOMES]
        groups = {"reference": [r for r in records if _v(r).outcome not in FAILED_OUTCOMES], "zero": records}
        kept = groups[self.failed]
        dropped = failed if self.failed == "reference" else []
        metrics, baseline, breakdown, warnings = {}, {}, {}, []
        for rule in (self.failed, *(r for r in groups if r != self.failed)):
            group = groups[rule]
            tag = ZERO_TAG if rule == "zero" else ""
            means, notes = self._overall(group, lambda v: {m: getattr(v, m) for m in METRICS}, tag)
            metrics.update(means)
            baseline.update(self._overall([r for r in group if _v(r).baseline is not None], lambda v: v.baseline, tag)[0])
            for type_id, members in group_by(group, "type_id").items():
                row = breakdown.setdefault(type_id, {})
                row.update(self._group(members, tag) if rule == self.failed else
                           {k: v for k, v in self._group(members, tag).items() if k != "n"})
            if rule == self.failed:
                warnings += notes
        if dropped:
            warnings.append(f"{len(dropped)} expression(s) dropped from every mean, as eval_ref_sav.py drops an expression "
                            f"whose prediction is missing or unusable (its worker process dies without a word; "
                            f"dataset.protocol.failed=zero scores them 0, its number is J&F{ZERO_TAG}): "
                            f"{', '.join(dropped)}")
            if len(dropped) >= WORKERS:
                warnings.append(f"{len(dropped)} dropped expressions: eval_ref_sav.py's {WORKERS} worker processes would "
                                "all have died and left later expressions unscored; its printed numbers are not "
                                "reproducible beyond this point")
        scored = [r for r in kept if _v(r).type_id in SPLITS]
        warnings += empty_gt_warnings([r.sample_id for r in scored if _v(r).gt_empty], len(scored), "expressions")
        warnings += baseline_warnings(metrics, baseline, [self.key("J&F")])
        for w in warnings:
            log.warning("Ref-SAV: %s", w)
        reasons = {i: DROPPED_WHY for i in dropped}
        reasons |= {r.sample_id: OTHER_TYPE_WHY for r in kept if _v(r).type_id not in SPLITS}
        return {"metrics": metrics, "n": len(scored), **excluded_block(reasons), "baseline_empty": baseline,
                "warnings": warnings, "breakdown": {"type": breakdown}, "dropped": dropped,
                "zeroed": [] if self.failed == "reference" else failed}

    def counting_failures(self) -> "RefSAVProtocol":
        return self if self.failed == "zero" else type(self)(failed="zero", bound_th=self.bound_th)

    def variant_label(self) -> str:
        return "failed=zero" if self.failed == "zero" else ""

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """Overall and per-split J&F, J, F, A: the mean over the splits (one stratum each) of the mean
        over the split's kept expressions of the value the reference averages (its rounded
        percentage, as a fraction), so the point value is the reported one; a "[failed-zero]" key
        over every expression (a failed one 0)."""
        prefix, _, name = key.rpartition("/")
        splits = {v: (k,) for k, v in SPLITS.items()}
        if prefix and prefix not in splits:
            return f"no estimator for Ref-SAV metric {key!r}"
        zero = name.endswith(ZERO_TAG)
        metric = {m + (ZERO_TAG if zero else ""): m for m in ("J&F", *METRICS)}.get(name)
        if metric is None:
            return f"no estimator for Ref-SAV metric {key!r}"

        def value(r: ScoreRecord, m: str) -> float:
            return float(visa_percent(getattr(_v(r), m))) / 100

        def num(r: ScoreRecord) -> float:
            return (value(r, "J") + value(r, "F")) / 2 if metric == "J&F" else value(r, metric)

        chosen = splits[prefix] if prefix else tuple(SPLITS)
        kept = records if zero else [r for r in records if _v(r).outcome not in FAILED_OUTCOMES]
        strata = [stratum(g, num) for t in chosen if (g := [r for r in kept if _v(r).type_id == t])]
        return Estimator(key, strata) if strata else "no scored expressions"

    def _overall(self, records: list[ScoreRecord], values, tag: str) -> tuple[dict[str, float], list[str]]:
        per_split = {}
        for type_id, split in SPLITS.items():
            group = [values(_v(r)) for r in records if _v(r).type_id == type_id]
            if group:
                per_split[split] = _means(group)
        metrics: dict[str, float] = {}
        warnings = []
        if per_split:
            if len(per_split) < len(SPLITS):
                warnings.append(f"only {list(per_split)} expressions present: overall = that split alone "
                                "(eval_ref_sav.py prints NaN for the absent split and for overall)")
            # overall = (long + short) / 2, per metric, in the reference's percent
            overall = {k: sum(m[k] for m in per_split.values()) / len(per_split) for k in ("J&F", *METRICS)}
            for prefix, means in [("", overall), *((f"{s}/", m) for s, m in per_split.items())]:
                metrics.update({f"{prefix}{k}{tag}": means[k] / 100 for k in ("J&F", *METRICS)})
        return metrics, warnings

    def _group(self, group: list[ScoreRecord], tag: str) -> dict:
        means = _means([{m: getattr(_v(r), m) for m in METRICS} for r in group])
        return {**{k + tag: means[k] / 100 for k in ("J&F", *METRICS)}, "n": len(group)}


def _means(group: list[dict[str, float]]) -> dict[str, float]:
    """{"J", "F", "A", "J&F"} of one split in percent, as eval_ref_sav.py: np.array of the
    expressions' round(100 * x, 2) values, .mean(); J&F = (J + F) / 2 of the means."""
    out = {m: float(np.array([visa_percent(v[m]) for v in group]).mean()) for m in METRICS}
    out["J&F"] = (out["J"] + out["F"]) / 2
    return out


def _v(record: ScoreRecord) -> RefSAVValues:
    return record.of(RefSAVValues)
