"""ReasonSeg protocol (LISA, reasoning segmentation of images): a UnitProtocol over LISA's gIoU /
cIoU (metrics/units/lisa_iou.py) with breakdowns by query kind, level and category. References and
what each mode reproduces: docs/benchmarks/reasonseg.md."""
from __future__ import annotations

from rvt_bench.metrics.protocols.reasonseg_segzero import LEFT_OUT, SegZeroIoU
from rvt_bench.metrics.protocols.units import UnitProtocol
from rvt_bench.metrics.units.lisa_iou import LisaIoU


class ReasonSegProtocol(UnitProtocol):
    """gIoU and cIoU as LISA; breakdown by is_sentence (short "false" / long "true" query), level
    and category when the samples' meta has them.

    mode: "reference" (LISA's float32 arithmetic, default) or "textbook" (float64).
    variant: None (LISA's rule, default) or a name of `variants`: "segzero" = Seg-Zero's and
    VisionReasoner's scripts (metrics/protocols/reasonseg_segzero.py: ignore regions count as
    target, empty-union samples left out, gIoU the plain mean of I / U, no cIoU; the samples left
    out in aggregate "excluded").
    Raises ValueError for an unknown mode or variant.

    score(sample, pred): header + "I", "U", "target" (pixel counts after ignore removal),
    "giou_term" (the reference's float32 per-sample term) and "iou" (textbook I/U, 1.0 when U == 0).
    Raises DatasetFormatError when the sample is not a single frame with a GT mask entry;
    AdapterError when the prediction's frame count or mask size differs from the sample's.
    aggregate(records): metrics "gIoU", "cIoU" in [0, 1]; breakdown "is_sentence" ("false" short,
    "true" long query), "level", "category" (each present, {} when no sample has the key), each
    group {"gIoU", "cIoU", "n"}; "n"; "baseline_empty": gIoU and cIoU of an empty prediction on
    every sample; "warnings": samples with an empty GT (after ignore removal), more than
    base.EMPTY_GT_WARN of them, a gIoU equal to the baseline's. Empty records -> no metrics.
    """

    name = "reasonseg"
    headline = ["gIoU", "cIoU"]
    meta_keys = ("is_sentence", "level", "category")
    # breakdown values as LISA names them (report.html): a sentence query is "long", a phrase "short"
    group_names = {"is_sentence": {"false": "short query", "true": "long query"}}
    unit_type = LisaIoU
    # named variants a paper scored under (dataset.protocol.variant=<name>; the benchmark's YAML
    # `variants` describes each): name -> its unit; None (default) is unit_type, LISA's rule
    variants: dict = {"segzero": SegZeroIoU}

    def variant_label(self) -> str:
        """The named variant this run is scored under ("segzero"), "" for LISA's rule."""
        return self.variant or ""

    def __init__(self, mode: str = "reference", variant: str | None = None):
        if variant is not None and variant not in self.variants:
            raise ValueError(f"{type(self).name} protocol: variant must be null (the reference's rule) or one of "
                             f"{sorted(self.variants)}, got {variant!r}")
        self.variant = variant
        self.unit = (self.variants[variant] if variant else self.unit_type)(mode, type(self).name)
        self.mode = self.unit.mode
        headline = type(self).headline if variant is None else ["gIoU"]  # Seg-Zero's scripts print no cIoU
        # the gIoU alone is checked against the baseline, and samples are called "samples", as before units
        super().__init__([self.unit], name=type(self).name, headline=headline,
                         meta_keys=type(self).meta_keys, what="samples", baseline_keys=type(self).headline[:1],
                         empty_breakdowns=True)

    def aggregate(self, records: list) -> dict:
        out = super().aggregate(records)
        left_out = self.unit.left_out(records) if isinstance(self.unit, SegZeroIoU) else 0
        if left_out:
            out["excluded"] = {LEFT_OUT: left_out}
        return out
