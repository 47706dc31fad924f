"""Video J and F (davis2017-evaluation `db_eval_iou` / `f_measure`, metrics/masks.py): the one
per-frame loop of every video segmentation protocol (ReVOS adds A and R on the same crops)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import RLE, DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import Found, mean_of
from rvt_bench.metrics.masks import DAVIS_BOUND_TH, jf_counts_box, object_box
from rvt_bench.metrics.units.base import CORRECT_IOU, Unit
from rvt_bench.metrics.units.rle import Box, check_same_size, crop_checked, predicted_masks, rle_size_box


@dataclass
class FrameCrop:
    """One frame where at least one side has a mask, cut to the objects' box: outside `box` both
    masks are background. gt, pred: (y1 - y0, x1 - x0) bool crops; shape: the frame's (H, W)."""

    index: int
    shape: tuple[int, int]
    box: Box
    gt: np.ndarray
    pred: np.ndarray


def frame_box(sample: Sample, frame: int, gt: RLE | None, pred: RLE | None) -> tuple[tuple[int, int], Box]:
    """((H, W), box) of one frame: box = `rvt_bench.metrics.masks.object_box` of both masks' foreground (at
    least one pixel when both are empty), from the RLEs without decoding them. Raises AdapterError
    for a malformed predicted RLE or one whose size differs from the GT's, DatasetFormatError for a
    malformed GT RLE."""
    sizes, boxes = [], []
    for rle, what in ((gt, "ground-truth"), (pred, "predicted")):
        if rle is not None:
            size, found = rle_size_box(sample, frame, rle, what)
            sizes.append(size)
            if found is not None:
                boxes.append(found)
    if len(sizes) == 2:
        check_same_size(sample, frame, sizes[0], sizes[1])
    return sizes[0], object_box(boxes or [(0, 1, 0, 1)], sizes[0])


def frame_crops(sample: Sample, gt_masks: Sequence[RLE | None], pred_masks: Sequence[RLE | None],
                gt_crop: Callable[[int, Box], np.ndarray | None] | None = None) -> Iterator[FrameCrop | None]:
    """Per frame a FrameCrop, or None where both masks are empty (J = F = 1 there, as davis2017).

    gt_crop(frame, box): the GT crop when the caller builds it otherwise (ReVOS: the sum of its
    annotations), None to decode the GT RLE. Raises as `frame_box`."""
    for k, (gt_rle, pred_rle) in enumerate(zip(gt_masks, pred_masks)):
        if gt_rle is None and pred_rle is None:
            yield None
            continue
        shape, box = frame_box(sample, k, gt_rle, pred_rle)
        gt = gt_crop(k, box) if gt_crop is not None else None
        if gt is None:
            gt = crop_checked(sample, k, gt_rle, box, "ground-truth")
        yield FrameCrop(k, shape, box, gt, crop_checked(sample, k, pred_rle, box, "predicted"))


def frame_jf(crop: FrameCrop | None, bound_th: float = DAVIS_BOUND_TH) -> dict:
    """{"I", "U" (pixel counts), "J", "F"} of one frame (None: both empty, J = F = 1)."""
    if crop is None:
        return {"I": 0, "U": 0, "J": 1.0, "F": 1.0}
    inter, union, f = jf_counts_box(crop.gt, crop.pred, crop.box, crop.shape, bound_th)
    return {"I": inter, "U": union, "J": 1.0 if union == 0 else inter / union, "F": f}


def empty_frame_jf(crop: FrameCrop | None) -> dict:
    """{"J", "F"} of an empty prediction on the frame: 1 only where the GT is empty (F also for a
    full-frame GT, which has no boundary)."""
    if crop is None:
        return {"J": 1.0, "F": 1.0}
    n, n_gt = crop.shape[0] * crop.shape[1], int(np.count_nonzero(crop.gt))
    return {"J": 1.0 if n_gt == 0 else 0.0, "F": 1.0 if n_gt in (0, n) else 0.0}


def mean(values: Sequence[float]) -> float:
    """np.mean over a float64 array, as davis2017's `db_eval_iou(...).mean()` (pairwise sum)."""
    return float(np.mean(np.asarray(values, dtype=np.float64)))


def gt_mask_list(sample: Sample) -> list:
    """sample.target.masks, one entry (RLE or None) per frame; DatasetFormatError otherwise."""
    gt_masks = sample.target.masks
    if gt_masks is None or len(gt_masks) != sample.num_frames:
        raise DatasetFormatError(f"sample {sample.id!r}: expected one GT mask entry (RLE or None) per frame "
                                 f"({sample.num_frames}), got {None if gt_masks is None else len(gt_masks)}")
    return list(gt_masks)


@dataclass
class VideoJFValues(UnitValues):
    """One video's J and F: J, F = means over frames (float64), jf ("J&F") = (J + F) / 2,
    frames = {"I", "U", "J", "F"}: per-frame lists (I, U pixel counts), gt_empty = the GT is empty
    in every frame, baseline = {"J", "F", "J&F"} of an empty prediction."""

    kind = "video_jf"
    J: float
    F: float
    jf: float = field(metadata={"key": "J&F"})
    frames: dict[str, list]
    gt_empty: bool | None = None
    baseline: dict[str, float] | None = None

    def correct(self) -> bool:
        return self.J > CORRECT_IOU

    def sample_score(self) -> float:
        return self.jf


def jf_means(js: Sequence[float], fs: Sequence[float]) -> dict[str, float]:
    """{"J&F", "J", "F"} over samples: means of J and F (float64), J&F = (J + F) / 2."""
    j, f = mean(js), mean(fs)
    return {"J&F": (j + f) / 2, "J": j, "F": f}


class VideoJF(Unit):
    """J, F and J&F of a video, davis2017's per-frame definitions, every frame scored.

    Per sample: VideoJFValues. aggregate: means over samples of J and F, J&F = (J + F) / 2, float64,
    no rounding; each one's estimator is the plain mean of the samples' values.
    bound_th: F's boundary tolerance (fraction of the frame diagonal), davis2017's 0.008.
    """

    name = "video_jf"
    values_type = VideoJFValues
    task = "segmentation"

    def __init__(self, bound_th: float = DAVIS_BOUND_TH) -> None:
        self.bound_th = float(bound_th)

    def score(self, sample: Sample, pred: Prediction) -> VideoJFValues:
        gt_masks = gt_mask_list(sample)
        pred_masks = predicted_masks(sample, pred) if self.reads(pred) else [None] * sample.num_frames
        frames: dict[str, list] = {"I": [], "U": [], "J": [], "F": []}
        base: dict[str, list] = {"J": [], "F": []}
        for crop in frame_crops(sample, gt_masks, pred_masks):
            for key, value in frame_jf(crop, self.bound_th).items():
                frames[key].append(value)
            for key, value in empty_frame_jf(crop).items():
                base[key].append(value)
        j, f = mean(frames["J"]), mean(frames["F"])
        bj, bf = mean(base["J"]), mean(base["F"])
        return VideoJFValues(j, f, (j + f) / 2, frames, all(m is None for m in gt_masks),
                             {"J": bj, "F": bf, "J&F": (bj + bf) / 2})

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        values = [self.of(r) for r in records]
        return jf_means([v.J for v in values], [v.F for v in values])

    def baseline(self, records: list[ScoreRecord]) -> dict:
        found = [self.of(r).baseline for r in records]
        if not found or any(b is None for b in found):
            return {}
        return jf_means([b["J"] for b in found], [b["F"] for b in found])

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found | None:
        name = {"J": "J", "F": "F", "J&F": "jf"}.get(key)
        if name is None:
            return None
        return mean_of(key, records, lambda r: getattr(self.of(r), name))
