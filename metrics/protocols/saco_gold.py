"""SA-Co/Gold protocol: SAM 3's cgF1 evaluator (facebookresearch/sam3@99d02f2
sam3/eval/cgf1_eval.py, CGF1Evaluator with iou_type="segm", as scripts/eval/standalone_cgf1.py and
scripts/eval/gold/eval_sam3.py run it) over the (image, noun phrase) pairs of one subset: cgF1,
IL_MCC, positive_micro_F1 (pmF1) and the rest of the 26 numbers it prints, against one annotator
or the oracle over several (per pair the annotator whose scoring is best). metrics.json holds them
as it returns them (fractions; IL_MCC in [-1, 1]); eval_sam3.py's table rounds cgF1 x 100, IL_MCC
and pmF1 x 100 to 2 decimals. Rules reproduced, and where they differ from lmms-eval's scorer:
docs/benchmarks/saco_gold.md."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rvt_bench.core import masks
from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample, as_float
from rvt_bench.metrics.estimators import CorpusEstimator, Found
from rvt_bench.metrics.protocols.base import Protocol, record_header

log = logging.getLogger(__name__)

SCORE_THRESHOLD = 0.5  # CGF1Eval(threshold=0.5): a predicted instance counts when its score >= 0.5
# COCOeval's IoU thresholds, computed as pycocotools computes them (np.linspace .5:.05:.95)
IOU_THRS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
# CGF1_METRICS: (name, image level, IoU threshold: None = mean over IOU_THRS), in its print order
METRICS: tuple[tuple[str, bool, float | None], ...] = (
    ("cgF1", False, None), ("precision", False, None), ("recall", False, None), ("F1", False, None),
    ("positive_macro_F1", False, None), ("positive_micro_F1", False, None),
    ("positive_micro_precision", False, None),
    ("IL_precision", True, None), ("IL_recall", True, None), ("IL_F1", True, None), ("IL_FPR", True, None),
    ("IL_MCC", True, None),
    *((n, False, t) for t in (0.5, 0.75) for n in (
        "cgF1", "precision", "recall", "F1", "positive_macro_F1", "positive_micro_F1", "positive_micro_precision")),
)
IL_KINDS = ("TP", "TN", "FP", "FN")


def metric_key(name: str, iou: float | None) -> str:
    """The reference's key without its "cgF1_eval_segm_" prefix: "cgF1", "cgF1@0.5"."""
    return name if iou is None else f"{name}@{iou}"


def _coded(rle: dict) -> dict:
    return masks._coded(rle)  # pycocotools' form (list counts compressed, as its annToRLE does)


def evaluate_pair(dts: list[tuple[dict, float]], gts: list[tuple[dict, bool]]) -> dict:
    """CGF1Eval.evaluateImg of one (image, noun phrase) pair against one annotator.

    dts: every predicted instance (RLE, score) of the pair in the predictions file's order (the
         ones with score >= SCORE_THRESHOLD are kept); gts: the annotator's annotations (RLE,
         iscrowd) in the GT file's order (crowd ones are ignored: COCOeval's ``ignore``).
    Returns {"IL": "TP"|"TN"|"FP"|"FN", "num_dt", and unless IL is "TN": "TPs", "FPs", "FNs" (int per
    IoU threshold), "F1s" (its local_F1s, per threshold), "positive" (it has local_positive_F1s)}.
    Matching: Hungarian (scipy linear_sum_assignment on -IoU, pycocotools' mask IoU); a match is a
    TP at threshold t when its IoU >= t. A predicted mask of another size than a GT mask has IoU -1
    with it (pycocotools' answer, as in the reference): never a match.
    """
    gt = [r for r, crowd in gts if not crowd]
    dt = [r for r, s in dts if s >= SCORE_THRESHOLD]
    n_t = len(IOU_THRS)
    if not gt and not dt:
        return {"IL": "TN", "num_dt": 0}
    if gt and not dt:
        return {"IL": "FN", "num_dt": 0, "TPs": [0] * n_t, "FPs": [0] * n_t, "FNs": [len(gt)] * n_t,
                "F1s": [0.0] * n_t, "positive": True}
    from pycocotools import mask as mask_utils
    from scipy.optimize import linear_sum_assignment

    if gt:
        ious = np.asarray(mask_utils.iou([_coded(r) for r in dt], [_coded(r) for r in gt], [0] * len(gt)))
        ious = ious.reshape(len(dt), len(gt))
    else:
        ious = np.zeros((len(dt), 0))
    matched_dt, matched_gt = linear_sum_assignment(-ious)
    match_scores = ious[matched_dt, matched_gt]
    tps = (match_scores[None, :] >= IOU_THRS[:, None]).sum(axis=1, dtype=np.int64)  # per threshold
    fps = len(dt) - tps
    fns = len(gt) - tps
    precision = tps / (tps + fps + 1e-4)
    recall = tps / (tps + fns + 1e-4)
    f1 = 2 * precision * recall / (precision + recall + 1e-4)
    return {"IL": "TP" if gt else "FP", "num_dt": len(dt), "TPs": tps.tolist(), "FPs": fps.tolist(),
            "FNs": fns.tolist(), "F1s": [float(v) for v in f1], "positive": bool(gt)}


def select_best(scorings: list[dict]) -> int:
    """CGF1Evaluator._select_best_scoring for one pair: the index of the annotator kept. Starting
    from the first, a later scoring replaces the kept one when both have local F1s and its mean F1
    over the thresholds is strictly higher, or when it has none (a true negative: no GT, no
    prediction), whatever the kept one is."""
    best = 0
    for k in range(1, len(scorings)):
        cur = scorings[k]
        if "F1s" in scorings[best] and "F1s" in cur:
            if np.mean(np.asarray(cur["F1s"], dtype=np.float64)) > np.mean(np.asarray(scorings[best]["F1s"],
                                                                                       dtype=np.float64)):
                best = k
        elif "F1s" not in cur:
            best = k
    return best


@dataclass
class SACoGoldValues(UnitValues):
    """One pair as the evaluator keeps it (the selected annotator's evaluateImg). IL: the image-level
    outcome; TPs / FPs / FNs / F1s: per IoU threshold (empty for a true negative); positive: the
    pair counts in pmF1 (its GT has a non-crowd instance); num_dt: predicted instances kept
    (score >= 0.5); annotator: the one selected; order: the pair's index in the first annotator's file."""

    kind = "saco_gold"
    IL: str
    num_dt: int
    annotator: str
    order: int
    positive: bool = False
    TPs: list = field(default_factory=list)
    FPs: list = field(default_factory=list)
    FNs: list = field(default_factory=list)
    F1s: list = field(default_factory=list)

    def correct(self) -> bool:
        """A true negative, or every GT instance matched with no extra one at IoU 0.5."""
        return self.IL == "TN" or (self.IL == "TP" and self.FPs[0] == 0 and self.FNs[0] == 0)

    def sample_score(self) -> float:
        """Its local F1 averaged over the IoU thresholds (1 for a true negative)."""
        return 1.0 if self.IL == "TN" else float(np.mean(self.F1s))


N_T = len(IOU_THRS)
# one pair's additive statistics (pair_row): TP, FP, FN, FP of positive pairs, local F1 of positive
# pairs (each per threshold), positive pairs with a prediction, image-level TP, TN, FP, FN
_TP, _FP, _FN, _PMFP, _F1 = (slice(k * N_T, (k + 1) * N_T) for k in range(5))
_VALID = 5 * N_T
_IL = {k: _VALID + 1 + j for j, k in enumerate(IL_KINDS)}
ROW = _VALID + 1 + len(IL_KINDS)


def pair_row(v: SACoGoldValues) -> np.ndarray:
    """(ROW,) what one pair adds to CGF1Eval.accumulate's sums: a true negative adds only its
    image-level count; a positive pair (FN or TP) its FP to the positive-micro FP and its local F1s
    (with a prediction: one to the count the macro F1 divides by)."""
    row = np.zeros(ROW, np.float64)
    row[_IL[v.IL]] = 1.0
    if v.IL == "TN":
        return row
    row[_TP], row[_FP], row[_FN] = v.TPs, v.FPs, v.FNs
    if v.positive:
        row[_PMFP], row[_F1] = v.FPs, v.F1s
        row[_VALID] = float(v.num_dt > 0)
    return row


def corpus(totals: np.ndarray) -> np.ndarray:
    """(b, len(METRICS)) the numbers CGF1Eval.accumulate + summarize print, from summed pair_row
    statistics (b, ROW): as its formulas (epsilons 1e-4 for the instance level, 1e-6 for the image
    level; IL_MCC's product in its order); a threshold-averaged value is the mean of the values
    > -1, and -1 when none is (summarize's rule)."""
    t = np.atleast_2d(np.asarray(totals, np.float64))
    TP, FP, FN, pmFP, local = t[:, _TP], t[:, _FP], t[:, _FN], t[:, _PMFP], t[:, _F1]
    valid = t[:, _VALID]
    tp, tn, fp, fn = (t[:, _IL[k]] for k in IL_KINDS)
    precision = TP / (TP + FP + 1e-4)
    pm_precision = TP / (TP + pmFP + 1e-4)
    recall = TP / (TP + FN + 1e-4)
    pm_f1 = 2 * pm_precision * recall / (pm_precision + recall + 1e-4)
    il_rec = tp / (tp + fn + 1e-6)
    il_prec = tp / (tp + fp + 1e-6)
    il_mcc = (tp * tn - fp * fn) / (((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)) ** 0.5 + 1e-6)
    with np.errstate(divide="ignore", invalid="ignore"):
        macro = local / valid[:, None]
    table = {"precision": precision, "positive_micro_precision": pm_precision, "recall": recall,
             "F1": 2 * precision * recall / (precision + recall + 1e-4), "positive_micro_F1": pm_f1,
             "positive_macro_F1": macro, "IL_recall": il_rec, "IL_precision": il_prec,
             "IL_F1": 2 * il_prec * il_rec / (il_prec + il_rec + 1e-6), "IL_FPR": fp / (fp + tn + 1e-6),
             "IL_MCC": il_mcc, "cgF1": pm_f1 * il_mcc[:, None]}
    out = []
    for name, image_level, iou in METRICS:
        s = table[name]
        if image_level:
            out.append(s)
            continue
        if iou is not None:
            s = s[:, np.where(iou == IOU_THRS)[0]]
        keep = s > -1
        with np.errstate(invalid="ignore"):
            mean = np.where(keep, s, 0).sum(axis=1) / keep.sum(axis=1)
        out.append(np.where(keep.any(axis=1), mean, -1.0))
    return np.stack(out, axis=1)


def cgf1_metrics(values: list[SACoGoldValues]) -> dict[str, float | None]:
    """The 26 numbers CGF1Evaluator.evaluate returns, keyed as metric_key, over the pairs (summed in
    the reference's order); a value it prints as -1 (no value above -1: positive_macro_F1 without a
    positive pair that has a prediction) is None."""
    totals = np.zeros(ROW, np.float64)
    for v in values:
        totals += pair_row(v)
    row = corpus(totals)[0]
    return {metric_key(name, iou): (None if (not image_level and row[k] == -1) else float(row[k]))
            for k, (name, image_level, iou) in enumerate(METRICS)}


class CgF1Statistics:
    """The pairs' additive statistics for the bootstrap and paired comparisons
    (rvt_bench.metrics.estimators.CorpusEstimator.stats): stats (n, ROW), corpus(totals) -> (b,
    len(METRICS)), resampled(counts (b, n)) -> (b, len(METRICS)), sample_scores() -> (n,) each
    pair's own score (SACoGoldValues.sample_score)."""

    def __init__(self, values: list[SACoGoldValues]) -> None:
        self.values = values
        self.stats = np.array([pair_row(v) for v in values], np.float64).reshape(len(values), ROW)

    @staticmethod
    def corpus(totals: np.ndarray) -> np.ndarray:
        return corpus(totals)

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        return corpus(np.asarray(counts, dtype=np.float64) @ self.stats)

    def sample_scores(self) -> np.ndarray:
        return np.array([v.sample_score() for v in self.values], np.float64)


class SACoGoldProtocol(Protocol):
    """SAM 3's cgF1 evaluator on one SA-Co/Gold subset (module docstring).

    The GT of a pair: the sample's meta "annotations" = {annotator: [[RLE, iscrowd], ...]} in the
    order the loader gives the annotators (the first one's file fixes the pairs' order); meta
    "order" its index there.
    The prediction's instances: trace["instances"] = [[RLE, score, category_id], ...] (the
    precomputed reader's COCO results of the pair, every score, the file's order; an instance whose
    category is not among an annotator's meta "category_ids" is left out against that annotator, as
    COCOeval does; the category may be omitted) when present; else each non-empty
    mask of Prediction.masks as one instance of score 1.0 (a model without scores), an empty mask
    as none. A "no target" answer (Prediction.no_target) and a failed prediction have no instance
    above the threshold: the reference's "no prediction" (its trace's instances, all below 0.5 when
    the reader made it, change nothing).

    score(sample, pred) -> record with SACoGoldValues. Raises DatasetFormatError for a sample
    without meta annotations; AdapterError for a malformed instance.
    aggregate(records) -> {"metrics": cgf1_metrics (records in meta order), "n", "counts" (image
    level TP / TN / FP / FN), "warnings"}.
    """

    name = "saco_gold"
    headline = ["cgF1", "IL_MCC", "positive_micro_F1"]  # eval_sam3.py's table: cgF1, IL_MCC, pmF1
    no_target = "own"

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        annotations = sample.meta.get("annotations")
        if not isinstance(annotations, dict) or not annotations:
            raise DatasetFormatError(f"sample {sample.id!r}: SA-Co/Gold expects meta 'annotations' per annotator")
        dts = self._instances(sample, pred)
        names = list(annotations)
        cats = sample.meta.get("category_ids") or {}
        scorings = [evaluate_pair([(r, s) for r, s, c in dts if c is None or a not in cats or c in cats[a]],
                                  [(r, bool(c)) for r, c in annotations[a]]) for a in names]
        k = select_best(scorings)
        s = scorings[k]
        record = record_header(sample, pred, ("subset",))
        record.add(SACoGoldValues(IL=s["IL"], num_dt=s["num_dt"], annotator=str(names[k]),
                                  order=int(sample.meta.get("order", 0)), positive=s.get("positive", False),
                                  TPs=s.get("TPs", []), FPs=s.get("FPs", []), FNs=s.get("FNs", []),
                                  F1s=s.get("F1s", [])))
        return record

    @staticmethod
    def _instances(sample: Sample, pred: Prediction) -> list[tuple[dict, float, Any]]:
        if pred.error is not None or pred.no_target:
            return []
        found = pred.trace.get("instances") if isinstance(pred.trace, dict) else None
        out: list[tuple[dict, float, Any]] = []
        if found is not None:
            for j, item in enumerate(found if isinstance(found, list) else [None]):
                if (not isinstance(item, (list, tuple)) or len(item) not in (2, 3) or as_float(item[1]) is None
                        or not np.isfinite(as_float(item[1]))):
                    raise AdapterError(f"sample {sample.id!r}: trace instance {j} must be [RLE, score(, category_id)]")
                problem = masks.rle_problem(item[0])
                if problem:
                    raise AdapterError(f"sample {sample.id!r}: instance {j}: {problem}")
                out.append((item[0], float(item[1]), item[2] if len(item) == 3 else None))
            return out
        for j, rle in enumerate(pred.masks or []):
            if rle is None:
                continue
            problem = masks.rle_problem(rle)
            if problem:
                raise AdapterError(f"sample {sample.id!r}: mask {j}: {problem}")
            if masks.area(rle):
                out.append((rle, 1.0, None))
        return out

    @staticmethod
    def _values(records: list[ScoreRecord]) -> list[SACoGoldValues]:
        return [v for _, v in sorted(((r.sample_id, r.of(SACoGoldValues)) for r in records),
                                     key=lambda p: (p[1].order, p[0]))]

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        if not records:
            return {"metrics": {}, "n": 0, "counts": {}, "baseline_empty": {}, "warnings": []}
        values = self._values(records)
        metrics = cgf1_metrics(values)
        counts = {k: sum(v.IL == k for v in values) for k in IL_KINDS}
        warnings = [f"{k} is undefined: no positive pair has a prediction (the reference prints -1)"
                    for k in metrics if metrics[k] is None]
        for w in warnings:
            log.warning("%s: %s", self.name, w)
        return {"metrics": metrics, "n": len(records), "counts": counts, "warnings": warnings}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        if not records:
            return "no SA-Co/Gold pairs"
        order = next((k for k, (n, _, t) in enumerate(METRICS) if metric_key(n, t) == key), None)
        if order is None:
            return f"no estimator for {key!r}"
        ordered = sorted(records, key=lambda r: (r.of(SACoGoldValues).order, r.sample_id))
        ids = [r.sample_id for r in ordered]
        sources = [r.source if r.source is not None else "\0" + r.sample_id for r in ordered]
        return CorpusEstimator(key, ids, CgF1Statistics([r.of(SACoGoldValues) for r in ordered]), order,
                               list(ids), sources)
