"""ReVOS protocol (reasoning video object segmentation), following VISA `tools/eval_revos.py`.

Reference: github.com/cilinyan/VISA @ ec158fde9cdf87f702399c73618aa0f1127062e9, `tools/eval_revos.py`
with `tools/metrics.py` (= davis2017-evaluation's `db_eval_iou` / `f_measure`).

What the reference does, and this protocol with it:
- GT of an expression = union of its anno_ids' masks per frame (the loader builds it:
  Sample.target.masks); every frame of the video is scored, none dropped.
- Per expression: J = mean over frames of `jaccard` (1 when GT and prediction are both empty), F =
  mean over frames of `f_measure`.
- Reported per type: referring (type_id 0) and reasoning (type_id 1) = the mean over their
  expressions, J&F = (J + F) / 2 of those means; overall = (referring + reasoning) / 2, for J, F
  and J&F alike. No-target expressions (type_id 2) are scored per expression by VISA (they appear in
  its CSV) but enter none of its averages; here they are scored the same way and reported only in
  breakdown["type"]["2"].
- VISA rounds each expression's J and F to 2 decimals of a percent (`round(100 * j, 2)`, on a numpy
  float64, which is numpy's scale-rint-unscale rounding) before averaging. mode="reference" (the
  default) reproduces that, so numbers compare with published ones; mode="textbook" averages the
  unrounded values (the two differ by < 5e-5). Values here are fractions in [0, 1]: VISA's printed
  percentages divided by 100.
- A and R (R2VOS's accuracy and robustness, VISA `tools/metrics.py::get_r2vos_accuracy` /
  `get_r2vos_robustness`), per frame, then the mean over frames, rounded and averaged like J and F:
  A = fraction of pixels where GT and prediction agree; R = max(1 - FP / (|foreground| + 1e-6), 0)
  with FP = predicted pixels outside the GT and foreground = the union of every annotated object of
  the frame (Sample.target.foreground, from mask_dict_foreground.json). R is reported only when
  every scored sample has foreground masks.
  Difference: here A and R are computed on binarised masks (nonzero = foreground). VISA computes
  them on raw pixel values: GT = uint8 *sum* of the anno masks (2 where two annos overlap) and the
  prediction = the PNG's gray values, so for the usual 0/255 PNGs VISA's A counts only pixels where
  both are background (a correctly predicted pixel, 255 vs 1, counts as disagreement) and VISA's FP
  count is 255 per false-positive pixel (uint8 products), which drives its R to 0 for almost any
  false positive. With 0/1-valued PNGs and non-overlapping annos the two agree exactly (the parity
  test holds this); with 0/255 PNGs, binarised A and R are the meaningful values and VISA's are not
  comparable to them.
Not reproduced: VISA scoring a video with no prediction directory as J = F = 0 (here a
missing or failed prediction is scored as an empty mask on every frame, as the harness does for all
protocols). Where one of the two types has no expressions VISA prints NaN; here overall is the
other type's value.
"""
from __future__ import annotations

import logging

import numpy as np

from bench.masks import area
from bench.types import DatasetFormatError, Prediction, Sample
from metrics.masks import DAVIS_BOUND_TH, f_measure
from metrics.protocols.base import Protocol, check_mode, decode_pair, group_by, predicted_masks, record_header

log = logging.getLogger(__name__)

TYPES = {0: "referring", 1: "reasoning", 2: "no_target"}
SCORED_TYPES = (0, 1)


class ReVOSProtocol(Protocol):
    """J, F and J&F per expression; referring / reasoning / overall as VISA; breakdown by type,
    level and category (the last two when the samples' meta has them).

    mode: "reference" (VISA's per-expression rounding, default) or "textbook" (no rounding).
    bound_th: F's boundary tolerance (fraction of the frame diagonal), davis2017's 0.008.
    default_type_id: type_id for samples whose meta lacks one; None (default) makes that an error.
    """

    name = "revos"
    headline = ["J&F", "J", "F"]
    meta_keys = ("type_id", "level", "category")

    def __init__(self, mode: str = "reference", bound_th: float = DAVIS_BOUND_TH, default_type_id: int | None = None):
        self.mode = check_mode(mode, self.name)
        self.bound_th = float(bound_th)
        self.default_type_id = default_type_id

    def score(self, sample: Sample, pred: Prediction) -> dict:
        """Record: header + "type_id" and "frames": {"I", "U", "J", "F", "A"(, "R")} per frame (I, U
        pixel counts), "J", "F", "A" (means over frames, float64, unrounded), "J&F" = (J + F) / 2 and
        "R" (mean over frames) when sample.target.foreground is set.

        Raises DatasetFormatError when the sample has no type_id (and no default) or no GT masks;
        AdapterError when the prediction's frame count or mask size differs from the sample's.
        """
        type_id = sample.meta.get("type_id", self.default_type_id)
        if type_id not in TYPES:
            raise DatasetFormatError(
                f"sample {sample.id!r}: ReVOS protocol needs meta['type_id'] in {sorted(TYPES)}, got {type_id!r}"
            )
        gt_masks = sample.target.masks
        if gt_masks is None or len(gt_masks) != sample.num_frames:
            raise DatasetFormatError(
                f"sample {sample.id!r}: expected one GT mask entry (RLE or None) per frame "
                f"({sample.num_frames}), got {None if gt_masks is None else len(gt_masks)}"
            )
        pred_masks = predicted_masks(sample, pred)
        foreground = sample.target.foreground
        if foreground is not None and len(foreground) != sample.num_frames:
            raise DatasetFormatError(
                f"sample {sample.id!r}: expected one foreground entry per frame ({sample.num_frames}), got {len(foreground)}"
            )
        frames: dict[str, list] = {"I": [], "U": [], "J": [], "F": [], "A": [], "R": []}
        for k, (gt_rle, pred_rle) in enumerate(zip(gt_masks, pred_masks)):
            if gt_rle is None and pred_rle is None:  # both empty: J = F = A = R = 1 in the reference
                inter, union, f, a, false_pos = 0, 0, 1.0, 1.0, 0
            else:
                gt, pr = decode_pair(sample, k, gt_rle, pred_rle)
                inter, union = int(np.count_nonzero(gt & pr)), int(np.count_nonzero(gt | pr))
                f = f_measure(gt, pr, self.bound_th)
                # VISA: np.mean(gt == pred); the disagreeing pixels are exactly U - I
                a = (gt.size - (union - inter)) / gt.size
                false_pos = int(np.count_nonzero(pr)) - inter
            frames["I"].append(inter)
            frames["U"].append(union)
            frames["J"].append(1.0 if union == 0 else inter / union)  # = metrics.masks.jaccard, from the counts
            frames["F"].append(f)
            frames["A"].append(a)
            if foreground is not None:
                frames["R"].append(r2vos_robustness(false_pos, area(foreground[k])))
        if foreground is None:
            del frames["R"]
        # np.mean over a float64 array, as the reference's `db_eval_iou(...).mean()` (pairwise sum)
        means = {key: float(np.mean(np.asarray(frames[key], dtype=np.float64))) for key in ("J", "F", "A", "R") if key in frames}
        record = record_header(sample, pred, self.meta_keys)
        record["meta"]["type_id"] = type_id
        record.update({"type_id": type_id, **means, "J&F": (means["J"] + means["F"]) / 2, "frames": frames})
        return record

    def aggregate(self, records: list[dict]) -> dict:
        """metrics: "J&F", "J", "F", "A", "R" (overall), "referring/J", "referring/F", "referring/J&F",
        "referring/A", "reasoning/J", ... (fractions in [0, 1]; R only when every scored record has it);
        breakdown: "type" ("0", "1", "2"), "level" and "category" (type 2 excluded, as from the
        headline), each group {"J", "F", "J&F", "A"(, "R"), "n"}; "n".
        """
        records = sorted(records, key=lambda r: r["sample_id"])
        scored = [r for r in records if r["type_id"] in SCORED_TYPES]
        keys = self._keys(scored)
        per_type: dict[str, dict] = {}
        for type_id in SCORED_TYPES:
            group = [r for r in records if r["type_id"] == type_id]
            if group:
                per_type[TYPES[type_id]] = self._means(group, keys)
        metrics: dict[str, float] = {}
        if per_type:
            if len(per_type) < len(SCORED_TYPES):
                log.warning("ReVOS: only %s expressions present; overall = that type alone (VISA: NaN)", list(per_type))
            # VISA: overall = (referring + reasoning) / 2, in its own units (percent), per metric
            overall = {k: sum(m[k] for m in per_type.values()) / len(per_type) for k in ("J&F", *keys)}
            for prefix, means in [("", overall), *((f"{t}/", m) for t, m in per_type.items())]:
                metrics.update({f"{prefix}{k}": self._fraction(means[k]) for k in ("J&F", *keys)})
        breakdown = {
            "type": {key: self._group(group) for key, group in group_by(records, "type_id").items()},
            "level": {key: self._group(group) for key, group in group_by(scored, "level").items()},
            "category": {key: self._group(group) for key, group in group_by(scored, "category").items()},
        }
        return {"metrics": metrics, "breakdown": breakdown, "n": len(records)}

    @staticmethod
    def _keys(records: list[dict]) -> tuple[str, ...]:
        """Per-expression metrics every record has (records of older runs may lack A or R)."""
        return tuple(k for k in ("J", "F", "A", "R") if all(k in r for r in records))

    def _means(self, group: list[dict], keys: tuple[str, ...] = ("J", "F")) -> dict[str, float]:
        """{"J", "F", "J&F", ...keys} over the expressions of a group, as VISA averages one type: in
        percent of per-expression values rounded to 2 decimals (reference) or as unrounded fractions."""
        out = {}
        for key in keys:
            if self.mode == "reference":
                # VISA: data['J'] = round(100 * j, 2) with j a numpy float64; then np.array(...).mean()
                out[key] = float(np.array([round(100 * np.float64(r[key]), 2) for r in group]).mean())
            else:
                out[key] = float(np.mean(np.asarray([r[key] for r in group], dtype=np.float64)))
        out["J&F"] = float((np.float64(out["J"]) + np.float64(out["F"])) / 2)
        return out

    def _fraction(self, value: float) -> float:
        return value / 100 if self.mode == "reference" else value

    def _group(self, group: list[dict]) -> dict:
        keys = self._keys(group)
        means = self._means(group, keys)
        return {**{k: self._fraction(means[k]) for k in ("J&F", *keys)}, "n": len(group)}


def r2vos_robustness(false_positives: int, foreground_area: int) -> float:
    """R2VOS robustness of one frame: max(1 - FP / (|foreground| + 1e-6), 0.0), float64.

    false_positives: predicted pixels outside the GT; foreground_area: pixels of the union of every
    annotated object of the frame. Reference: VISA `tools/metrics.py::get_r2vos_robustness`, on
    binarised masks (see the module docstring for how VISA's raw-pixel arithmetic differs).
    """
    return max(1.0 - false_positives / (foreground_area + 1e-6), 0.0)
