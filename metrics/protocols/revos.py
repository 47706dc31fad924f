"""ReVOS protocol, following VISA `tools/eval_revos.py`: J, F (metrics/units/video_jf.py), A and R
per expression, referring / reasoning / overall as VISA prints them. The reference, each option
(mode, variant, failed) and the warnings: docs/benchmarks/revos.md.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import numpy as np

from rvt_bench.core.masks import area, decode_box
from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import AdapterError, DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Estimator, Found, stratum
from rvt_bench.metrics.masks import DAVIS_BOUND_TH
from rvt_bench.metrics.protocols.base import Protocol, baseline_warnings, empty_gt_warnings, group_by, record_header
from rvt_bench.metrics.units.base import CORRECT_IOU, check_mode
from rvt_bench.metrics.units.rle import predicted_masks
from rvt_bench.metrics.units.video_jf import FrameCrop, empty_frame_jf, frame_crops, frame_jf, gt_mask_list, mean

log = logging.getLogger(__name__)

TYPES = {0: "referring", 1: "reasoning", 2: "no_target"}
SCORED_TYPES = (0, 1)


VARIANTS = ("visa", "binarized")
FAILED = ("zero", "empty")
METRICS = ("J", "F", "A", "R")


def visa_percent(x: float) -> np.float64:
    """One expression's value as VISA keeps it: round(100 * x, 2) on a numpy float64 (numpy's
    rounding), in percent. VISA averages these percentages and prints the means; mode="reference"
    divides its means by 100 (ReVOSProtocol._fraction), so averaging happens in percent."""
    return round(100 * np.float64(x), 2)


@dataclass
class ReVOSValues(UnitValues):
    """One expression as VISA scores it (ReVOSProtocol.score): type_id; J, F, A, R = means over
    frames (float64, unrounded; R None without a foreground, A None in records older than it);
    jf ("J&F") = (J + F) / 2; frames = {"I", "U", "J", "F", "A"(, "R")} per frame (I, U pixel
    counts of the binarised masks; {} when zeroed); gt_empty = the GT is empty in every frame;
    nonbinary = the prediction holds pixel values other than 0/1; zeroed = a failed prediction
    scored 0; baseline = {"J", "F", "A"(, "R")} of an empty prediction."""

    kind = "revos"
    type_id: int
    J: float
    F: float
    jf: float = field(metadata={"key": "J&F"})
    frames: dict[str, list]
    A: float | None = None
    R: float | None = None
    gt_empty: bool | None = None
    nonbinary: bool | None = None
    zeroed: bool | None = None
    baseline: dict[str, float] | None = None

    def correct(self) -> bool:
        return self.J > CORRECT_IOU

    def sample_score(self) -> float:
        return self.jf


class ReVOSProtocol(Protocol):
    """J, F, J&F, A, R per expression; referring / reasoning / overall as VISA; breakdown by type,
    level and category (the last two when the samples' meta has them).

    mode: "reference" (VISA's per-expression rounding, default) or "textbook" (no rounding).
    variant: "visa" (A and R on the prediction's pixel values, default) or "binarized" (VISA's own
        A and R on the prediction made 0/1, i.e. on a 0/1 index PNG of the same mask, with the GT VISA
        builds: the uint8 sum of the expression's annos, 2 where two overlap; metric keys
        "A[binarized]", "R[binarized]"). On 0/1 PNGs both variants give the same numbers.
    failed: "zero" (a failed prediction scores 0 for J, F, A, R, as VISA; default) or "empty"
        (scored as an empty mask; every metric key gets "[failed-empty]").
    bound_th: F's boundary tolerance (fraction of the frame diagonal), davis2017's 0.008.
    default_type_id: type_id for samples whose meta lacks one; None (default) makes that an error.
    Raises ValueError for an unknown mode, variant or failed.
    """

    name = "revos"
    version = 2  # 2: variant="binarized" is VISA's A and R on 0/1 predictions (1 binarised the GT as well)
    meta_keys = ("type_id", "level", "category")
    # breakdown values as the benchmark names them (report.html); the "type" breakdown is by type_id
    group_names = {"type": {"0": "referring", "1": "reasoning", "2": "no-target"}}

    def __init__(self, mode: str = "reference", bound_th: float = DAVIS_BOUND_TH, default_type_id: int | None = None,
                 variant: str = "visa", failed: str = "zero"):
        self.mode = check_mode(mode, self.name)
        if variant not in VARIANTS:
            raise ValueError(f"revos protocol: variant must be one of {VARIANTS}, got {variant!r}")
        if failed not in FAILED:
            raise ValueError(f"revos protocol: failed must be one of {FAILED}, got {failed!r}")
        self.variant, self.failed = variant, failed
        self.bound_th = float(bound_th)
        self.default_type_id = default_type_id
        self.headline = [self.key("J&F"), self.key("J"), self.key("F")]

    def key(self, metric: str) -> str:
        """The published name of `metric` under this protocol's options, e.g. "A[binarized]"."""
        tags = []
        if metric in ("A", "R") and self.variant == "binarized":
            tags.append("binarized")
        if self.failed == "empty":
            tags.append("failed-empty")
        return metric + "".join(f"[{t}]" for t in tags)

    def variant_label(self) -> str:
        """"failed=empty" (its headline is not VISA's, which scores a failure 0), else "" (the
        binarized A and R are marked not comparable on their own)."""
        return "failed=empty" if self.failed == "empty" else ""

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        """Record: header + ReVOSValues (R only when sample.target.foreground is set).

        Raises DatasetFormatError when the sample has no type_id (and no default) or no GT masks;
        AdapterError when the prediction's frame count or mask size differs from the sample's.
        """
        type_id = sample.meta.get("type_id", self.default_type_id)
        if type_id not in TYPES:
            raise DatasetFormatError(
                f"sample {sample.id!r}: ReVOS protocol needs meta['type_id'] in {sorted(TYPES)}, got {type_id!r}"
            )
        gt_masks = gt_mask_list(sample)
        foreground = sample.target.foreground
        if foreground is not None and len(foreground) != sample.num_frames:
            raise DatasetFormatError(
                f"sample {sample.id!r}: expected one foreground entry per frame ({sample.num_frames}), got {len(foreground)}"
            )
        zeroed = pred.error is not None and self.failed == "zero"
        pred_masks = [None] * sample.num_frames if zeroed else predicted_masks(sample, pred)
        values = _pixel_values(pred, sample.num_frames) if not zeroed else [None] * sample.num_frames
        tracks = _anno_tracks(sample)
        keys = METRICS if foreground is not None else METRICS[:3]
        frames: dict[str, list] = {"I": [], "U": [], **{k: [] for k in keys}}
        base: dict[str, list] = {k: [] for k in keys}
        counts: dict[int, np.ndarray] = {}  # VISA's summed GT of the frames where two annos meet

        def gt_crop(k: int, box: tuple[int, int, int, int]) -> np.ndarray | None:
            count = _gt_count(tracks, k, box)
            if count is None:
                return None
            counts[k] = count
            return count != 0

        # the one per-frame J/F loop (metrics/units/video_jf.py); A and R on the same crops
        for crop in frame_crops(sample, gt_masks, pred_masks, gt_crop):
            row = frame_jf(crop, self.bound_th)
            empty = empty_frame_jf(crop)
            if crop is None:  # both empty: A = R = 1 in the reference
                row.update(A=1.0, R=1.0)
                empty.update(A=1.0, R=1.0)
            else:
                k = crop.index
                gt_count = counts.pop(k, None)
                gt_count = crop.gt.view(np.uint8) if gt_count is None else gt_count
                pr_values = _values(values[k], crop.pred, sample, k, crop.box)
                fg_area = area(foreground[k]) if foreground is not None else 0
                row.update(self._accuracy_robustness(crop, gt_count, pr_values, fg_area))
                n = crop.shape[0] * crop.shape[1]
                empty.update(A=(n - int(np.count_nonzero(gt_count))) / n, R=1.0)  # no false positive
            for key in frames:
                frames[key].append(row[key])
            for key in keys:
                base[key].append(empty[key])
        record = record_header(sample, pred, self.meta_keys)
        record.meta["type_id"] = type_id
        nonbinary = any(_is_nonbinary(v) for v in values)
        if zeroed:
            means = {key: 0.0 for key in keys}
            frames = {}
        else:
            # np.mean over a float64 array, as the reference's `db_eval_iou(...).mean()` (pairwise sum)
            means = {key: mean(frames[key]) for key in keys}
        record.add(ReVOSValues(type_id, means["J"], means["F"], (means["J"] + means["F"]) / 2, frames, means["A"],
                               means.get("R"), all(m is None for m in gt_masks), nonbinary, zeroed,
                               {key: mean(base[key]) for key in keys}))
        return record

    def _accuracy_robustness(self, crop: FrameCrop, gt_count: np.ndarray, pr_values: np.ndarray,
                             fg_area: int) -> dict:
        """A and R of one frame from its J/F row (I, U) and crops: GT counts and predicted pixel values
        as uint8 inside crop.box; outside it both masks are background."""
        n = crop.shape[0] * crop.shape[1]
        if self.variant == "binarized":  # VISA's functions on a 0/1 index PNG of the same mask
            pr_values = crop.pred.view(np.uint8)
        a = (n - int(np.count_nonzero(gt_count != pr_values))) / n  # VISA: np.mean(gt_mask == pred_mask)
        # VISA: ((1 - gt_mask) * pred_mask).sum(), uint8 products (a GT pixel of 2 gives 255 per predicted pixel)
        neg = int(((1 - gt_count) * pr_values).sum(dtype=np.uint64))
        return {"A": a, "R": r2vos_robustness(neg, fg_area)}

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        """metrics: "J&F", "J", "F", "A", "R" (overall; named by `key`), "referring/J", ...,
        "reasoning/...". Fractions in [0, 1]; R only when every scored record has it.
        breakdown: "type" ("0", "1", "2"), "level" and "category" (type 2 excluded, as from the
        headline), each group {"J", "F", "J&F", "A"(, "R"), "n"}; "n";
        "baseline_empty": the same metrics for an empty prediction on every sample; "warnings": list
        of one-line strings (see the module docstring); "failed_zero": ids of failed expressions
        scored 0; "excluded": {"no-target expressions": count} when the headline leaves some out;
        "not_comparable": {metric key: why, and the comparable variant} (A and R on 0/255 PNGs).
        """
        records = sorted(records, key=lambda r: r.sample_id)
        scored = [r for r in records if _v(r).type_id in SCORED_TYPES]
        metrics, warnings = self._overall(records)
        baseline, _ = self._overall([_as_baseline(r) for r in records if _v(r).baseline is not None])
        breakdown = {
            "type": {key: self._group(group) for key, group in group_by(records, "type_id").items()},
            "level": {key: self._group(group) for key, group in group_by(scored, "level").items()},
            "category": {key: self._group(group) for key, group in group_by(scored, "category").items()},
        }
        warnings += self._warnings(scored, metrics, baseline)
        not_comparable = self._not_comparable(scored, metrics)
        for w in warnings:
            log.warning("ReVOS: %s", w)
        out = {"metrics": metrics, "breakdown": breakdown, "n": len(scored), "baseline_empty": baseline,
               "warnings": warnings, "failed_zero": [r.sample_id for r in records if _v(r).zeroed]}
        if not_comparable:  # marked in every table that shows them (leaderboards/tables.py)
            out["not_comparable"] = not_comparable
        if len(scored) < len(records):  # what the headline leaves out (a leaderboard row's `excluded`)
            out["excluded"] = {"no-target expressions": len(records) - len(scored)}
        return out

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """Overall and per-type J&F, J, F, A, R (their `key` names): the mean over the scored types
        (one stratum each) of the mean over the type's expressions of the value VISA averages
        (`_expression_value`, as a fraction), so the point value is the reported one to rounding."""
        types = {TYPES[t]: (t,) for t in SCORED_TYPES}
        prefix, _, name = key.rpartition("/")
        if prefix and prefix not in types:
            return f"no estimator for ReVOS metric {key!r}"
        metric = {self.key(m): m for m in ("J&F", *METRICS)}.get(name)
        if metric is None:
            return f"no estimator for ReVOS metric {key!r}"

        def value(r: ScoreRecord, m: str) -> float:
            found = getattr(_v(r), m)
            if found is None:
                raise KeyError(m)
            return float(self._fraction(self._expression_value(found)))

        def num(r: ScoreRecord) -> float:
            return (value(r, "J") + value(r, "F")) / 2 if metric == "J&F" else value(r, metric)

        chosen = types[prefix] if prefix else SCORED_TYPES
        try:
            strata = [stratum(g, num) for t in chosen if (g := [r for r in records if _v(r).type_id == t])]
        except KeyError as exc:
            return f"records lack {exc}"
        return Estimator(key, strata) if strata else "no scored expressions"

    def _overall(self, records: list[ScoreRecord]) -> tuple[dict[str, float], list[str]]:
        scored = [r for r in records if _v(r).type_id in SCORED_TYPES]
        keys = self._keys(scored)
        per_type: dict[str, dict] = {}
        for type_id in SCORED_TYPES:
            group = [r for r in records if _v(r).type_id == type_id]
            if group:
                per_type[TYPES[type_id]] = self._means(group, keys)
        metrics: dict[str, float] = {}
        warnings = []
        if per_type:
            if len(per_type) < len(SCORED_TYPES):
                warnings.append(f"only {list(per_type)} expressions present: overall = that type alone "
                                "(VISA's eval_revos.py prints NaN for the absent type and for overall)")
            # VISA: overall = (referring + reasoning) / 2, in its own units (percent), per metric
            overall = {k: sum(m[k] for m in per_type.values()) / len(per_type) for k in ("J&F", *keys)}
            for prefix, means in [("", overall), *((f"{t}/", m) for t, m in per_type.items())]:
                metrics.update({f"{prefix}{self.key(k)}": self._fraction(means[k]) for k in ("J&F", *keys)})
        return metrics, warnings

    def _warnings(self, scored: list[ScoreRecord], metrics: dict, baseline: dict) -> list[str]:
        out = empty_gt_warnings([r.sample_id for r in scored if _v(r).gt_empty], len(scored), "expressions")
        nonbinary = [r.sample_id for r in scored if _v(r).nonbinary]
        if nonbinary and self.variant == "visa":
            out.append(f"{len(nonbinary)} expressions' predictions hold pixel values other than 0/1 (e.g. 0/255 PNGs): "
                       "VISA's A and R on them are not comparable to published ones (VISA's were computed on 0/1 "
                       "index PNGs); dataset.protocol.variant=binarized gives VISA's A and R on the same masks as "
                       "0/1 PNGs (A[binarized], R[binarized]), comparable to published ones")
        return out + baseline_warnings(metrics, baseline, [self.key("J&F")])

    def _not_comparable(self, scored: list[ScoreRecord], metrics: dict) -> dict[str, str]:
        """{metric key: why it is not comparable to published values and which variant is}: VISA's A
        and R (overall and per type) on predictions with pixel values other than 0/1 (the warning
        of `_warnings`); {} otherwise."""
        if self.variant != "visa" or not any(_v(r).nonbinary for r in scored):
            return {}
        out = {}
        for prefix in ("", *(f"{TYPES[t]}/" for t in SCORED_TYPES)):
            for metric in ("A", "R"):
                key = f"{prefix}{self.key(metric)}"
                if key in metrics:
                    out[key] = (f"computed on pixel values other than 0/1 (e.g. 0/255 PNGs), unlike the published "
                                f"ones; comparable: {prefix}{metric}[binarized] (dataset.protocol.variant=binarized)")
        return out

    def _keys(self, records: list[ScoreRecord]) -> tuple[str, ...]:
        """Per-expression metrics every record has (records of older runs may lack A or R)."""
        return tuple(k for k in METRICS if all(getattr(_v(r), k) is not None for r in records))

    def _expression_value(self, value: float) -> float:
        """What VISA averages of one expression's value: its rounded percent (reference,
        `visa_percent`) or the unrounded fraction (textbook)."""
        return visa_percent(value) if self.mode == "reference" else value

    def _means(self, group: list[ScoreRecord], keys: tuple[str, ...] = ("J", "F")) -> dict[str, float]:
        """{"J", "F", "J&F", ...keys} over the expressions of a group, as VISA averages one type: in
        percent of per-expression values rounded to 2 decimals (reference) or as unrounded fractions."""
        out = {}
        for key in keys:
            # VISA: np.array(...).mean() of its per-expression values
            out[key] = float(np.mean(np.asarray([self._expression_value(getattr(_v(r), key)) for r in group],
                                                dtype=np.float64)))
        out["J&F"] = float((np.float64(out["J"]) + np.float64(out["F"])) / 2)
        return out

    def _fraction(self, value: float) -> float:
        """A value in VISA's units (percent in mode="reference") as a fraction."""
        return value / 100 if self.mode == "reference" else value

    def _group(self, group: list[ScoreRecord]) -> dict:
        keys = self._keys(group)
        means = self._means(group, keys)
        return {**{self.key(k): self._fraction(means[k]) for k in ("J&F", *keys)}, "n": len(group)}


def _v(record: ScoreRecord) -> ReVOSValues:
    return record.of(ReVOSValues)


def _as_baseline(record: ScoreRecord) -> ScoreRecord:
    """The record with its values replaced by its empty-prediction baseline's."""
    v = _v(record)
    empty = replace(v, **{k: v.baseline[k] for k in METRICS if k in v.baseline}, jf=0.0)
    return replace(record, values={**record.values, ReVOSValues.kind: empty})


def r2vos_robustness(false_positives: int, foreground_area: int) -> float:
    """R2VOS robustness of one frame: max(1 - neg / (|foreground| + 1e-6), 0.0), float64.

    false_positives: VISA's neg = sum((1 - gt) * pred) over the frame (uint8 products of pixel
    values; the count of predicted pixels outside the GT for binary masks); foreground_area: pixels
    of the union of every annotated object of the frame. Reference: VISA
    `tools/metrics.py::get_r2vos_robustness`.
    """
    return max(1.0 - false_positives / (foreground_area + 1e-6), 0.0)


def _anno_tracks(sample: Sample) -> list[list] | None:
    """Per anno id of the expression, its per-frame RLEs (from sample.annotations), when the
    expression has more than one anno id and all are there; None otherwise (GT = the union)."""
    anno_ids = [str(a) for a in sample.meta.get("anno_id") or []]
    if len(anno_ids) < 2 or not sample.annotations:
        return None
    by_id = {str(a.id): a.masks for a in sample.annotations}
    if not all(a in by_id and by_id[a] is not None for a in anno_ids):
        return None
    return [by_id[a] for a in anno_ids]


def _gt_count(tracks: list[list] | None, frame: int, box: tuple[int, int, int, int]) -> np.ndarray | None:
    """VISA's GT of one frame inside box: the uint8 sum of the expression's anno masks (2 where two
    overlap); None when fewer than two annos are present there (the GT is then the union, 0/1)."""
    present = [t[frame] for t in tracks if frame < len(t) and t[frame] is not None] if tracks else []
    if len(present) < 2:
        return None
    total = np.zeros((box[1] - box[0], box[3] - box[2]), dtype=np.uint8)
    for rle in present:
        total += decode_box(rle, box).view(np.uint8)
    return total


def _pixel_values(pred: Prediction, n: int) -> list:
    """Per frame the prediction's pixel-value record (adapters/precomputed.py, trace["pixel_values"]):
    an int = the one nonzero value of the frame's PNG, or [[value, RLE], ...]; None = a model's
    mask (0/1)."""
    trace = pred.trace if isinstance(pred.trace, dict) else {}
    values = trace.get("pixel_values")
    if not isinstance(values, list) or len(values) != n:
        return [None] * n
    return values


def _is_nonbinary(v) -> bool:
    if v is None:
        return False
    if isinstance(v, int):
        return v not in (0, 1)
    return any(int(value) != 1 for value, _ in v)


def _values(v, mask: np.ndarray, sample: Sample, frame: int, box: tuple[int, int, int, int]) -> np.ndarray:
    """uint8 pixel values of one predicted frame inside box (see _pixel_values)."""
    if v is None or v == 1 or v == 0:
        return mask.view(np.uint8)
    if isinstance(v, int):
        return mask.view(np.uint8) * np.uint8(v)
    out = np.zeros(mask.shape, dtype=np.uint8)
    for value, rle in v:
        try:
            level = decode_box(rle, box)
        except (DatasetFormatError, IndexError, ValueError) as exc:
            raise AdapterError(f"sample {sample.id!r} frame {frame}: pixel-value mask {value} is not a valid RLE: {exc}") from exc
        out[level] = int(value)
    return out


