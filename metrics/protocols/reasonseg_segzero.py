"""Seg-Zero's and VisionReasoner's ReasonSeg scoring (`dataset.protocol.variant=segzero`), a named
variant of LISA's protocol (metrics/protocols/reasonseg.py) that their papers' numbers were computed
under. Source: dvlab-research/Seg-Zero @ 42a3345:

- the ground truth is their hub copy written by evaluation_scripts/create_reasonseg_hf.py, whose
  ``get_mask_from_json`` paints LISA's polygons (ignore ones with 255) and returns
  ``mask.astype(bool)``: LISA's ignore regions count as target;
- evaluation_scripts/evaluation.py (Seg-Zero) and evaluation_visionreasoner.py (VisionReasoner) take
  ``intersection, union = compute_iou(pred, gt)``; ``compute_iou`` returns a bare 0 when the union is
  empty, the unpacking raises and the sample is skipped (``continue``); an unreadable reply is
  written with intersection 0 and union the GT's area (so a failed sample with an empty GT stays,
  scored 0);
- evaluation_scripts/calculate_iou.py prints gIoU = ``np.mean`` of ``I / U`` (0 when U == 0) over
  what was written, and no cIoU.
docs/benchmarks/reasonseg.md "Variants" says what each option reproduces.
"""
from __future__ import annotations

import numpy as np

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Found, mean_of
from rvt_bench.metrics.units.lisa_iou import LisaIoU, MaskIoUValues
from rvt_bench.metrics.units.rle import decode_checked, decode_pair, predicted_masks

LEFT_OUT = "empty-union samples (Seg-Zero's rule)"


def _term(inter: int, union: int) -> float:
    """calculate_iou.py's per-sample value: I / U in float64, 0 when U == 0."""
    return inter / union if union > 0 else 0.0


class SegZeroIoU(LisaIoU):
    """gIoU of one mask per sample as Seg-Zero's scripts (module docstring).

    Per sample: MaskIoUValues with I, U, target counted on GT = LISA's target | ignore (no pixel
    removed), giou_term = iou = I / U (0.0 when U == 0). A record is kept when U > 0 or its
    prediction failed (the authors write a failure with U = the GT's area, kept even when 0).
    aggregate: {"gIoU"} = np.mean of the kept records' terms (float64), {} when none is kept; no
    cIoU (the authors print none). mode is accepted for the protocol's signature: their arithmetic
    has one form. Raises as LisaIoU.score.
    """

    name = "segzero_iou"

    def score(self, sample: Sample, pred: Prediction) -> MaskIoUValues:
        gt_masks = sample.target.masks
        if sample.num_frames != 1 or gt_masks is None or len(gt_masks) != 1:
            raise DatasetFormatError(
                f"sample {sample.id!r}: ReasonSeg protocol expects one frame with one GT mask entry, got "
                f"{sample.num_frames} frames and {None if gt_masks is None else len(gt_masks)} GT masks")
        pred_rle = predicted_masks(sample, pred)[0]
        ignore_rle = sample.target.ignore[0] if sample.target.ignore else None
        if gt_masks[0] is None and pred_rle is None and ignore_rle is None:
            return MaskIoUValues(0, 0, 0, 0.0, 0.0)
        ignore = decode_checked(sample, 0, ignore_rle, "ground-truth")
        if gt_masks[0] is None and pred_rle is None:
            gt, pr = ignore, np.zeros_like(ignore)
        else:
            gt, pr = decode_pair(sample, 0, gt_masks[0], pred_rle)
        if ignore is not None:
            if ignore.shape != gt.shape:
                raise DatasetFormatError(
                    f"sample {sample.id!r}: ignore mask is {list(ignore.shape)} (H, W), the GT is {list(gt.shape)}")
            gt = gt | ignore  # mask.astype(bool): 255 is True
        inter, union = int(np.logical_and(pr, gt).sum()), int(np.logical_or(pr, gt).sum())
        term = _term(inter, union)
        return MaskIoUValues(inter, union, int(gt.sum()), term, term)

    def kept(self, records: list[ScoreRecord]) -> list[ScoreRecord]:
        """The records the authors' scripts write: a nonempty union, or a failed prediction."""
        return [r for r in records if self.of(r).U > 0 or r.failed]

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        kept = self.kept(records)
        return {"gIoU": float(np.mean([self.of(r).giou_term for r in kept]))} if kept else {}

    def baseline(self, records: list[ScoreRecord]) -> dict:
        # an empty prediction: I = 0, U = the GT's area; kept where the GT has pixels or the sample failed
        kept = [r for r in records if self.of(r).target > 0 or r.failed]
        return {"gIoU": 0.0} if kept else {}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found | None:
        if key == "gIoU":
            kept = self.kept(records)
            return mean_of(key, kept, lambda r: self.of(r).giou_term) if kept else "no sample with a nonempty union or a failed prediction"
        return None

    def left_out(self, records: list[ScoreRecord]) -> int:
        """How many records the gIoU leaves out (empty union, prediction not failed)."""
        return len(records) - len(self.kept(records))

    def warnings(self, records: list[ScoreRecord]) -> list[str]:
        n = self.left_out(records)
        return [f"{n} of {len(records)} samples have an empty union (no GT pixel, none predicted) and are left "
                f"out of gIoU, as Seg-Zero's evaluation scripts skip them"] if n else []
