"""LISA's gIoU and cIoU of single-image reasoning segmentation (LISA `train_ds.py::validate`), and
LLM-Seg's variant of the same arithmetic (`validate_llmseg.py`). docs/benchmarks/reasonseg.md and
llmseg40k.md give the references and what each option reproduces."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Estimator, Found, mean_of, stratum
from rvt_bench.metrics.masks import ciou, giou, lisa_intersection_union, lisa_sample_iou, sample_iou
from rvt_bench.metrics.units.base import CORRECT_IOU, Unit, check_mode
from rvt_bench.metrics.units.rle import decode_checked, decode_pair, predicted_masks

_F32_EPS_LLMSEG = np.float32(1e-8)


@dataclass
class MaskIoUValues(UnitValues):
    """One image's mask counts (LisaIoU, LLMSegIoU): I, U, target = pixel counts after the ignore
    label is removed from both masks (target: the GT's); giou_term = the unit's reference
    per-sample term (float32 widened); iou = I / U, 1.0 when U == 0."""

    kind = "mask_iou"
    I: int  # noqa: E741
    U: int
    target: int
    giou_term: float
    iou: float

    def correct(self) -> bool:
        return self.iou > CORRECT_IOU

    def sample_score(self) -> float:
        return self.giou_term


class LisaIoU(Unit):
    """gIoU and cIoU of one mask per sample, as LISA.

    Per sample: MaskIoUValues, giou_term = LISA's float32 I / (U + 1e-5), +1 when U == 0.
    aggregate: {"gIoU", "cIoU"} in [0, 1]; mode "reference" = LISA's float32 running sums and
    N + 1e-5 divisor (rvt_bench.metrics.masks.giou / ciou), "textbook" = float64.
    estimator: gIoU = the mean of the records' giou_term (reference; the divisor N + 1e-5 as the
    reference's) or iou (textbook), cIoU = sum I / sum U.
    Raises DatasetFormatError when the sample is not one frame with one GT entry, or its ignore mask
    has another size; AdapterError for an unusable predicted mask.
    """

    name = "lisa_iou"
    values_type = MaskIoUValues
    task = "segmentation"

    def __init__(self, mode: str = "reference", protocol: str = "reasonseg") -> None:
        self.mode = check_mode(mode, protocol)
        self.protocol = protocol

    def score(self, sample: Sample, pred: Prediction) -> MaskIoUValues:
        gt_masks = sample.target.masks
        if sample.num_frames != 1 or gt_masks is None or len(gt_masks) != 1:
            raise DatasetFormatError(
                f"sample {sample.id!r}: ReasonSeg protocol expects one frame with one GT mask entry, got "
                f"{sample.num_frames} frames and {None if gt_masks is None else len(gt_masks)} GT masks")
        pred_rle = predicted_masks(sample, pred)[0]
        ignore_rle = sample.target.ignore[0] if sample.target.ignore else None
        if gt_masks[0] is None and pred_rle is None:
            inter, union, target = 0, 0, 0
        else:
            gt, pr = decode_pair(sample, 0, gt_masks[0], pred_rle)
            ignore = decode_checked(sample, 0, ignore_rle, "ground-truth")
            if ignore is not None and ignore.shape != gt.shape:
                raise DatasetFormatError(
                    f"sample {sample.id!r}: ignore mask is {list(ignore.shape)} (H, W), the GT is {list(gt.shape)}")
            inter, union, target = lisa_intersection_union(pr, gt, ignore)
        return MaskIoUValues(inter, union, target, self.term(inter, union), sample_iou(inter, union))

    def gt_empty(self, record: ScoreRecord) -> bool:
        """No GT pixel is left after ignore removal (target == 0): an empty prediction scores 1."""
        return self.of(record).target == 0

    def term(self, inter: int, union: int) -> float:
        """The per-sample gIoU term the reference adds up."""
        return lisa_sample_iou(inter, union)

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        return self._aggregate([self.of(r).I for r in records], [self.of(r).U for r in records])

    def _aggregate(self, inters: list[int], unions: list[int]) -> dict:
        if self.mode == "reference":
            terms = [lisa_sample_iou(i, u) for i, u in zip(inters, unions)]
        else:
            terms = [sample_iou(i, u) for i, u in zip(inters, unions)]
        return {"gIoU": giou(terms, self.mode), "cIoU": ciou(inters, unions, self.mode)}

    def baseline(self, records: list[ScoreRecord]) -> dict:
        # an empty prediction: I = 0, U = the GT's pixels after ignore removal
        return self._aggregate([0] * len(records), [self.of(r).target for r in records]) if records else {}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found | None:
        if key == "gIoU":
            if self.mode == "reference":
                # the reference divides the sum by N + 1e-5 (rvt_bench.metrics.masks.giou): each sample's
                # denominator is 1 + 1e-5 / N, so a resample's sum(count * den) is N + 1e-5 as well;
                # without it a run of N <~ 10 samples differs from the protocol's number by more than
                # the tolerance.
                n = len(records)
                return Estimator(key, [stratum(records, lambda r: self.of(r).giou_term, lambda r: 1.0 + 1e-5 / n)])
            return mean_of(key, records, lambda r: self.of(r).iou)
        if key == "cIoU":
            return Estimator(key, [stratum(records, lambda r: self.of(r).I, lambda r: self.of(r).U)])
        return None


def llmseg_sample_iou(intersection: int, union: int) -> float:
    """LLM-Seg's per-sample gIoU term: float32 I / (U + 1e-8), plus 1.0 when U == 0; the float32
    value widened to float (exact)."""
    term = np.float32(intersection) / (np.float32(union) + _F32_EPS_LLMSEG)
    if union == 0:
        term = term + np.float32(1.0)
    return float(term)


def llmseg_ciou(intersections: list[int], unions: list[int]) -> float:
    """LLM-Seg's cIoU: float32(exact sum I) / (float32(exact sum U) + 1e-10), in float32.
    Raises ValueError on empty or unequal lists."""
    if len(intersections) == 0 or len(intersections) != len(unions):
        raise ValueError(f"llmseg_ciou: need equal, non-empty lists, got {len(intersections)} and {len(unions)} entries")
    sum_i = np.float32(sum(int(i) for i in intersections))
    sum_u = np.float32(sum(int(u) for u in unions))
    return float(sum_i / (sum_u + np.float32(1e-10)))


class LLMSegIoU(LisaIoU):
    """gIoU and cIoU as LLM-Seg's `validate_llmseg.py`: per-sample term float32 I / (U + 1e-8),
    cIoU from exact integer sums rounded to float32 once; giou_term is that term. mode
    "textbook" is LisaIoU's float64 definition. The estimators are LisaIoU's: LLM-Seg divides
    the summed terms by N + 1e-5 too (`AverageMeter.all_reduce`), and its cIoU is sum I / sum U
    rounded to float32."""

    name = "llmseg_iou"

    def __init__(self, mode: str = "reference", protocol: str = "llmseg40k") -> None:
        super().__init__(mode, protocol)

    def term(self, inter: int, union: int) -> float:
        return llmseg_sample_iou(inter, union)

    def _aggregate(self, inters: list[int], unions: list[int]) -> dict:
        if self.mode != "reference":
            return super()._aggregate(inters, unions)
        terms = [llmseg_sample_iou(i, u) for i, u in zip(inters, unions)]
        return {"gIoU": giou(terms, "reference"), "cIoU": llmseg_ciou(inters, unions)}
