"""ReasonSeg protocol (reasoning segmentation of images), following LISA `train_ds.py::validate`.

Reference: github.com/dvlab-research/LISA @ 3cb2d4301f1af4691bd4f3938335ef06e76f155a, `validate`
with `utils/utils.py::intersectionAndUnionGPU` and `AverageMeter.all_reduce`.

What the reference does, and this protocol with it (one query = one mask = one sample):
- Per sample: I, U of the foreground class with LISA's ignore label (255) removed from both the
  prediction and the GT (`metrics.masks.lisa_intersection_union`).
- gIoU = mean of the per-sample terms I / (U + 1e-5) (+1.0 when U == 0), cIoU = sum I / sum U.
- mode="reference" (default) reproduces LISA's float32 arithmetic (float32 running sums in sample
  order, N + 1e-5 divisor; see metrics.masks.giou / ciou), which is LISA's printed number to the
  last bit; mode="textbook" is the float64 definition (I/U per sample, exact integer sums). The two
  differ by ~1e-6.
Samples are ordered by sample_id before summing (LISA sums in loader order, i.e. sorted file names).
"""
from __future__ import annotations

import logging

from core.masks import decode
from core.types import DatasetFormatError, Prediction, Sample
from metrics.masks import ciou, giou, lisa_intersection_union, lisa_sample_iou, sample_iou
from metrics.protocols.base import (Protocol, baseline_warnings, check_mode, decode_pair, empty_gt_warnings, group_by,
                                    predicted_masks, record_header)

log = logging.getLogger(__name__)


class ReasonSegProtocol(Protocol):
    """gIoU and cIoU as LISA; breakdown by is_sentence (short "false" / long "true" query), level
    and category when the samples' meta has them.

    mode: "reference" (LISA's float32 arithmetic, default) or "textbook" (float64).
    """

    name = "reasonseg"
    headline = ["gIoU", "cIoU"]
    meta_keys = ("is_sentence", "level", "category")

    def __init__(self, mode: str = "reference"):
        self.mode = check_mode(mode, self.name)

    def score(self, sample: Sample, pred: Prediction) -> dict:
        """Record: header + "I", "U", "target" (pixel counts after ignore removal), "giou_term"
        (LISA's float32 per-sample term) and "iou" (textbook I/U, 1.0 when U == 0).

        Raises DatasetFormatError when the sample is not a single frame with a GT mask entry;
        AdapterError when the prediction's frame count or mask size differs from the sample's.
        """
        gt_masks = sample.target.masks
        if sample.num_frames != 1 or gt_masks is None or len(gt_masks) != 1:
            raise DatasetFormatError(
                f"sample {sample.id!r}: ReasonSeg protocol expects one frame with one GT mask entry, got "
                f"{sample.num_frames} frames and {None if gt_masks is None else len(gt_masks)} GT masks"
            )
        pred_rle = predicted_masks(sample, pred)[0]
        ignore_rle = sample.target.ignore[0] if sample.target.ignore else None
        if gt_masks[0] is None and pred_rle is None:
            inter, union, target = 0, 0, 0
        else:
            gt, pr = decode_pair(sample, 0, gt_masks[0], pred_rle)
            ignore = decode(ignore_rle) if ignore_rle is not None else None
            if ignore is not None and ignore.shape != gt.shape:
                raise DatasetFormatError(
                    f"sample {sample.id!r}: ignore mask is {list(ignore.shape)} (H, W), the GT is {list(gt.shape)}"
                )
            inter, union, target = lisa_intersection_union(pr, gt, ignore)
        record = record_header(sample, pred, self.meta_keys)
        record.update({"I": inter, "U": union, "target": target,
                       "giou_term": lisa_sample_iou(inter, union), "iou": sample_iou(inter, union)})
        return record

    def aggregate(self, records: list[dict]) -> dict:
        """metrics: "gIoU", "cIoU" in [0, 1]; breakdown: "is_sentence" ("false" short, "true" long
        query), "level", "category", each group {"gIoU", "cIoU", "n"}; "n"; "baseline_empty": gIoU and
        cIoU of an empty prediction on every sample; "warnings": samples with an empty GT (after
        ignore removal), more than base.EMPTY_GT_WARN of them, a gIoU equal to the baseline's.
        Empty records -> no metrics."""
        records = sorted(records, key=lambda r: r["sample_id"])
        breakdown = {key: {value: self._metrics(group) for value, group in group_by(records, key).items()}
                     for key in self.meta_keys}
        metrics = {k: v for k, v in self._metrics(records).items() if k != "n"} if records else {}
        # an empty prediction: I = 0, U = the GT's pixels after ignore removal
        empty = [{**r, "I": 0, "U": r["target"]} for r in records]
        baseline = {k: v for k, v in self._metrics(empty).items() if k != "n"} if records else {}
        warnings = (empty_gt_warnings([r["sample_id"] for r in records if r["target"] == 0], len(records))
                    + baseline_warnings(metrics, baseline, self.headline[:1]))
        for w in warnings:
            log.warning("%s: %s", self.name, w)
        return {"metrics": metrics, "breakdown": breakdown, "n": len(records), "baseline_empty": baseline,
                "warnings": warnings}

    def _metrics(self, group: list[dict]) -> dict:
        inters, unions = [r["I"] for r in group], [r["U"] for r in group]
        if self.mode == "reference":
            terms = [lisa_sample_iou(i, u) for i, u in zip(inters, unions)]
        else:
            terms = [sample_iou(i, u) for i, u in zip(inters, unions)]
        return {"gIoU": giou(terms, self.mode), "cIoU": ciou(inters, unions, self.mode), "n": len(group)}
