"""RefCOCO / RefCOCO+ / RefCOCOg protocol: LISA's gIoU and cIoU (dvlab-research/LISA@3cb2d43
train_ds.py::validate) over every sentence of the split, the float32 arithmetic of ReasonSeg
(metrics/units/lisa_iou.py) with LISA's per-image accumulation of gIoU. The summed-polygon GT quirk
lives in the loader (rvt_bench.loaders.refcoco, ``gt``). Parity and references:
docs/benchmarks/refcoco.md."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol

ORDER_KEYS = ("image_id", "ref_index", "sent_index")  # where LISA meets a sentence (loader meta)


def lisa_image_giou(images: Sequence[Sequence[float]]) -> float:
    """LISA's gIoU over images, each the float32 terms (metrics.masks.lisa_sample_iou) of its
    sentences in LISA's order: per image the terms are added in float32, divided by their number
    n and multiplied back by n (``acc_iou / n``, ``AverageMeter.update(acc_iou, n)``), the images'
    values added in float32 in the given order, and the sum divided by float32(N + 1e-5), N = all
    sentences (``all_reduce``). Raises ValueError when there is no sentence."""
    total, count = np.float32(0.0), 0
    for terms in images:
        acc = np.float32(0.0)
        for t in terms:
            acc = np.float32(acc + np.float32(t))
        n = len(terms)
        total = np.float32(total + np.float32(np.float32(acc / np.float32(n)) * np.float32(n)))
        count += n
    if count == 0:
        raise ValueError("lisa_image_giou: no sentences to aggregate")
    return float(total / np.float32(count + 1e-5))


def lisa_image_order(rows: Sequence[tuple[int, int, object]]) -> list[object]:
    """The order LISA's ValDataset visits the images: ``list(set(image ids in ref order))``
    (REFER.getImgIds), rows = (ref_index, sent_index, image_id) of the sentences. COCO's ids are
    ints, whose set order is fixed; ids that are not all ints are sorted (deterministic, not LISA's)."""
    by_ref = sorted({(ref, image) for ref, _, image in rows}, key=lambda x: x[0])
    images = [image for _, image in by_ref]
    if not all(isinstance(i, int) for i in images):  # a str's set order changes with PYTHONHASHSEED: sorted instead
        return sorted(set(images), key=str)
    return list(set(images))


class RefCOCOProtocol(ReasonSegProtocol):
    """gIoU and cIoU as LISA validates RefCOCO/+/g; ReasonSegProtocol's records, estimators and
    baseline (its docstring), with no breakdown (every RefCOCO query is a phrase).

    mode: "reference" (LISA's float32 arithmetic, default) or "textbook" (float64).
    In reference mode, when every record holds the loader's image_id, ref_index and sent_index
    (record meta), gIoU is accumulated image by image in LISA's order (``lisa_image_giou``); else
    sentence by sentence as ReasonSeg (a float32 rounding apart). cIoU: sum I / sum U either way.
    """

    name = "refcoco"
    headline = ["cIoU", "gIoU"]  # papers print cIoU
    meta_keys = ()
    variants: dict = {}  # ReasonSeg's Seg-Zero rule is declared for ReasonSeg only

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        record = super().score(sample, pred)
        record.meta.update({k: sample.meta[k] for k in ORDER_KEYS if k in sample.meta})
        return record

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        out = super().aggregate(records)
        if records and self.mode == "reference" and all(all(k in r.meta for k in ORDER_KEYS) for r in records):
            out["metrics"]["gIoU"] = self._lisa_giou(records)
        return out

    def _lisa_giou(self, records: list[ScoreRecord]) -> float:
        rows = [(int(r.meta["ref_index"]), int(r.meta["sent_index"]), r.meta["image_id"]) for r in records]
        terms: dict[object, list[tuple[int, int, float]]] = {}
        for (ref, sent, image), r in zip(rows, records):
            terms.setdefault(image, []).append((ref, sent, self.unit.of(r).giou_term))
        return lisa_image_giou([[t for _, _, t in sorted(terms[image])] for image in lisa_image_order(rows)])
