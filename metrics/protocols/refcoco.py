"""RefCOCO / RefCOCO+ / RefCOCOg protocol: LISA's gIoU and cIoU (dvlab-research/LISA@3cb2d43
train_ds.py::validate) over every sentence of the split, the same float32 arithmetic as ReasonSeg
(metrics/units/lisa_iou.py). The summed-polygon GT quirk lives in the loader
(rvt_bench.loaders.refcoco, ``gt``). Parity and references: docs/benchmarks/refcoco.md."""
from __future__ import annotations

from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol


class RefCOCOProtocol(ReasonSegProtocol):
    """gIoU and cIoU as LISA validates RefCOCO/+/g; ReasonSegProtocol's records and aggregate
    (its docstring), with no breakdown (every RefCOCO query is a phrase).

    mode: "reference" (LISA's float32 arithmetic, default) or "textbook" (float64).
    LISA's validate adds the terms of one image's sentences before its running sum, we add them
    one sentence at a time: gIoU can differ by float32 rounding only (at most a few 2^-24 per
    sample; cIoU is identical), measured on the parity fixture (docs/benchmarks/refcoco.md).
    """

    name = "refcoco"
    headline = ["cIoU", "gIoU"]  # papers print cIoU
    meta_keys = ()
