"""Box metrics for grounding: IoU per frame; per run the spatio-temporal grounding measures
m_vIoU and vIoU@0.3 / @0.5 (HC-STVG, VidSTG), and LISA-style gIoU / cIoU / Acc@0.5 over per-frame box
regions.

Boxes are float xyxy pixels in continuous coordinates: a box [x1, y1, x2, y2] covers the region
x1 <= x < x2, y1 <= y < y2, so its area is (x2 - x1) * (y2 - y1) with no "+1" (torchvision
`box_iou`, pycocotools; unlike the legacy Pascal VOC devkit). [0, 0, 10, 10] vs [0, 5, 10, 10]
gives exactly 0.5. A box with x2 == x1 or y2 == y1 is valid and has zero area; x2 < x1 or y2 < y1
(or a non-finite coordinate) raises ValueError naming the box.

Several boxes in one frame (RVTBench and JiT give one box per frame per target; a target made of
several objects or a model answering with several boxes gives more): the frame's region is the
*union* of its boxes, and we compare the union area of the predicted boxes with the union area of
the GT boxes. Both areas are computed exactly in continuous coordinates by coordinate compression
(the distinct x and y edges split the plane into cells that are either fully inside or fully
outside each union), not by rasterising on the pixel grid. With one box on each side this is the
plain box IoU.

Per-frame and per-sample rules follow the mask protocol (metrics/masks.py, LISA
`train_ds.py::validate` and davis2017 `db_eval_iou`), without their epsilons, which would break
exactness for continuous boxes:
- a frame where neither side has a box (union area 0) scores 1.0 (a correct "no object" answer);
- a predicted box where the GT has none, or no box where the GT has one, scores 0.0;
- gIoU = mean over samples of (mean over frames of the frame IoU);
- cIoU = sum of intersections / sum of unions over all frames of all samples (0.0 when the total
  union is 0, as rvt_bench.metrics.masks.ciou);
- Acc@0.5 = fraction of samples whose gIoU term is > 0.5. RefCOCO code bases (MDETR, Qwen-VL)
  count IoU >= 0.5 instead; the two differ only for a sample at exactly 0.5.
A frame where neither side has a box counts 1.0 in gIoU, so a model that never answers scores the
share of box-less frames there (0.8 on a 10-frame clip whose object shows in 2 frames). The field's
spatio-temporal measures do not credit silence:
- vIoU of a sample (HC-STVG; TubeDETR `datasets/hcstvg_eval.py` and `vidstg_eval.py` @ d70c0ee) =
  sum of the frame IoUs over S_i / max(|S_u|, 1), where S_i = frames where both sides have a box and
  S_u = frames where either side has one (the temporal union of the two tubes). TubeDETR takes the
  two tubes as intervals and S_u as their hull; for tubes that overlap that is the same set, and
  for disjoint tubes S_i is empty and vIoU is 0 either way. A sample with no box on either side
  scores 0 (the reference's max(|S_u|, 1)).
- m_vIoU = mean vIoU over samples; vIoU@R = fraction of samples with vIoU > R (strictly, as the
  reference), R in (0.3, 0.5).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

ACC_THRESHOLD = 0.5
VIOU_THRESHOLDS = (0.3, 0.5)


def as_boxes(boxes: Any, what: str = "boxes") -> np.ndarray:
    """Validate and convert boxes to an (N, 4) float64 array of xyxy pixels.

    boxes: None, an empty list (no box), one [x1, y1, x2, y2] box, or a sequence / (N, 4) array
    of boxes. `what` names the boxes in error messages (e.g. "sample 12 frame 3 prediction").
    Raises ValueError naming the offending box when the shape is not (N, 4), a coordinate is not
    finite, or x2 < x1 or y2 < y1.
    """
    if boxes is None:
        return np.zeros((0, 4), dtype=np.float64)
    arr = np.asarray(boxes, dtype=np.float64)
    if arr.size == 0:
        return np.zeros((0, 4), dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"{what}: expected (N, 4) xyxy boxes, got shape {arr.shape}")
    for i, box in enumerate(arr):
        if not np.all(np.isfinite(box)):
            raise ValueError(f"{what}: box {i} {box.tolist()} has a non-finite coordinate")
        if box[2] < box[0] or box[3] < box[1]:
            raise ValueError(f"{what}: box {i} {box.tolist()} is invalid, expected x1 <= x2 and y1 <= y2 (xyxy)")
    return arr


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two xyxy pixel boxes in continuous coordinates (torchvision `box_iou` convention).

    a, b: [x1, y1, x2, y2] floats. Returns intersection area / union area as a float in [0, 1];
    1.0 when both boxes have zero area (nothing vs nothing, as jaccard on empty masks).
    Raises ValueError on an invalid box.
    """
    a = as_boxes(a, "box_iou a")
    b = as_boxes(b, "box_iou b")
    if a.shape[0] != 1 or b.shape[0] != 1:
        raise ValueError(f"box_iou: expected one box on each side, got {a.shape[0]} and {b.shape[0]}")
    inter, union = _pair_inter_union(a[0], b[0])
    if union == 0:
        return 1.0
    return inter / union


def _pair_inter_union(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = float(iw * ih)
    area_a = float((a[2] - a[0]) * (a[3] - a[1]))
    area_b = float((b[2] - b[0]) * (b[3] - b[1]))
    return inter, area_a + area_b - inter


def _covered(boxes: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """(len(ys)-1, len(xs)-1) bool: cell [xs[j], xs[j+1]) x [ys[i], ys[i+1]) lies inside a box."""
    cover = np.zeros((len(ys) - 1, len(xs) - 1), dtype=bool)
    for x1, y1, x2, y2 in boxes:
        # box edges are among the cell edges, so searchsorted finds them exactly
        j1, j2 = np.searchsorted(xs, [x1, x2])
        i1, i2 = np.searchsorted(ys, [y1, y2])
        cover[i1:i2, j1:j2] = True
    return cover


def frame_box_iou(pred_boxes: Any, gt_boxes: Any) -> tuple[float, float]:
    """Intersection and union areas (pixels^2, float) of one frame's predicted and GT boxes.

    pred_boxes, gt_boxes: (N, 4) / (M, 4) xyxy pixel boxes, N or M may be 0 (None = no box).
    Each side's region is the union of its boxes; returns (area(P & G), area(P | G)), computed
    exactly by coordinate compression (one box on each side: the plain box formula).
    Returns (0.0, 0.0) when neither side has a box of positive area. Raises ValueError on an
    invalid box.
    """
    pred = as_boxes(pred_boxes, "prediction")
    gt = as_boxes(gt_boxes, "ground truth")
    if len(pred) == 0 and len(gt) == 0:
        return 0.0, 0.0
    if len(pred) == 1 and len(gt) == 1:
        return _pair_inter_union(pred[0], gt[0])
    both = np.concatenate([pred, gt])
    xs = np.unique(np.concatenate([both[:, 0], both[:, 2]]))
    ys = np.unique(np.concatenate([both[:, 1], both[:, 3]]))
    if len(xs) < 2 or len(ys) < 2:
        return 0.0, 0.0
    cell_area = np.outer(np.diff(ys), np.diff(xs))
    p = _covered(pred, xs, ys)
    g = _covered(gt, xs, ys)
    return float(cell_area[p & g].sum()), float(cell_area[p | g].sum())


def sample_box_scores(pred_frames: Sequence[Any] | None, gt_frames: Sequence[Any]) -> dict:
    """Per-sample grounding record: frame IoUs, their mean (the gIoU term) and the summed I and U.

    pred_frames: per frame, the predicted boxes ((N, 4) xyxy pixels, [] or None = no box);
                 None for the whole sample = no prediction (a failed sample scores as empty).
    gt_frames:   per frame, the GT boxes, same length as pred_frames.
    Returns {"giou_term": float, "I": float, "U": float, "frame_ious": list[float], "viou": float,
    "tube_frames": int} where a frame IoU is I/U and 1.0 when U == 0 (neither side has a box),
    viou = HC-STVG's vIoU (module docstring) and tube_frames = |S_u|. Raises ValueError on a
    frame-count mismatch, an empty sample or an invalid box (the message names the frame).
    """
    if pred_frames is None:
        pred_frames = [None] * len(gt_frames)
    if len(pred_frames) != len(gt_frames):
        raise ValueError(f"sample_box_scores: {len(pred_frames)} predicted frames vs {len(gt_frames)} GT frames")
    if len(gt_frames) == 0:
        raise ValueError("sample_box_scores: a sample needs at least one frame")
    frame_ious, total_i, total_u = [], 0.0, 0.0
    both, either = [], 0
    for t, (pred, gt) in enumerate(zip(pred_frames, gt_frames)):
        try:
            inter, union = frame_box_iou(pred, gt)
            has_pred, has_gt = len(as_boxes(pred)) > 0, len(as_boxes(gt)) > 0
        except ValueError as exc:
            raise ValueError(f"frame {t}: {exc}") from exc
        iou = 1.0 if union == 0 else inter / union
        frame_ious.append(iou)
        total_i += inter
        total_u += union
        either += has_pred or has_gt
        if has_pred and has_gt:
            both.append(iou)
    return {
        "giou_term": math.fsum(frame_ious) / len(frame_ious),
        "I": total_i,
        "U": total_u,
        "frame_ious": frame_ious,
        "viou": math.fsum(both) / max(either, 1),
        "tube_frames": either,
    }


def aggregate_boxes(records: Iterable[dict], threshold: float = ACC_THRESHOLD) -> dict:
    """Run-level grounding scores from per-sample records of `sample_box_scores`.

    records: dicts with "giou_term", "I", "U" and "viou" (extra keys ignored; records of older runs
    without "viou" give no vIoU keys).
    Returns {"m_vIoU": mean viou, "vIoU@0.3", "vIoU@0.5": fraction of samples with viou > R,
    "gIoU": mean giou_term, "cIoU": sum I / sum U (0.0 when sum U == 0),
    "Acc@0.5": fraction of samples with giou_term > threshold (the key names the threshold),
    "n": number of samples}.
    Raises ValueError when there is no record.
    """
    records = list(records)
    if not records:
        raise ValueError("aggregate_boxes: no records to aggregate")
    terms = [float(r["giou_term"]) for r in records]
    total_u = math.fsum(float(r["U"]) for r in records)
    total_i = math.fsum(float(r["I"]) for r in records)
    out = {}
    if all("viou" in r for r in records):
        vious = [float(r["viou"]) for r in records]
        out["m_vIoU"] = math.fsum(vious) / len(vious)
        out.update({f"vIoU@{t:g}": sum(v > t for v in vious) / len(vious) for t in VIOU_THRESHOLDS})
    return {
        **out,
        "gIoU": math.fsum(terms) / len(terms),
        "cIoU": 0.0 if total_u == 0 else total_i / total_u,
        f"Acc@{threshold:g}": sum(t > threshold for t in terms) / len(terms),
        "n": len(terms),
    }
