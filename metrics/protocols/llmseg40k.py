"""LLM-Seg40K protocol, following LLM-Seg's own evaluation `validate_llmseg.py::validate`.

Reference: github.com/wangjunchi/LLMSeg @ 65147a9 (`validate_llmseg.py::validate`, with
`utils/utils.py::intersectionAndUnionGPU` and `AverageMeter`, which are LISA's).

What the reference does, and this protocol with it (mode="reference", the default):
- Per sample: I, U of the foreground class (`intersectionAndUnionGPU(pred.int(), gt.int(), 2)`,
  whose default ignore_index 255 is removed from both masks; LLM-Seg40K's masks are binary).
- Per-sample gIoU term: float32 I / (U + 1e-8), plus 1.0 when U == 0. The epsilon is 1e-8, not
  LISA's 1e-5: (U + 1e-8) rounds to U in float32, so the term is float32 I / U (I = 10, U = 12 gives
  0.8333333, where LISA's formula gives 0.83333266).
- gIoU = float32 running sum of the terms / float32(N + 1e-5) (`AverageMeter.all_reduce`).
- cIoU = float32(sum I) / (float32(sum U) + 1e-10) in float32. Unlike LISA's `validate`, which adds
  each sample's counts to a float32 running sum, LLM-Seg passes the integer counts to the meters
  (CUDA `histc` returns counts in the input's int32 dtype), so the sums are exact integers, rounded to
  float32 once by `all_reduce`.
Samples are summed in sample_id order (LLM-Seg sums in its loader's order; the float32 gIoU may then
differ in the last bits, < 1e-6). mode="textbook" is the float64 definition (as ReasonSeg's).
"""
from __future__ import annotations

import numpy as np

from metrics.masks import giou
from metrics.protocols.reasonseg import ReasonSegProtocol

_F32_EPS_LLMSEG = np.float32(1e-8)


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


class LLMSegProtocol(ReasonSegProtocol):
    """gIoU and cIoU as LLM-Seg's `validate_llmseg.py` (module docstring); records as ReasonSeg's,
    with "giou_term" = LLM-Seg's float32 term.

    mode: "reference" (LLM-Seg's arithmetic, default) or "textbook" (float64).
    """

    name = "llmseg40k"
    meta_keys = ("from_dataset", "level", "category")

    def score(self, sample, pred) -> dict:
        record = super().score(sample, pred)
        record["giou_term"] = llmseg_sample_iou(record["I"], record["U"])
        return record

    def _metrics(self, group: list[dict]) -> dict:
        if self.mode != "reference":
            return super()._metrics(group)
        inters, unions = [r["I"] for r in group], [r["U"] for r in group]
        terms = [llmseg_sample_iou(i, u) for i, u in zip(inters, unions)]
        return {"gIoU": giou(terms, "reference"), "cIoU": llmseg_ciou(inters, unions), "n": len(group)}
