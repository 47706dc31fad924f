"""Ref-DAVIS17 protocol, ReferFormer's (wjn922/ReferFormer@06fc218f scripts/dist_test_davis.sh):
davis2017-evaluation's ``evaluation_method.py --task unsupervised``
(davisvideochallenge/davis2017-evaluation@ac7c43fc) run once per annotator set anno_0..anno_3 on
ReferFormer's label maps, then the four J, F, J&F averaged.

Per annotator set and video (davis2017 ``_evaluate_unsupervised``): the proposals are labels
1..M, M = the highest label in the set's PNGs over the video's frames (a label in 1..M with no
pixel is an empty proposal), padded with empty proposals up to the number of GT objects; for each
(proposal, GT object) J and F per frame over **every** frame (the unsupervised task keeps the first
and last), void (255) pixels taken out of both masks, averaged over frames; the matching maximises
the sum of (mean J + mean F) / 2 (scipy's ``linear_sum_assignment``, the reference's own call: on a
tie its choice of pair moves J against F); each GT object gets its matched
proposal's mean J and F. Per set: J-Mean, F-Mean = means over all its GT objects (every video),
J&F-Mean = (J-Mean + F-Mean) / 2. Reported: the mean over the sets of each.
Quirks and what a failure counts as: docs/benchmarks/ref_davis17.md.
"""
from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rvt_bench.core import masks
from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Estimator, Found, stratum
from rvt_bench.metrics.masks import DAVIS_BOUND_TH, jf_counts
from rvt_bench.metrics.protocols.base import Protocol, record_header

log = logging.getLogger(__name__)

MAX_PROPOSALS = 20  # davis2017 _evaluate_unsupervised(max_n_proposals=20): more and it exits
PALETTE_LABELS = 16  # DAVIS palette entries 1..16 have distinct OpenCV gray values (17 -> 75 as 2)
PLAIN_GRAY_LABELS = 13  # plain gray PNGs: values 1..13 are below every palette gray (min 14, label 4)


def davis_palette() -> list[int]:
    """The DAVIS (PASCAL VOC) palette ReferFormer copies from valid/Annotations/blackswan/00000.png:
    256 RGB entries flattened, entry k's bits spread over R, G, B."""
    out = []
    for k in range(256):
        r = g = b = 0
        c = k
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        out += [r, g, b]
    return out


@lru_cache(maxsize=1)
def gray_to_label() -> dict[int, int]:
    """{gray value: label} for a label-map PNG read as cv2 IMREAD_GRAYSCALE (the precomputed
    ``read: gray`` layout): a DAVIS-palette PNG's entry k (k <= 16) becomes OpenCV's gray value of
    its colour, which maps back to k; a plain gray PNG's value v <= 13 is label v. Values of other
    palettes or labels are not in it."""
    import cv2
    from PIL import Image

    img = Image.fromarray(np.arange(PALETTE_LABELS + 1, dtype=np.uint8)[None, :], mode="P")
    img.putpalette(davis_palette())
    buf = io.BytesIO()
    img.save(buf, "PNG")
    gray = cv2.imdecode(np.frombuffer(buf.getvalue(), np.uint8), cv2.IMREAD_GRAYSCALE)[0]
    out = {v: v for v in range(1, PLAIN_GRAY_LABELS + 1)}
    for k in range(1, PALETTE_LABELS + 1):
        out[int(gray[k])] = k
    assert len(out) == PLAIN_GRAY_LABELS + PALETTE_LABELS, "palette gray values collide"
    return out


@dataclass
class ReferFormerValues(UnitValues):
    """One expression = one proposal of its annotator set's label map, against every GT object.

    label: its value in the label map; J, F: per GT object g (1..n), the mean over frames of J and F
    of its proposal vs object g (float64); J_empty, F_empty: the same for an empty proposal;
    max_label: the highest label its label map holds over the frames (0: none; for binary masks,
    its own label when its mask is not empty); extra: [[label, J, F], ...] for labels above the
    set's object count found in its map (scored by object 1 only)."""

    kind = "davis_unsupervised"
    label: int
    J: list
    F: list
    J_empty: list
    F_empty: list
    max_label: int
    extra: list

    def correct(self) -> bool:
        return bool(self.J) and max(self.J) > 0.5

    def sample_score(self) -> float:
        return max(((j + f) / 2 for j, f in zip(self.J, self.F)), default=0.0)


def _proposals(sample: Sample, pred: Prediction) -> tuple[dict[int, list], int]:
    """({label: per-frame RLE or None}, max label) of the prediction: from a gray-read label map
    (trace["pixel_values"]) every label present, else the binary masks as the sample's own label.
    Raises AdapterError for a gray value that is no label, a label above 20 or a frame-count mismatch."""
    n = sample.num_frames
    own = int(sample.meta["object"])
    if pred.error is not None or pred.masks is None:
        return {}, 0
    if len(pred.masks) != n:
        raise AdapterError(f"sample {sample.id!r}: prediction has {len(pred.masks)} masks, the sample has {n} frames")
    values = (pred.trace or {}).get("pixel_values") if isinstance(pred.trace, dict) else None
    if values is None:
        found = any(m is not None and masks.area(m) > 0 for m in pred.masks)
        return ({own: list(pred.masks)}, own) if found else ({}, 0)
    if len(values) != n:
        raise AdapterError(f"sample {sample.id!r}: {len(values)} pixel_values for {n} frames")
    lut = gray_to_label()
    out: dict[int, list] = {}
    for t, (value, rle) in enumerate(zip(values, pred.masks)):
        levels = [] if value == 0 else ([[value, rle]] if isinstance(value, int) else value)
        for gray, level_rle in levels:
            label = lut.get(int(gray))
            if label is None:
                raise AdapterError(f"sample {sample.id!r}: frame {t} holds gray value {gray}, not a DAVIS-palette label "
                                   f"1..{PALETTE_LABELS} nor a plain gray label 1..{PLAIN_GRAY_LABELS} "
                                   "(docs/benchmarks/ref_davis17.md)")
            out.setdefault(label, [None] * n)[t] = level_rle
    return out, max(out, default=0)


def _jf_means(sample: Sample, proposal: list | None, objects: list[list], void: list) -> tuple[list, list]:
    """Per GT object, (mean J, mean F) over frames of `proposal` (per-frame RLE or None; None = empty),
    void pixels removed from both masks, as davis2017 db_eval_iou / db_eval_boundary with void."""
    js, fs = [[] for _ in objects], [[] for _ in objects]
    shape = None
    for t in range(sample.num_frames):
        void_t = masks.decode(void[t]) if void[t] is not None else None
        pred_t = masks.decode(proposal[t]) if proposal is not None and proposal[t] is not None else None
        for g, obj in enumerate(objects):
            gt_t = masks.decode(obj[t]) if obj[t] is not None else None
            present = [m for m in (gt_t, pred_t, void_t) if m is not None]
            if present:
                shape = present[0].shape
                if any(m.shape != shape for m in present):
                    raise AdapterError(f"sample {sample.id!r}: frame {t}: prediction, GT and void masks of "
                                       f"different sizes {[list(m.shape) for m in present]}")
            if shape is None:
                shape = (1, 1)
            gt = gt_t if gt_t is not None else np.zeros(shape, bool)
            pr = pred_t if pred_t is not None else np.zeros(shape, bool)
            if void_t is not None:
                gt, pr = gt & ~void_t, pr & ~void_t
            inter, union, f = jf_counts(gt, pr, DAVIS_BOUND_TH)
            js[g].append(1.0 if union == 0 else inter / union)
            fs[g].append(f)
    return [float(np.mean(np.asarray(j, np.float64))) for j in js], [float(np.mean(np.asarray(f, np.float64))) for f in fs]


class RefDAVIS17ReferFormerProtocol(Protocol):
    """J, F, J&F as ReferFormer's four davis2017-evaluation unsupervised runs, averaged (module docstring).

    score(sample, pred): header (meta video, annotator, object) + ReferFormerValues. A failed
    expression (no PNG, unreadable, wrong size; davis2017 would exit) is an empty proposal and is
    named in a warning. aggregate(records): {"metrics": {"J&F", "J", "F"} in [0, 1] (the means over
    annotator sets of J&F-Mean, J-Mean, F-Mean), "breakdown": {"annotator": {"anno_<k>": {"J&F",
    "J", "F", "n" (GT objects)}}}, "n" (expressions), "objects" (GT objects per set), "averages"
    (what the headline means are over: {"metrics", "n" (GT objects summed over the sets), "of"}),
    "baseline_empty" (J&F, J, F with every proposal empty: each GT object's J and F against an empty
    mask), "warnings"}.
    """

    name = "ref_davis17_referformer"
    headline = ["J&F", "J", "F"]

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        record = record_header(sample, pred, ("video", "annotator", "object"))
        if sample.annotations is None or sample.target.ignore is None:
            raise DatasetFormatError(f"sample {sample.id!r}: needs the video's GT objects (annotations) and void (target.ignore)")
        objects = [a.masks for a in sample.annotations]
        void = list(sample.target.ignore)
        proposals, max_label = _proposals(sample, pred)
        own = int(sample.meta["object"])
        j, f = _jf_means(sample, proposals.get(own), objects, void)
        je, fe = _jf_means(sample, None, objects, void)
        extra = []
        if own == 1:
            for label in sorted(k for k in proposals if k > int(sample.meta["objects"])):
                xj, xf = _jf_means(sample, proposals[label], objects, void)
                extra.append([label, xj, xf])
        record.add(ReferFormerValues(own, j, f, je, fe, max_label, extra))
        return record

    # --- aggregation ---------------------------------------------------------------------------

    def matched(self, records: list[ScoreRecord]) -> dict[str, list[tuple[str, str, list[tuple[float, float]]]]]:
        """{annotator set "anno_<k>": [(video, first record id, [(J, F) per GT object in davis2017's
        order]), ...] by video}: davis2017's Hungarian matching per (set, video)."""
        groups: dict[tuple[str, str], list[ScoreRecord]] = {}
        for r in sorted(records, key=lambda r: r.sample_id):
            groups.setdefault((f"anno_{r.meta.get('annotator')}", str(r.meta.get("video"))), []).append(r)
        out: dict[str, list] = {}
        for (anno, video), group in sorted(groups.items()):
            values = [r.of(ReferFormerValues) for r in group]
            n_gt = len(values[0].J_empty)
            rows = {v.label: (v.J, v.F) for v in values}
            for v in values:
                rows.update({x[0]: (x[1], x[2]) for x in v.extra})
            top = min(max(v.max_label for v in values), MAX_PROPOSALS)
            empty = (values[0].J_empty, values[0].F_empty)
            props = [rows.get(p, empty) for p in range(1, max(top, n_gt) + 1)]
            pairs: list[tuple[float, float]] = []
            if n_gt:
                jm = np.array([p[0] for p in props], np.float64)  # [proposal, GT object]
                fm = np.array([p[1] for p in props], np.float64)
                from scipy.optimize import linear_sum_assignment  # here: importing rvt_bench.metrics needs no scipy

                row, col = linear_sum_assignment(-((jm + fm) / 2))
                pairs = [(float(jm[r_, c_]), float(fm[r_, c_])) for r_, c_ in zip(row, col)]  # in proposal order, as davis2017
            out.setdefault(anno, []).append((video, group[0].sample_id, pairs))
        return out

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        records = sorted(records, key=lambda r: r.sample_id)
        if not records:
            return {"metrics": {}, "breakdown": {}, "n": 0, "warnings": []}
        per_set = {}
        for anno, videos in sorted(self.matched(records).items()):
            pairs = [p for _, _, ps in videos for p in ps]
            if not pairs:
                continue
            jm, fm = float(np.mean([p[0] for p in pairs])), float(np.mean([p[1] for p in pairs]))
            per_set[anno] = {"J&F": (jm + fm) / 2.0, "J": jm, "F": fm, "n": len(pairs)}
        metrics = {key: float(np.mean([s[key] for s in per_set.values()])) for key in self.headline} if per_set else {}
        baseline = self._baseline_empty(records)
        warnings = []
        failed = [r.sample_id for r in records if r.failed]
        if failed:
            warnings.append(f"{len(failed)} expressions failed and count as empty proposals (davis2017-evaluation would "
                            f"stop on a missing or unreadable PNG): {', '.join(failed)}")
        over = sorted({f"anno_{r.meta.get('annotator')}/{r.meta.get('video')}" for r in records
                       if r.of(ReferFormerValues).max_label > MAX_PROPOSALS})
        if over:
            warnings.append(f"labels above {MAX_PROPOSALS} (davis2017 would stop) left out in: {', '.join(over)}")
        for w in warnings:
            log.warning("%s: %s", self.name, w)
        objects = {k: v["n"] for k, v in per_set.items()}
        counts = sorted(set(objects.values()))
        each = (f"{counts[0]} in each of {len(objects)} annotator sets" if len(counts) == 1 else
                ", ".join(f"{k} {v}" for k, v in objects.items()))
        averages = {"metrics": list(self.headline), "n": sum(objects.values()),
                    "of": f"GT objects ({each}), not the {len(records)} expressions scored"}
        return {"metrics": metrics, "breakdown": {"annotator": per_set}, "n": len(records), "objects": objects,
                "averages": averages, "baseline_empty": baseline, "warnings": warnings}

    @staticmethod
    def _baseline_empty(records: list[ScoreRecord]) -> dict[str, float]:
        """J&F, J, F with every expression's proposal empty: every proposal is then the same empty mask,
        so each GT object's matched values are its own against an empty mask (J_empty, F_empty, carried
        by every record of its video); means over GT objects per set, then over sets, as the metrics."""
        per_set: dict[str, dict[str, ReferFormerValues]] = {}
        for r in records:
            per_set.setdefault(f"anno_{r.meta.get('annotator')}", {}).setdefault(str(r.meta.get("video")), r.of(ReferFormerValues))
        sets = []
        for videos in per_set.values():
            js = [j for v in videos.values() for j in v.J_empty]
            fs = [f for v in videos.values() for f in v.F_empty]
            if js:
                jm, fm = float(np.mean(js)), float(np.mean(fs))
                sets.append({"J&F": (jm + fm) / 2.0, "J": jm, "F": fm})
        return {key: float(np.mean([s[key] for s in sets])) for key in ("J&F", "J", "F")} if sets else {}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """Mean over annotator sets (strata) of sum / count of the matched GT objects' values; a
        (set, video)'s objects are carried by its first record, so the bootstrap, which resamples
        videos, keeps a video's matching whole."""
        if key not in self.headline:
            return f"no per-sample estimator for {key!r}"
        if not records:
            return "no expressions"
        pick = {"J": lambda p: p[0], "F": lambda p: p[1], "J&F": lambda p: (p[0] + p[1]) / 2.0}[key]
        strata = []
        for anno, videos in sorted(self.matched(records).items()):
            carried = {rid: ps for _, rid, ps in videos}
            group = [r for r in records if f"anno_{r.meta.get('annotator')}" == anno]
            if not any(carried.values()):
                continue
            strata.append(stratum(group, lambda r: float(sum(pick(p) for p in carried.get(r.sample_id, []))),
                                  lambda r: float(len(carried.get(r.sample_id, [])))))
        return Estimator(key, strata)
