"""Spatio-temporal grounding by boxes (metrics/boxes.py): HC-STVG / VidSTG m_vIoU and vIoU@R, and
the LISA-style gIoU / cIoU / Acc@0.5 over per-frame box regions; docs/benchmarks/rvtbench.md says
why m_vIoU is RVTBench's headline."""
from __future__ import annotations

from dataclasses import dataclass

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.boxes import ACC_THRESHOLD, aggregate_boxes, sample_box_scores
from rvt_bench.metrics.estimators import Estimator, Found, mean_of, stratum
from rvt_bench.metrics.units.base import CORRECT_IOU, Unit


@dataclass
class BoxValues(UnitValues):
    """One sample's boxes (rvt_bench.metrics.boxes.sample_box_scores): giou_term = the mean of the
    frame IoUs, I, U = summed box-region intersections and unions (pixels), frame_ious, viou = the
    tube's vIoU, tube_frames = frames where either side has a box; gt_empty = no GT box in any frame;
    baseline = {"giou_term", "I", "U", "viou"} of an empty prediction. viou and tube_frames are None
    in records of runs older than them."""

    kind = "box_iou"
    giou_term: float
    I: float  # noqa: E741
    U: float
    frame_ious: list[float]
    viou: float | None = None
    tube_frames: int | None = None
    gt_empty: bool | None = None
    baseline: dict[str, float] | None = None

    def correct(self) -> bool:
        return self.giou_term > CORRECT_IOU

    def sample_score(self) -> float:
        return self.giou_term


class BoxIoU(Unit):
    """Per sample: BoxValues. aggregate: "m_vIoU", "vIoU@0.3", "vIoU@0.5", "gIoU", "cIoU",
    "Acc@<threshold>" (rvt_bench.metrics.boxes.aggregate_boxes); each one's estimator: the mean of
    viou, of viou > R, of giou_term, of giou_term > threshold, and sum I / sum U.
    Raises DatasetFormatError for a missing or invalid GT box list, AdapterError for a prediction
    with another frame count or an invalid box (messages name the sample and frame).
    """

    name = "box_iou"
    values_type = BoxValues
    task = "grounding"

    def __init__(self, threshold: float = ACC_THRESHOLD) -> None:
        self.threshold = float(threshold)

    def score(self, sample: Sample, pred: Prediction) -> BoxValues:
        gt_boxes = sample.target.boxes
        if gt_boxes is None or len(gt_boxes) != sample.num_frames:
            raise DatasetFormatError(f"sample {sample.id!r}: expected one GT box list per frame ({sample.num_frames}), "
                                     f"got {None if gt_boxes is None else len(gt_boxes)}")
        pred_boxes = pred.boxes if self.reads(pred) else None
        if pred_boxes is not None and len(pred_boxes) != sample.num_frames:
            raise AdapterError(f"sample {sample.id!r}: prediction has {len(pred_boxes)} box lists, the sample has "
                               f"{sample.num_frames} frames")
        try:  # the GT first: a bad GT box is the dataset's fault, not the model's
            empty = sample_box_scores(None, gt_boxes)
        except ValueError as exc:
            raise DatasetFormatError(f"sample {sample.id!r}: ground truth {exc}") from exc
        try:
            scores = sample_box_scores(pred_boxes, gt_boxes)
        except ValueError as exc:
            raise AdapterError(f"sample {sample.id!r}: {exc}") from exc
        return BoxValues(**scores, gt_empty=empty["U"] == 0 and all(len(b or []) == 0 for b in gt_boxes),
                         baseline={k: empty[k] for k in ("giou_term", "I", "U", "viou")})

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        # aggregate_boxes reads sample_box_scores' per-sample dicts: the values' own JSON
        return self._aggregate([self.of(r).to_json() for r in records])

    def _aggregate(self, scores: list[dict]) -> dict:
        return {k: v for k, v in aggregate_boxes(scores, self.threshold).items() if k != "n"}

    def baseline(self, records: list[ScoreRecord]) -> dict:
        found = [self.of(r).baseline for r in records]
        if not found or any(b is None for b in found):
            return {}
        return self._aggregate(found)

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found | None:
        if key == "m_vIoU":
            return mean_of(key, records, lambda r: self.of(r).viou)
        if key.startswith("vIoU@"):
            at = float(key[5:])
            return mean_of(key, records, lambda r: float(self.of(r).viou > at))
        if key == "gIoU":
            return mean_of(key, records, lambda r: self.of(r).giou_term)
        if key == "cIoU":
            return Estimator(key, [stratum(records, lambda r: self.of(r).I, lambda r: self.of(r).U)])
        if key.startswith("Acc@"):
            threshold = float(key[4:])
            return mean_of(key, records, lambda r: float(self.of(r).giou_term > threshold))
        return None
