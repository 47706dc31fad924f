"""LLM-Seg40K protocol: ReasonSeg's records and breakdowns with LLM-Seg's own arithmetic
(`validate_llmseg.py`: metrics/units/lisa_iou.py::LLMSegIoU). References: docs/benchmarks/llmseg40k.md."""
from __future__ import annotations

from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol
from rvt_bench.metrics.units.lisa_iou import LLMSegIoU, llmseg_ciou, llmseg_sample_iou  # noqa: F401  (public names)


class LLMSegProtocol(ReasonSegProtocol):
    """gIoU and cIoU as LLM-Seg's `validate_llmseg.py`; records as ReasonSeg's, with "giou_term" =
    LLM-Seg's float32 term; breakdown by from_dataset ("coco" / "ego_objects"), level, category.

    mode: "reference" (LLM-Seg's arithmetic, default) or "textbook" (float64).
    """

    name = "llmseg40k"
    meta_keys = ("from_dataset", "level", "category")
    unit_type = LLMSegIoU
    variants: dict = {}  # ReasonSeg's Seg-Zero rule is declared for ReasonSeg only
