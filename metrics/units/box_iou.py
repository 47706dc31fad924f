"""Spatio-temporal grounding by boxes (metrics/boxes.py): HC-STVG / VidSTG m_vIoU and vIoU@R, and
the LISA-style gIoU / cIoU / Acc@0.5 over per-frame box regions; docs/benchmarks/rvtbench.md says
why m_vIoU is RVTBench's headline."""
from __future__ import annotations

from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.boxes import ACC_THRESHOLD, aggregate_boxes, sample_box_scores
from rvt_bench.metrics.units.base import Unit


class BoxIoU(Unit):
    """Per sample: "giou_term", "I", "U", "frame_ious", "viou", "tube_frames"
    (rvt_bench.metrics.boxes.sample_box_scores), "gt_empty" (no GT box in any frame) and "baseline" (the
    same for an empty prediction). aggregate: "m_vIoU", "vIoU@0.3", "vIoU@0.5", "gIoU", "cIoU",
    "Acc@<threshold>" (rvt_bench.metrics.boxes.aggregate_boxes).
    Raises DatasetFormatError for a missing or invalid GT box list, AdapterError for a prediction
    with another frame count or an invalid box (messages name the sample and frame).
    """

    name = "box_iou"
    task = "grounding"

    def __init__(self, threshold: float = ACC_THRESHOLD) -> None:
        self.threshold = float(threshold)

    def score(self, sample: Sample, pred: Prediction) -> dict:
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
        return {**scores, "gt_empty": empty["U"] == 0 and all(len(b or []) == 0 for b in gt_boxes),
                "baseline": {k: empty[k] for k in ("giou_term", "I", "U", "viou")}}

    def aggregate(self, records: list[dict]) -> dict:
        return {k: v for k, v in aggregate_boxes(records, self.threshold).items() if k != "n"}

    def baseline(self, records: list[dict]) -> dict:
        if not records or not all("baseline" in r for r in records):
            return {}
        return self.aggregate([r["baseline"] for r in records])
