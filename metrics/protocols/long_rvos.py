"""Long-RVOS protocol, following iSEE-Laboratory/Long_RVOS (447682a) `eval/eval_long_rvos/`
(eval_static.py, eval_dynamic.py, eval_hybrid.py, eval_overall.py): per expression J and F
(davis2017's measures over every frame, metrics/units/video_jf.py), tIoU (frames where both masks
are nonempty / frames where either is) and vIoU (the J of those shared frames summed / the same
union); per type (static, dynamic, static+dynamic = hybrid) and overall (every expression of the
three types pooled) the means, J&F = (J + F) / 2 of the means; float64, no rounding. Missing
predictions and each option: docs/benchmarks/long_rvos.md.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.estimators import Estimator, Found, stratum
from rvt_bench.metrics.masks import DAVIS_BOUND_TH
from rvt_bench.metrics.protocols.base import (Protocol, baseline_warnings, empty_gt_warnings, excluded_block, group_by,
                                             record_header)
from rvt_bench.metrics.units.base import CORRECT_IOU
from rvt_bench.metrics.units.rle import predicted_masks
from rvt_bench.metrics.units.video_jf import empty_frame_jf, frame_crops, frame_jf, gt_mask_list, mean

log = logging.getLogger(__name__)

TYPES = {"static": "static", "dynamic": "dynamic", "static+dynamic": "hybrid"}  # its three scripts' filters
FAILED = ("reference", "zero")
SCORED, ZERO, DROPPED = "scored", "zero", "dropped"
METRICS = ("J", "F", "tIoU", "vIoU")
WORKERS = 32  # each script's NUM_WOEKERS: each dropped expression ends one of its worker processes
ZERO_TAG = "[failed-zero]"
DROPPED_WHY = ("dropped as eval_long_rvos drops it: its first frame's prediction PNG is missing, or its PNGs are "
               "unusable or differ in size")
OTHER_TYPE_WHY = "a type other than static, dynamic and static+dynamic: none of eval_long_rvos's scripts scores it"


def temporal_ious(gt_present: list[bool], pred_present: list[bool], js: list[float]) -> tuple[float, float]:
    """(tIoU, vIoU) of one expression as eval_long_rvos: over frames, inter = both masks nonempty,
    union = either; tIoU = |inter| / |union|, vIoU = sum of the per-frame J over inter / |union|;
    both 1 when no frame has a mask on either side."""
    gt, pred = np.asarray(gt_present, bool), np.asarray(pred_present, bool)
    inter = gt & pred
    union = int((gt | pred).sum())
    if union == 0:
        return 1.0, 1.0
    return float(inter.sum() / union), float(np.asarray(js, np.float64)[inter].sum() / union)


@dataclass
class LongRVOSValues(UnitValues):
    """One expression as eval_long_rvos scores it: type (as written); J, F = means over frames; tIoU,
    vIoU (temporal_ious); jf ("J&F") = (J + F) / 2; frames = {"I", "U", "J", "F"} per frame ({} when
    not scored); outcome "scored", "zero" (its video's folder is missing: 0 as the reference) or
    "dropped" (any other failure: left out of every mean, as the reference's dying worker leaves it;
    0 in the "[failed-zero]" means);
    gt_empty; baseline = the values of an empty prediction."""

    kind = "long_rvos"
    type: str
    J: float
    F: float
    tIoU: float
    vIoU: float
    jf: float = field(metadata={"key": "J&F"})
    frames: dict[str, list]
    outcome: str
    gt_empty: bool | None = None
    baseline: dict[str, float] | None = None

    def correct(self) -> bool | None:
        return None if self.outcome == DROPPED else self.J > CORRECT_IOU

    def sample_score(self) -> float | None:
        return None if self.outcome == DROPPED else self.jf


class LongRVOSProtocol(Protocol):
    """J, F, J&F, tIoU, vIoU per type (static, dynamic, hybrid) and overall, as eval_long_rvos prints.

    failed: "reference" (default): a failed prediction whose video folder is missing scores 0 on
        every metric; any other (the first frame's PNG missing, a PNG of another size, a model's
        failure) is dropped from the means with a warning naming it, as the reference's worker dies
        on it; "zero" (corrected): every failed expression scores 0 ("[failed-zero]" keys). Both
        numbers are in every run; this picks the headline's (`variant_label`).
    bound_th: F's boundary tolerance, davis2017's 0.008.
    Raises ValueError for an unknown `failed`.
    """

    name = "long_rvos"
    version = 1
    meta_keys = ("type",)

    def __init__(self, failed: str = "reference", bound_th: float = DAVIS_BOUND_TH) -> None:
        if failed not in FAILED:
            raise ValueError(f"long_rvos protocol: failed must be one of {FAILED}, got {failed!r}")
        self.failed, self.bound_th = failed, float(bound_th)
        self.headline = [self.key("J&F"), self.key("J"), self.key("F"), self.key("tIoU"), self.key("vIoU")]

    def key(self, metric: str) -> str:
        return metric + (ZERO_TAG if self.failed == "zero" else "")

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        """Record: header + LongRVOSValues. Raises AdapterError when the prediction's frame count or
        mask size differs from the sample's."""
        record = record_header(sample, pred, self.meta_keys)
        kind = str(sample.meta.get("type", ""))
        gt_masks = gt_mask_list(sample)
        failed = pred.error is not None
        pred_masks = [None] * len(gt_masks) if failed else predicted_masks(sample, pred)
        frames: dict[str, list] = {"I": [], "U": [], "J": [], "F": []}
        base: dict[str, list] = {"J": [], "F": []}
        for crop in frame_crops(sample, gt_masks, pred_masks):
            for k, v in frame_jf(crop, self.bound_th).items():
                frames[k].append(v)
            for k, v in empty_frame_jf(crop).items():
                if k in base:
                    base[k].append(v)
        gt_present = [m is not None for m in gt_masks]
        empty_t, empty_v = temporal_ious(gt_present, [False] * len(gt_masks), base["J"])
        baseline = {"J": mean(base["J"]), "F": mean(base["F"]), "tIoU": empty_t, "vIoU": empty_v}
        gt_empty = not any(gt_present)
        if failed:  # the reference's outcome, whatever `failed` picks for the headline (aggregate has both)
            outcome = ZERO if _video_missing(sample, pred) else DROPPED
            record.add(LongRVOSValues(kind, 0.0, 0.0, 0.0, 0.0, 0.0, {}, outcome, gt_empty, baseline))
            return record
        t, v = temporal_ious(gt_present, [m is not None for m in pred_masks], frames["J"])
        j, f = mean(frames["J"]), mean(frames["F"])
        record.add(LongRVOSValues(kind, j, f, t, v, (j + f) / 2, frames, SCORED, gt_empty, baseline))
        return record

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        """Both numbers in one run: metrics "J&F", "J", "F", "tIoU", "vIoU" (overall: the three types'
        expressions pooled) and "static/...", "dynamic/...", "hybrid/..." as eval_long_rvos prints them
        (a dropped expression left out) and the same keys with "[failed-zero]" (every failed one 0),
        the headline's (`failed`) first; fractions. breakdown "type": per type its means under both
        rules and "n" (the headline's). "n": the expressions the headline averages (of the three
        types, not dropped under its rule); "excluded" / "excluded_samples" (base.excluded_block): the
        others, each with its reason (dropped as the reference drops it; a type none of its scripts
        scores); "dropped", "zeroed": ids the headline leaves out / scores 0 for a failure;
        "baseline_empty"; "warnings"."""
        records = sorted(records, key=lambda r: r.sample_id)
        failed = [r.sample_id for r in records if _v(r).outcome == DROPPED]
        dropped = failed if self.failed == "reference" else []
        groups = {"reference": [r for r in records if _v(r).outcome != DROPPED and _v(r).type in TYPES],
                  "zero": [r for r in records if _v(r).type in TYPES]}
        kept = groups[self.failed]
        values = lambda v: {m: getattr(v, m) for m in METRICS}  # noqa: E731
        metrics, baseline, breakdown = {}, {}, {}
        for rule in (self.failed, *(r for r in groups if r != self.failed)):
            group, tag = groups[rule], ZERO_TAG if rule == "zero" else ""
            metrics.update(self._means(group, values, tag=tag))
            baseline.update(self._means([r for r in group if _v(r).baseline is not None], lambda v: v.baseline, tag=tag))
            for kind, members in group_by(group, "type").items():
                row = breakdown.setdefault(kind, {})
                row.update(self._means(members, values, False, tag))
                if rule == self.failed:
                    row["n"] = len(members)
        warnings = []
        if dropped:
            warnings.append(f"{len(dropped)} expression(s) dropped from every mean, as eval_long_rvos drops an "
                            f"expression whose first frame's PNG is missing or whose PNGs differ in size (its worker "
                            f"process dies without a word; dataset.protocol.failed=zero scores them 0, its number is "
                            f"J&F{ZERO_TAG}): {', '.join(dropped)}")
            if len(dropped) >= WORKERS:
                warnings.append(f"{len(dropped)} dropped expressions: a script's {WORKERS} worker processes may all "
                                "have died and left later expressions unscored; its printed numbers are not "
                                "reproducible beyond this point")
        warnings += empty_gt_warnings([r.sample_id for r in kept if _v(r).gt_empty], len(kept), "expressions")
        warnings += baseline_warnings(metrics, baseline, [self.key("J&F")])
        for w in warnings:
            log.warning("Long-RVOS: %s", w)
        reasons = {i: DROPPED_WHY for i in dropped}
        reasons |= {r.sample_id: OTHER_TYPE_WHY for r in records if _v(r).type not in TYPES and r.sample_id not in reasons}
        zeroed = [r.sample_id for r in records if _v(r).outcome == ZERO or (self.failed == "zero" and
                                                                            _v(r).outcome == DROPPED)]
        return {"metrics": metrics, "n": len(kept), **excluded_block(reasons), "baseline_empty": baseline,
                "warnings": warnings, "breakdown": {"type": breakdown}, "dropped": dropped, "zeroed": zeroed}

    def counting_failures(self) -> "LongRVOSProtocol":
        return self if self.failed == "zero" else type(self)(failed="zero", bound_th=self.bound_th)

    def variant_label(self) -> str:
        return "failed=zero" if self.failed == "zero" else ""

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """Overall and per-type metrics: the plain mean over the kept expressions of the type(s) (J&F
        per expression is (J + F) / 2, so its mean is the reported J&F); a "[failed-zero]" key over
        every expression of the type(s), a dropped one 0."""
        prefix, _, name = key.rpartition("/")
        names = {v: k for k, v in TYPES.items()}
        if prefix and prefix not in names:
            return f"no estimator for Long-RVOS metric {key!r}"
        zero = name.endswith(ZERO_TAG)
        metric = {m + (ZERO_TAG if zero else ""): m for m in (*METRICS, "J&F")}.get(name)
        if metric is None:
            return f"no estimator for Long-RVOS metric {key!r}"
        kinds = (names[prefix],) if prefix else tuple(TYPES)
        kept = [r for r in records if (zero or _v(r).outcome != DROPPED) and _v(r).type in kinds]
        if not kept:
            return "no scored expressions"
        attr = "jf" if metric == "J&F" else metric
        return Estimator(key, [stratum(kept, lambda r: float(getattr(_v(r), attr)))])

    def _means(self, records: list[ScoreRecord], values, per_type: bool = True, tag: str = "") -> dict[str, float]:
        """Overall (pooled) and, with per_type, per type: np.mean of each metric, J&F = (J + F) / 2;
        keys end with `tag`."""
        out: dict[str, float] = {}
        groups = [("", records)]
        if per_type:
            groups += [(f"{TYPES[t]}/", [r for r in records if _v(r).type == t]) for t in TYPES]
        for prefix, group in groups:
            if not group:
                continue
            rows = [values(_v(r)) for r in group]
            means = {m: float(np.mean([row[m] for row in rows])) for m in METRICS}
            means["J&F"] = (means["J"] + means["F"]) / 2
            out.update({f"{prefix}{m}{tag}": means[m] for m in ("J&F", *METRICS)})
        return out


def _v(record: ScoreRecord) -> LongRVOSValues:
    return record.of(LongRVOSValues)


def _video_missing(sample: Sample, pred: Prediction) -> bool:
    """Whether a failed prediction records that its video's folder is missing (the reader's and the
    precomputed adapter's trace "missing"): the reference scores such an expression 0."""
    missing = pred.trace.get("missing") if isinstance(pred.trace, dict) else None
    video = str(sample.meta.get("video", ""))
    return isinstance(missing, str) and bool(video) and (video == missing or video.startswith(missing + "/"))
