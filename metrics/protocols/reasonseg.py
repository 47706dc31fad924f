"""ReasonSeg protocol (LISA, reasoning segmentation of images): LISA's gIoU / cIoU
(metrics/units/lisa_iou.py) with breakdowns by query kind, level and category. References and what
each mode reproduces: docs/benchmarks/reasonseg.md."""
from __future__ import annotations

import logging

from core.types import Prediction, Sample
from metrics.protocols.base import Protocol, baseline_warnings, empty_gt_warnings, group_by, record_header
from metrics.units.lisa_iou import LisaIoU

log = logging.getLogger(__name__)


class ReasonSegProtocol(Protocol):
    """gIoU and cIoU as LISA; breakdown by is_sentence (short "false" / long "true" query), level
    and category when the samples' meta has them.

    mode: "reference" (LISA's float32 arithmetic, default) or "textbook" (float64).
    Raises ValueError for an unknown mode.
    """

    name = "reasonseg"
    headline = ["gIoU", "cIoU"]
    meta_keys = ("is_sentence", "level", "category")
    unit_type = LisaIoU

    def __init__(self, mode: str = "reference"):
        self.unit = self.unit_type(mode, self.name)
        self.mode = self.unit.mode

    def score(self, sample: Sample, pred: Prediction) -> dict:
        """Record: header + "I", "U", "target" (pixel counts after ignore removal), "giou_term"
        (the reference's float32 per-sample term) and "iou" (textbook I/U, 1.0 when U == 0).

        Raises DatasetFormatError when the sample is not a single frame with a GT mask entry;
        AdapterError when the prediction's frame count or mask size differs from the sample's.
        """
        record = record_header(sample, pred, self.meta_keys)
        record.update(self.unit.score(sample, pred))
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
        metrics = self.unit.aggregate(records) if records else {}
        baseline = self.unit.baseline(records)
        warnings = (empty_gt_warnings([r["sample_id"] for r in records if r["target"] == 0], len(records))
                    + baseline_warnings(metrics, baseline, self.headline[:1]))
        for w in warnings:
            log.warning("%s: %s", self.name, w)
        return {"metrics": metrics, "breakdown": breakdown, "n": len(records), "baseline_empty": baseline,
                "warnings": warnings}

    def _metrics(self, group: list[dict]) -> dict:
        return {**self.unit.aggregate(group), "n": len(group)}
