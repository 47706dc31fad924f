"""What the two SAM2 backends (transformers ``sam2_hf``, the ``sam2`` package ``sam2_pkg``) share:
the automatic-mode point grid, the selection of key-frame masks, and the track record.

Automatic mode follows SAM's automatic mask generator (segment-anything
``automatic_mask_generator.py``, kept in sam2's): prompt a regular grid of single foreground points
at pixel centres, keep per point the best of the 3 multimask outputs by predicted IoU, drop masks
under ``pred_iou_thresh`` or ``min_area`` pixels, then greedy mask non-maximum suppression (here by
mask IoU, where the reference uses box IoU) and keep the ``max_instances`` best.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Track:
    """One object segmented on the key frame and propagated through the video.

    masks: (T, H, W) bool, one mask per frame (all False where SAM2 lost the object).
    score: the key-frame score (predicted IoU in automatic mode, the prompt's score when prompted).
    label: the prompt's phrase when a detector prompted it, else None.
    """

    masks: np.ndarray
    score: float
    label: str | None = None


def point_grid(height: int, width: int, points_per_side: int) -> list[list[float]]:
    """points_per_side**2 points [x, y] in pixels at the centres of a regular grid over the frame
    (SAM's ``build_point_grid``: offsets 1/(2n) .. 1 - 1/(2n) of the side), row-major."""
    n = int(points_per_side)
    offsets = (np.arange(n) + 0.5) / n
    return [[float(x * width), float(y * height)] for y in offsets for x in offsets]


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two (H, W) bool masks; 0.0 when both are empty."""
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


def select_masks(masks: np.ndarray, scores: np.ndarray, pred_iou_thresh: float, min_area: int,
                 nms_iou: float, max_instances: int) -> list[int]:
    """Indices of the masks automatic mode keeps (see module docstring), best score first.

    masks: (N, H, W) bool candidates (one per grid point); scores: (N,) predicted IoU.
    Ties in score keep the lower index first (grid order), so the result is deterministic.
    """
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    kept: list[int] = []
    for i in order:
        if len(kept) >= max_instances:
            break
        if float(scores[i]) < pred_iou_thresh or int(masks[i].sum()) < min_area:
            continue
        if all(mask_iou(masks[i], masks[j]) <= nms_iou for j in kept):
            kept.append(i)
    return kept
