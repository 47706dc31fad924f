"""gRefCOCO protocol: ReLA's ReferEvaluator (henghuiding/ReLA@3ca9551
gres_model/evaluation/refer_evaluation.py) over every sentence of a split: gIoU, cIoU, T_acc,
N_acc, Pr@0.7/0.8/0.9 as it prints them. It prints gIoU, cIoU and Pr@ in percent, T_acc and
N_acc as fractions; metrics.json holds every one as a fraction (as every benchmark here: the
summary and tables show them x 100), i.e. ReLA's percentages / 100, computed before its x 100.
How a "no target" answer and a no-target sample enter each number, and the resolution it scores
at: docs/benchmarks/grefcoco.md."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from rvt_bench.core import masks
from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Estimator, Found, stratum
from rvt_bench.metrics.protocols.base import Protocol, record_header
from rvt_bench.metrics.units.base import CORRECT_IOU

log = logging.getLogger(__name__)

PR_THRESHOLDS = (0.7, 0.8, 0.9)
ORDER_KEYS = ("ref_index", "sent_index")  # ReLA's order of the sentences (loader meta)
NT_MASKS = ("kept", "dropped")


@dataclass
class GRefCOCOValues(UnitValues):
    """One sentence as ReferEvaluator counts it. I, U: what it adds to cIoU's sums; term: what it
    adds to gIoU's sum (the sentence's IoU; 1 for a no-target sample answered "no target");
    iou: the IoU Pr@ thresholds (targeted samples; equal to term); gt_nt: the sample has no
    target; pred_nt: the answer was "no target"; target: GT pixels (the empty-prediction baseline)."""

    kind = "grefcoco"
    I: int  # noqa: E741
    U: int
    term: float
    iou: float
    gt_nt: bool
    pred_nt: bool
    target: int

    def correct(self) -> bool:
        """A no-target sample answered "no target"; a targeted one answered with IoU > CORRECT_IOU."""
        return self.pred_nt if self.gt_nt else (not self.pred_nt and self.iou > CORRECT_IOU)

    def sample_score(self) -> float:
        return self.term


def rela_counts(pred: np.ndarray, gt: np.ndarray, gt_nt: bool, pred_nt: bool) -> tuple[int, int, float]:
    """(I, U, term) of one sentence as ReferEvaluator.evaluate: pred, gt bool [H, W] at the
    evaluator's size. No-target sample: answered "no target" (TP) -> (0, 0, 1.0); else (FN) ->
    (0, |pred OR gt|, 0.0). Targeted sample: answered "no target" (FP) -> I = 0, U = |pred OR gt|
    (the mask still counts); else (TN) -> I, U of the masks; term = I / U, 0.0 when U == 0."""
    union = int(np.count_nonzero(pred | gt))
    if gt_nt:
        return (0, 0, 1.0) if pred_nt else (0, union, 0.0)
    inter = 0 if pred_nt else int(np.count_nonzero(pred & gt))
    return inter, union, (0.0 if union == 0 else float(inter) / float(union))


def rela_aggregate(rows: list[tuple[int, int, float, bool, bool]]) -> dict:
    """ReferEvaluator's printed numbers for one source over rows (I, U, term, gt_nt, pred_nt) in
    its order, as fractions (ReLA prints gIoU, cIoU and Pr@ x 100): gIoU = sum(term) / N;
    cIoU = sum(I) / sum(U); T_acc = TN / (TN + FP), N_acc = TP / (TP + FN) (both 0 when no sample
    is no-target); Pr@t = #(targeted term >= t) / #targeted. A value whose denominator is 0 (where
    ReLA raises ZeroDivisionError) is None."""
    n = len(rows)
    sum_term = 0
    sum_i = sum_u = 0
    tp = tn = fp = fn = 0
    pr = {t: 0 for t in PR_THRESHOLDS}
    for inter, union, term, gt_nt, pred_nt in rows:
        sum_term += term
        sum_i += inter
        sum_u += union
        if gt_nt:
            tp, fn = tp + pred_nt, fn + (not pred_nt)
        else:
            fp, tn = fp + pred_nt, tn + (not pred_nt)
            for t in PR_THRESHOLDS:
                pr[t] += term >= t
    targeted, empty = tn + fp, tp + fn
    out = {"gIoU": sum_term / n if n else None,
           "cIoU": sum_i / sum_u if sum_u else None}
    if empty:
        out["T_acc"] = tn / (tn + fp) if targeted else None
        out["N_acc"] = tp / (tp + fn)
    else:
        # ReLA prints 0 for both; a float, so the summary shows a fraction, not a count of 0
        out["T_acc"] = out["N_acc"] = 0.0
    for t in PR_THRESHOLDS:
        out[f"Pr@{t:1.1f}"] = pr[t] / targeted if targeted else None
    return out


class GRefCOCOProtocol(Protocol):
    """ReLA's gIoU, cIoU, T_acc, N_acc and Pr@0.7/0.8/0.9 on gRefCOCO (module docstring).

    nt_mask: "kept" (ReLA, default): a "no target" answer that came with a mask (the precomputed
             reader keeps it in trace["masks"]) still adds that mask to U where ReLA's evaluator
             does (a targeted sample answered "no target", FP); "dropped" (corrected): it counts as
             an empty mask.
    The GT is the sample's meta "eval_gt" (ReLA's, at 480 x 480) where the loader gives it, else
    target.masks[0]. A predicted mask is read at the GT's size;
    a mask at the image's size (meta "height", "width") is first resized to it with OpenCV's
    INTER_NEAREST (our rule: ReLA's model predicts at the evaluator's size). A failed prediction is
    an empty mask answered as "target".

    score(sample, pred) -> record with GRefCOCOValues and meta ref_index / sent_index.
    Raises DatasetFormatError for a sample without one GT mask; AdapterError for a mask of
    another size.
    aggregate(records) -> {"metrics": rela_aggregate in ReLA's order (ref_index, sent_index; else
    sample id), "n", "counts": {"TP", "TN", "FP", "FN"}, "baseline_empty", "warnings"}.
    """

    name = "grefcoco"
    headline = ["gIoU", "cIoU", "N_acc"]  # ReLA's Table: cIoU, gIoU, N-acc.
    no_target = "own"

    def __init__(self, nt_mask: str = "kept") -> None:
        if nt_mask not in NT_MASKS:
            raise ValueError(f"grefcoco protocol: nt_mask must be one of {list(NT_MASKS)}, got {nt_mask!r}")
        self.nt_mask = nt_mask

    # --- per sample ----------------------------------------------------------------------------

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        gt_masks = sample.target.masks
        if sample.num_frames != 1 or not gt_masks or len(gt_masks) != 1 or gt_masks[0] is None:
            raise DatasetFormatError(f"sample {sample.id!r}: gRefCOCO expects one image with one GT mask")
        eval_gt = sample.meta.get("eval_gt")  # the GT at the evaluator's size (loader), else the image's
        problem = masks.rle_problem(eval_gt) if eval_gt is not None else None
        if problem:
            raise DatasetFormatError(f"sample {sample.id!r}: meta eval_gt: {problem}")
        gt = masks.decode(eval_gt if eval_gt is not None else gt_masks[0]).astype(bool)
        gt_nt = bool(sample.meta.get("no_target", False))
        pred_nt = bool(pred.no_target) and pred.error is None
        pr = self._predicted(sample, pred, gt.shape)
        inter, union, term = rela_counts(pr, gt, gt_nt, pred_nt)
        record = record_header(sample, pred, ())
        record.meta.update({k: sample.meta[k] for k in ORDER_KEYS if k in sample.meta})
        record.add(GRefCOCOValues(inter, union, term, term, gt_nt, pred_nt, int(np.count_nonzero(gt))))
        return record

    def _predicted(self, sample: Sample, pred: Prediction, shape: tuple[int, ...]) -> np.ndarray:
        if pred.error is not None:
            return np.zeros(shape, bool)
        rles = pred.masks
        if pred.no_target:
            kept = pred.trace.get("masks") if isinstance(pred.trace, dict) else None
            rles = kept if self.nt_mask == "kept" and isinstance(kept, list) else None
        if not rles or rles[0] is None:
            return np.zeros(shape, bool)
        if len(rles) != 1:
            raise AdapterError(f"sample {sample.id!r}: {len(rles)} masks for one image")
        problem = masks.rle_problem(rles[0])
        if problem:
            raise AdapterError(f"sample {sample.id!r}: predicted mask: {problem}")
        size = tuple(int(v) for v in rles[0]["size"])  # checked before decoding: a 100000 x 100000 RLE is 7 bytes
        image = (sample.meta.get("height"), sample.meta.get("width"))
        if size != tuple(shape) and size != image:
            raise AdapterError(f"sample {sample.id!r}: predicted mask is {list(size)} (H, W); expected the "
                               f"evaluator's {list(shape)} or the image's {list(image)}")
        mask = masks.decode(rles[0]).astype(bool)
        if mask.shape == shape:
            return mask
        import cv2

        return cv2.resize(mask.astype(np.uint8), (shape[1], shape[0]), interpolation=cv2.INTER_NEAREST) > 0

    # --- aggregate -----------------------------------------------------------------------------

    @staticmethod
    def _ordered(records: list[ScoreRecord]) -> list[ScoreRecord]:
        if all(all(k in r.meta for k in ORDER_KEYS) for r in records):
            return sorted(records, key=lambda r: (int(r.meta["ref_index"]), int(r.meta["sent_index"]), r.sample_id))
        return sorted(records, key=lambda r: r.sample_id)

    def _rows(self, records: list[ScoreRecord]) -> list[tuple[int, int, float, bool, bool]]:
        rows = []
        for r in self._ordered(records):
            v = r.of(GRefCOCOValues)
            rows.append((v.I, v.U, v.term, v.gt_nt, v.pred_nt))
        return rows

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        if not records:
            return {"metrics": {}, "n": 0, "counts": {}, "baseline_empty": {}, "warnings": []}
        rows = self._rows(records)
        metrics = rela_aggregate(rows)
        counts = {"TP": sum(g and p for _, _, _, g, p in rows), "TN": sum(not g and not p for _, _, _, g, p in rows),
                  "FP": sum(not g and p for _, _, _, g, p in rows), "FN": sum(g and not p for _, _, _, g, p in rows)}
        baseline = rela_aggregate([(0, v.target, 0.0, v.gt_nt, False)
                                   for v in (r.of(GRefCOCOValues) for r in self._ordered(records))])
        warnings = [f"{k} is undefined (ReLA divides by zero here): " + why
                    for k, why in (("cIoU", "no pixel in any union"), ("Pr@0.7", "no sample with a target"),
                                   ("T_acc", "no sample with a target"))
                    if k in metrics and metrics[k] is None]
        if not any(g for _, _, _, g, _ in rows):
            warnings.append("no no-target sample: T_acc and N_acc are 0, as ReLA prints them")
        for w in warnings:
            log.warning("%s: %s", self.name, w)
        return {"metrics": metrics, "n": len(records), "counts": counts,
                "baseline_empty": {k: baseline[k] for k in ("gIoU", "cIoU")}, "warnings": warnings}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        if not records:
            return "no gRefCOCO samples"
        v = lambda r: r.of(GRefCOCOValues)  # noqa: E731
        if key == "gIoU":
            return Estimator(key, [stratum(records, lambda r: v(r).term)])
        if key == "cIoU":
            return Estimator(key, [stratum(records, lambda r: v(r).I, lambda r: v(r).U)])
        if key in ("N_acc", "T_acc"):
            want_nt = key == "N_acc"
            group = [r for r in records if v(r).gt_nt == want_nt]
            if not any(v(r).gt_nt for r in records):
                return f"{key} is 0 by ReLA's rule when no sample is no-target: nothing to resample"
            if not group:
                return f"no {'no-target' if want_nt else 'targeted'} sample"
            return Estimator(key, [stratum(group, lambda r: float(v(r).pred_nt == want_nt))])
        if key.startswith("Pr@"):
            t = float(key[3:])
            group = [r for r in records if not v(r).gt_nt]
            if not group:
                return "no sample with a target"
            return Estimator(key, [stratum(group, lambda r: float(v(r).term >= t))])
        return f"no per-sample estimator for {key!r}"
