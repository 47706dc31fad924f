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
Not reproduced: VISA's R2VOS "A" and "R" columns (R needs the video's foreground masks, which a
Sample does not carry), and VISA scoring a video with no prediction directory as J = F = 0 (here a
missing or failed prediction is scored as an empty mask on every frame, as the harness does for all
protocols). Where one of the two types has no expressions VISA prints NaN; here overall is the
other type's value.
"""
from __future__ import annotations

import logging

import numpy as np

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
        """Record: header + "type_id" and "frames": {"I", "U", "J", "F"} per frame (I, U pixel counts),
        "J", "F" (means over frames, float64, unrounded) and "J&F" = (J + F) / 2.

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
        inters, unions, js, fs = [], [], [], []
        for k, (gt_rle, pred_rle) in enumerate(zip(gt_masks, pred_masks)):
            if gt_rle is None and pred_rle is None:  # both empty: J = 1 and F = 1 in the reference
                inter, union, f = 0, 0, 1.0
            else:
                gt, pr = decode_pair(sample, k, gt_rle, pred_rle)
                inter, union = int(np.count_nonzero(gt & pr)), int(np.count_nonzero(gt | pr))
                f = f_measure(gt, pr, self.bound_th)
            inters.append(inter)
            unions.append(union)
            js.append(1.0 if union == 0 else inter / union)  # = metrics.masks.jaccard, from the counts kept
            fs.append(f)
        # np.mean over a float64 array, as the reference's `db_eval_iou(...).mean()` (pairwise sum)
        j, f = float(np.mean(np.asarray(js, dtype=np.float64))), float(np.mean(np.asarray(fs, dtype=np.float64)))
        record = record_header(sample, pred, self.meta_keys)
        record["meta"]["type_id"] = type_id
        record.update({"type_id": type_id, "J": j, "F": f, "J&F": (j + f) / 2,
                       "frames": {"I": inters, "U": unions, "J": js, "F": fs}})
        return record

    def aggregate(self, records: list[dict]) -> dict:
        """metrics: "J&F", "J", "F" (overall), "referring/J", "referring/F", "referring/J&F",
        "reasoning/J", ... (fractions in [0, 1]); breakdown: "type" ("0", "1", "2"), "level" and
        "category" (type 2 excluded, as from the headline), each group {"J", "F", "J&F", "n"}; "n".
        """
        records = sorted(records, key=lambda r: r["sample_id"])
        per_type: dict[str, dict] = {}
        for type_id in SCORED_TYPES:
            group = [r for r in records if r["type_id"] == type_id]
            if group:
                per_type[TYPES[type_id]] = self._means(group)
        metrics: dict[str, float] = {}
        if per_type:
            if len(per_type) < len(SCORED_TYPES):
                log.warning("ReVOS: only %s expressions present; overall = that type alone (VISA: NaN)", list(per_type))
            # VISA: overall = (referring + reasoning) / 2, in its own units (percent), per metric
            overall = {k: sum(m[k] for m in per_type.values()) / len(per_type) for k in ("J", "F", "J&F")}
            for prefix, means in [("", overall), *((f"{t}/", m) for t, m in per_type.items())]:
                metrics.update({f"{prefix}{k}": self._fraction(means[k]) for k in ("J&F", "J", "F")})
        scored = [r for r in records if r["type_id"] in SCORED_TYPES]
        breakdown = {
            "type": {key: self._group(group) for key, group in group_by(records, "type_id").items()},
            "level": {key: self._group(group) for key, group in group_by(scored, "level").items()},
            "category": {key: self._group(group) for key, group in group_by(scored, "category").items()},
        }
        return {"metrics": metrics, "breakdown": breakdown, "n": len(records)}

    def _means(self, group: list[dict]) -> dict[str, float]:
        """{"J", "F", "J&F"} over the expressions of a group, as VISA averages one type: in percent
        of per-expression values rounded to 2 decimals (reference) or as unrounded fractions."""
        if self.mode == "reference":
            # VISA: data['J'] = round(100 * j, 2) with j a numpy float64; then np.array(...).mean()
            j = np.array([round(100 * np.float64(r["J"]), 2) for r in group]).mean()
            f = np.array([round(100 * np.float64(r["F"]), 2) for r in group]).mean()
        else:
            j = np.mean(np.asarray([r["J"] for r in group], dtype=np.float64))
            f = np.mean(np.asarray([r["F"] for r in group], dtype=np.float64))
        return {"J": float(j), "F": float(f), "J&F": float((j + f) / 2)}

    def _fraction(self, value: float) -> float:
        return value / 100 if self.mode == "reference" else value

    def _group(self, group: list[dict]) -> dict:
        means = self._means(group)
        return {**{k: self._fraction(means[k]) for k in ("J", "F", "J&F")}, "n": len(group)}
