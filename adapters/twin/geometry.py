"""Per-frame geometry of one instance mask and its motion across frames, shared by every
perception backend so that oracle and model-based twins measure objects the same way.

Coordinates are continuous pixels with the origin at the top-left image corner, x right, y down:
pixel (row r, column c) covers [c, c + 1) x [r, r + 1), so a bbox is [x1, y1, x2, y2] with
x2 = last column + 1 (as rvt_bench.core.masks.to_bbox and COCO) and a centroid is the mean of pixel centres
(c + 0.5, r + 0.5).
"""
from __future__ import annotations

import math

import numpy as np


def mask_geometry(mask: np.ndarray) -> tuple[list[float], list[float], int] | None:
    """bbox [x1, y1, x2, y2] px, centroid [x, y] px and area (pixel count) of an (H, W) mask
    (bool, or any dtype where nonzero = foreground); None when the mask is empty."""
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        return None
    bbox = [float(cols.min()), float(rows.min()), float(cols.max()) + 1.0, float(rows.max()) + 1.0]
    centroid = [float(cols.mean()) + 0.5, float(rows.mean()) + 0.5]
    return bbox, centroid, int(rows.size)


def trajectory(centroids: dict[int, list[float]]) -> dict | None:
    """Motion summary of a track given its centroid [x, y] px per visible frame index.

    Returns {"first_frame", "last_frame", "start" [x, y], "end" [x, y], "displacement" [dx, dy]
    (end - start, px; dy > 0 = moved down in the image), "path_length" (sum of centroid steps between
    consecutive visible frames, px)}; None when no frame is visible.
    """
    if not centroids:
        return None
    ts = sorted(centroids)
    pts = [centroids[t] for t in ts]
    path = sum(math.dist(a, b) for a, b in zip(pts, pts[1:]))
    return {
        "first_frame": ts[0],
        "last_frame": ts[-1],
        "start": list(pts[0]),
        "end": list(pts[-1]),
        "displacement": [pts[-1][0] - pts[0][0], pts[-1][1] - pts[0][1]],
        "path_length": path,
    }
