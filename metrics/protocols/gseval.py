"""GroundingSuite-Eval protocol, following hustvl/GroundingSuite `evaluate_grounding.py` (ff3ea30):
box mode: Accuracy@0.5 (box IoU >= the threshold) overall and per class_id; mask mode: gIoU (the
mean of per-sample mask IoUs) overall and per class_id; float64, no rounding (its saved JSON; the
console shows 4 decimals). Which samples enter which denominator, and each option:
docs/benchmarks/gseval.md.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from rvt_bench.core import masks
from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Found, mean_of
from rvt_bench.metrics.protocols.base import Protocol, excluded_block, group_by, record_header

log = logging.getLogger(__name__)

MODES = ("box", "mask")
FAILED = ("reference", "zero")
SCORED, WRONG, SKIPPED, ZERO = "scored", "no_box", "skipped", "zero"
ZERO_TAG = "[failed-zero]"
SKIPPED_WHY = "left out as evaluate_grounding.py leaves it out: no usable prediction"


def box_iou(box1: list[float], box2: list[float]) -> float:
    """evaluate_grounding.py `calculate_iou`, as written: [x1, y1, x2, y2] continuous coordinates, 0
    when the boxes do not meet (x_max < x_min or y_max < y_min) or the union is not positive; no
    clipping and no check that x2 > x1 (Python floats, its operation order)."""
    x_min = max(box1[0], box2[0])
    y_min = max(box1[1], box2[1])
    x_max = min(box1[2], box2[2])
    y_max = min(box1[3], box2[3])
    if x_max < x_min or y_max < y_min:
        return 0.0
    intersection = (x_max - x_min) * (y_max - y_min)
    area1 = (box1[2] - box1[0]) * (box1[3] - box1[1])
    area2 = (box2[2] - box2[0]) * (box2[3] - box2[1])
    union = area1 + area2 - intersection
    return intersection / union if union > 0 else 0.0


@dataclass
class GSEvalValues(UnitValues):
    """One sample as evaluate_grounding.py scores it: class_id; iou (box or mask IoU; None when not
    computed); outcome = "scored", "no_box" (box mode: the prediction's line has no box: counted
    wrong), "skipped" (no matching prediction, mask mode no segmentation or an undecodable one: in
    no mean, as the evaluator; IoU 0 in the "[failed-zero]" numbers), "zero" (IoU 0: records written
    with failed="zero" before both numbers were in one run); correct_at = IoU >= threshold
    (box mode)."""

    kind = "gseval"
    class_id: int | str
    iou: float | None
    outcome: str
    correct_at: bool | None = None

    def correct(self) -> bool | None:
        return None if self.outcome == SKIPPED else bool(self.correct_at) if self.correct_at is not None else (self.iou or 0) > 0.5

    def sample_score(self) -> float | None:
        return None if self.outcome == SKIPPED else float(self.iou or 0.0)


class GSEvalProtocol(Protocol):
    """evaluate_grounding.py's numbers.

    mode: "box" (the evaluator's default): "Acc@<t>" = correct / samples with a matching prediction
        line; per class "Acc@<t>" = correct / every GT sample of the class (the evaluator counts a
        class's samples before it looks for their prediction); "mask": "gIoU" = mean mask IoU over the
        samples scored (a pair with an empty union scores 0), per class likewise.
    iou_threshold: box mode's threshold (0.5; correct when IoU >= it).
    failed: "reference" (default): a sample without a usable prediction is left out as the evaluator
        leaves it out; "zero" (corrected): it scores IoU 0 and counts in every denominator (metric
        keys get "[failed-zero]"). Both numbers are in every run; this picks the headline's
        (`variant_label`).
    Raises ValueError for an unknown mode or failed.
    """

    name = "gseval"
    version = 1
    meta_keys = ("class_id",)

    def __init__(self, mode: str = "box", iou_threshold: float = 0.5, failed: str = "reference") -> None:
        if mode not in MODES:
            raise ValueError(f"gseval protocol: mode must be one of {MODES}, got {mode!r}")
        if failed not in FAILED:
            raise ValueError(f"gseval protocol: failed must be one of {FAILED}, got {failed!r}")
        self.mode, self.failed, self.iou_threshold = mode, failed, float(iou_threshold)
        self.metric = f"Acc@{self.iou_threshold:g}" if mode == "box" else "gIoU"
        self.headline = [self.key(self.metric)]

    def key(self, metric: str) -> str:
        return metric + (ZERO_TAG if self.failed == "zero" else "")

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        """Record: header + GSEvalValues. Raises DatasetFormatError when the sample lacks its GT box
        (box mode) or mask (mask mode); AdapterError when a predicted mask's size differs from the GT's
        (the evaluator stops there with numpy's broadcast error)."""
        record = record_header(sample, pred, self.meta_keys)
        class_id = sample.meta.get("class_id", 0)
        if pred.error is not None:  # the reference's outcome, whatever `failed` picks (aggregate has both)
            record.add(GSEvalValues(class_id, None, SKIPPED))
            return record
        if self.mode == "box":
            gt = (sample.target.boxes or [[]])[0]
            if not gt:
                raise DatasetFormatError(f"sample {sample.id!r}: GSEval box mode needs a GT box")
            boxes = (pred.boxes or [[]])[0]
            if not boxes:
                record.add(GSEvalValues(class_id, None, WRONG, False))
                return record
            iou = box_iou(gt[0], boxes[0])
            record.add(GSEvalValues(class_id, iou, SCORED, iou >= self.iou_threshold))
            return record
        gt_rle = (sample.target.masks or [None])[0]
        if gt_rle is None:
            raise DatasetFormatError(f"sample {sample.id!r}: GSEval mask mode needs a GT mask")
        pred_rle = (pred.masks or [None])[0]
        if pred_rle is None:  # a model's empty answer: an empty mask of the GT's size
            pred_rle = masks.encode(np.zeros(tuple(gt_rle["size"]), bool))
        if list(pred_rle["size"]) != list(gt_rle["size"]):
            raise AdapterError(f"sample {sample.id!r}: predicted mask {list(pred_rle['size'])} [H, W] differs from the GT's "
                               f"{list(gt_rle['size'])} (evaluate_grounding.py stops with a broadcast error)")
        inter, union = masks.intersection_union(gt_rle, pred_rle)  # the decoded masks' AND / OR sums
        record.add(GSEvalValues(class_id, inter / union if union > 0 else 0.0, SCORED))
        return record

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        """Both numbers in one run: metrics {metric: overall} as the evaluator computes it (a sample
        without a usable prediction left out) and {metric + "[failed-zero]": overall} (it counts,
        IoU 0), the headline's (`failed`) first, fractions; breakdown "class_id": per class both and
        "n" (the headline's class denominator). "n": the samples the headline's overall averages;
        "excluded" / "excluded_samples" (base.excluded_block): the ones it leaves out, with the
        reason; "skipped": their ids; "zeroed": ids scored 0 for a failure; "warnings"."""
        records = sorted(records, key=lambda r: r.sample_id)
        failed = [r.sample_id for r in records if _v(r).outcome == SKIPPED]
        skipped = failed if self.failed == "reference" else []
        groups = {"reference": [r for r in records if _v(r).outcome != SKIPPED], "zero": records}
        metrics: dict[str, float] = {}
        breakdown: dict[str, dict] = {}
        for rule in (self.failed, *(r for r in groups if r != self.failed)):
            kept, key = groups[rule], self.metric + (ZERO_TAG if rule == "zero" else "")
            headline = rule == self.failed
            if self.mode == "box":
                if kept:  # total_correct / len(results); 0 when there are none
                    metrics[key] = sum(_correct(r) for r in kept) / len(kept)
                for cls, group in group_by(records, "class_id").items():  # every GT sample of the class
                    row = breakdown.setdefault(cls, {})
                    row[key] = sum(_correct(r) for r in group) / len(group)
                    if headline:
                        row["n"] = len(group)
            else:
                if kept:
                    metrics[key] = _mean([_iou(r) for r in kept])
                for cls, group in group_by(kept, "class_id").items():
                    row = breakdown.setdefault(cls, {})
                    row[key] = _mean([_iou(r) for r in group])
                    if headline:
                        row["n"] = len(group)
        warnings = []
        if skipped:
            where = "its overall accuracy's denominator (they stay in their class's)" if self.mode == "box" else "every mean"
            warnings.append(f"{len(skipped)} sample(s) without a usable prediction left out of {where}, as "
                            f"evaluate_grounding.py leaves them out (dataset.protocol.failed=zero scores them 0, its "
                            f"number is {self.metric}{ZERO_TAG}): "
                            f"{', '.join(skipped[:20])}{' ...' if len(skipped) > 20 else ''}")
        for w in warnings:
            log.warning("GSEval: %s", w)
        zeroed = [r.sample_id for r in records if _v(r).outcome == ZERO] + ([] if self.failed == "reference" else failed)
        return {"metrics": metrics, "breakdown": {"class_id": breakdown}, "n": len(groups[self.failed]),
                **excluded_block({i: SKIPPED_WHY for i in skipped}), "warnings": warnings, "skipped": skipped,
                "zeroed": sorted(zeroed)}

    def counting_failures(self) -> "GSEvalProtocol":
        return self if self.failed == "zero" else type(self)(self.mode, self.iou_threshold, failed="zero")

    def variant_label(self) -> str:
        return "failed=zero" if self.failed == "zero" else ""

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """The overall metric: the plain mean over the kept samples of correct (box) or IoU (mask); the
        "[failed-zero]" one over every sample (one without a usable prediction 0)."""
        if key not in (self.metric, self.metric + ZERO_TAG):
            return f"no estimator for GSEval metric {key!r}"
        kept = records if key.endswith(ZERO_TAG) else [r for r in records if _v(r).outcome != SKIPPED]
        if not kept:
            return "no scored samples"
        if self.mode == "box":
            return mean_of(key, kept, lambda r: float(_correct(r)))
        return mean_of(key, kept, _iou)


def _mean(values: list) -> float:
    """sum(values) / len(values), Python floats in order, as the evaluator."""
    return sum(float(v) for v in values) / len(values)


def _correct(record: ScoreRecord) -> bool:
    """Box mode: whether the sample counts as correct (a skipped one never does)."""
    return _v(record).outcome != SKIPPED and bool(_v(record).correct_at)


def _iou(record: ScoreRecord) -> float:
    """Mask mode: the sample's IoU (0 for a skipped one, as the "[failed-zero]" numbers count it)."""
    return 0.0 if _v(record).outcome == SKIPPED else float(_v(record).iou or 0.0)


def _v(record: ScoreRecord) -> GSEvalValues:
    return record.of(GSEvalValues)
