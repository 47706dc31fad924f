"""Per-frame mask metrics: DAVIS J and F, LISA intersection/union and gIoU / cIoU.

Every function takes 2-D (H, W) masks (bool, or integers where nonzero = foreground), is pure, and
reproduces a named reference bit for bit; tests/test_metrics_masks.py holds each one to numbers
printed by the reference code (tests/data/parity/README.md names the commits).

References:
- davis2017-evaluation `davis2017/metrics.py` (commit ac7c43fca936f9722837b7fbd337d284ba37004b):
  `db_eval_iou`, `f_measure`, `_seg2bmap`. VISA `tools/metrics.py` (ReVOS) is identical.
- LISA (commit 3cb2d4301f1af4691bd4f3938335ef06e76f155a): `utils/utils.py::intersectionAndUnionGPU`,
  `AverageMeter.all_reduce`, and `train_ds.py::validate`.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Iterable, Literal, Sequence

import cv2
import numpy as np

Mode = Literal["reference", "textbook"]

DAVIS_BOUND_TH = 0.008


def _check_pair(gt: np.ndarray, pred: np.ndarray, fn: str) -> tuple[np.ndarray, np.ndarray]:
    gt, pred = np.asarray(gt), np.asarray(pred)
    if gt.ndim != 2 or gt.shape != pred.shape:
        raise ValueError(f"{fn}: expected two (H, W) masks of the same shape, got {gt.shape} and {pred.shape}")
    return gt.astype(bool, copy=False), pred.astype(bool, copy=False)


# --- DAVIS J and F ----------------------------------------------------------------------------------


def jaccard(gt: np.ndarray, pred: np.ndarray) -> float:
    """Region similarity J (Jaccard index) of one frame, as davis2017 `db_eval_iou` on a 2-D frame.

    gt, pred: (H, W) masks, bool or integer (nonzero = foreground).
    Returns |gt & pred| / |gt | pred| as a float64 in [0, 1], and 1.0 when the union is empty
    (both masks empty: a correct "no object" answer). Raises ValueError on mismatched shapes.
    """
    gt, pred = _check_pair(gt, pred, "jaccard")
    inter, union = intersection_union(gt, pred)
    if union == 0:
        return 1.0
    return inter / union


def intersection_union(gt: np.ndarray, pred: np.ndarray) -> tuple[int, int]:
    """(|gt & pred|, |gt | pred|) pixel counts of two (H, W) bool masks, counted on the rows that
    hold an object only."""
    rows = np.flatnonzero(gt.any(axis=1) | pred.any(axis=1))
    if rows.size == 0:
        return 0, 0
    g, p = gt[rows[0]:rows[-1] + 1], pred[rows[0]:rows[-1] + 1]
    inter = int(np.count_nonzero(g & p))
    return inter, int(np.count_nonzero(g)) + int(np.count_nonzero(p)) - inter


def boundary_map(seg: np.ndarray) -> np.ndarray:
    """1-px boundary map of a mask, as davis2017 `_seg2bmap` (at full resolution).

    seg: (H, W) mask. Returns (H, W) bool: a pixel is boundary where it differs from its east,
    south or south-east neighbour; the last row compares only with the east neighbour, the last
    column only with the south one, and the bottom-right pixel is never boundary. So a full-frame
    mask (and any mask on a 1x1 frame) has an empty boundary, and a 1-px object's boundary is the
    2x2 block at its upper-left.
    """
    seg = np.asarray(seg).astype(bool, copy=False)
    e = np.zeros_like(seg)
    s = np.zeros_like(seg)
    se = np.zeros_like(seg)
    e[:, :-1] = seg[:, 1:]
    s[:-1, :] = seg[1:, :]
    se[:-1, :-1] = seg[1:, 1:]
    b = (seg ^ e) | (seg ^ s) | (seg ^ se)
    b[-1, :] = seg[-1, :] ^ e[-1, :]
    b[:, -1] = seg[:, -1] ^ s[:, -1]
    b[-1, -1] = False
    return b


@lru_cache(maxsize=64)
def disk_kernel(radius: float) -> np.ndarray:
    """Disk structuring element, equal to `skimage.morphology.disk(radius).astype(np.uint8)`.

    (2r+1, 2r+1) uint8 with 1 where x**2 + y**2 <= radius**2 on the grid np.arange(-r, r + 1);
    built once per radius (skimage's formula, without importing skimage on every call). Read-only.
    """
    grid = np.arange(-radius, radius + 1)
    x, y = np.meshgrid(grid, grid)
    kernel = (x**2 + y**2 <= radius**2).astype(np.uint8)
    kernel.setflags(write=False)
    return kernel


def bound_pixels(height: int, width: int, bound_th: float = DAVIS_BOUND_TH) -> float:
    """Boundary tolerance in pixels: bound_th itself when >= 1, else ceil(bound_th * hypot(H, W))
    (davis2017: 8 px at 480x854, 12 px at 720x1280, 18 px at 1080x1920)."""
    if bound_th >= 1:
        return bound_th
    return float(np.ceil(bound_th * np.linalg.norm((height, width))))


def f_measure(gt: np.ndarray, pred: np.ndarray, bound_th: float = DAVIS_BOUND_TH) -> float:
    """Contour accuracy F of one frame, as davis2017 `f_measure(pred, gt, None, bound_th)`.

    gt, pred: (H, W) masks, bool or integer (nonzero = foreground).
    bound_th: tolerance, a fraction of the frame diagonal (< 1) or pixels (>= 1); see bound_pixels.
    Boundaries as `boundary_map`; a boundary pixel matches when the other mask's boundary lies
    within the disk of radius bound_pix (the reference's cv2.dilate with that disk; here computed
    exactly on the objects' box by `jf_counts` when bound_pix is a whole number; no thinning). Precision/recall special cases, as the reference: pred boundary empty and GT not ->
    P=1, R=0; GT boundary empty and pred not -> P=0, R=1; both empty -> F = 1.0; P + R = 0 -> 0.0.
    Returns F = 2PR / (P + R), a float64 in [0, 1]. Raises ValueError on mismatched shapes.
    """
    gt, pred = _check_pair(gt, pred, "f_measure")
    radius = bound_pixels(*gt.shape, bound_th)
    if radius == int(radius):
        return jf_counts(gt, pred, bound_th)[2]
    return _f_measure_dilate(gt, pred, radius)


def _f_measure_dilate(gt: np.ndarray, pred: np.ndarray, radius: float) -> float:
    """F by cv2.dilate with disk(radius) on the boundaries' box: the general path, for a radius that
    is not a whole number of pixels (bound_th >= 1 given as a fraction of a pixel)."""
    fg_boundary = boundary_map(pred)
    gt_boundary = boundary_map(gt)
    n_fg = int(np.count_nonzero(fg_boundary))
    n_gt = int(np.count_nonzero(gt_boundary))

    special = _empty_boundary_pr(n_fg, n_gt)
    if special is not None:
        precision, recall = special
    else:
        # Dilated values are only read at boundary pixels, and every boundary pixel lies inside the
        # union box of both boundaries, so dilating that box alone gives the same counts as
        # dilating the full frame (cv2.dilate treats outside-the-image as background).
        rows = np.flatnonzero(fg_boundary.any(axis=1) | gt_boundary.any(axis=1))
        cols = np.flatnonzero(fg_boundary.any(axis=0) | gt_boundary.any(axis=0))
        box = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
        fg_b = fg_boundary[box].view(np.uint8)
        gt_b = gt_boundary[box].view(np.uint8)
        kernel = disk_kernel(radius)
        fg_dil = cv2.dilate(fg_b, kernel)
        gt_dil = cv2.dilate(gt_b, kernel)
        precision = int(np.count_nonzero(fg_b & gt_dil)) / float(n_fg)
        recall = int(np.count_nonzero(gt_b & fg_dil)) / float(n_gt)
    return _harmonic_mean(precision, recall)


def _empty_boundary_pr(n_fg: int, n_gt: int) -> tuple[float, float] | None:
    """davis2017 f_measure's (precision, recall) when a boundary map is empty; None when neither is."""
    if n_fg == 0 and n_gt > 0:
        return 1.0, 0.0
    if n_fg > 0 and n_gt == 0:
        return 0.0, 1.0
    if n_fg == 0 and n_gt == 0:
        return 1.0, 1.0
    return None


def _harmonic_mean(precision: float, recall: float) -> float:
    """F = 2PR / (P + R), 0 when P + R = 0 (davis2017 f_measure)."""
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


# --- J and F in one pass on the objects' neighbourhood ----------------------------------------------


@lru_cache(maxsize=64)
def disk_rectangles(radius: int) -> tuple[tuple[int, int], ...]:
    """The disk of `disk_kernel(radius)` as a union of centred rectangles: ((half_height, half_width), ...).

    Row |dy| of the disk spans |dx| <= w(dy) = max{x : x*x + dy*dy <= r*r}; w never grows with
    |dy|, so for each distinct w the rectangle |dx| <= w, |dy| <= (the largest |dy| with w(dy) >= w)
    lies inside the disk, and together they cover it exactly (9 rectangles at r = 12).
    """
    r = int(radius)
    widths = [math.isqrt(r * r - dy * dy) for dy in range(r + 1)]
    rects = []
    for w in sorted(set(widths), reverse=True):
        rects.append((max(dy for dy in range(r + 1) if widths[dy] >= w), w))
    return tuple(rects)


def _bbox(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(y0, y1, x0, x1) half-open bounding box of the nonzero pixels, None when there are none."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    y0, y1 = int(rows[0]), int(rows[-1]) + 1
    cols = np.flatnonzero(mask[y0:y1].any(axis=0))
    return y0, y1, int(cols[0]), int(cols[-1]) + 1


def _boundary_padded(crop: np.ndarray, last_row: bool, last_col: bool, pad: int) -> np.ndarray:
    """`boundary_map` of a frame restricted to a box, as a uint8 array with `pad` zero pixels on every side.

    crop: the frame's mask inside the box, which must hold every foreground pixel with one
    background pixel (or the frame edge) around it: outside the box the boundary is empty, and a
    box side that is not the frame's last row / column has only background beyond it, so zero
    padding there is what davis2017 sees. last_row / last_col: the box ends at the frame's last row /
    column, where davis2017's special rules apply (see boundary_map).
    """
    h, w = crop.shape
    out = np.zeros((h + 2 * pad, w + 2 * pad), dtype=np.uint8)
    b = out[pad:pad + h, pad:pad + w]
    x = crop.view(np.uint8)
    # inside: a pixel is boundary unless it and its east, south and south-east neighbours are all
    # equal, i.e. unless their sum is 0 or 4: (sum - 1) mod 256 < 3 (four uint8 passes)
    pairs = x[:-1] + x[1:]
    block = pairs[:, :-1] + pairs[:, 1:]
    block -= 1
    np.less(block, 3, out=b[:-1, :-1].view(bool))
    # the box's last row and column: beyond the box is background, unless it is the frame's edge,
    # where davis2017 compares with the east (last row) or south (last column) neighbour only
    edge = x[-1, :-1] != x[-1, 1:]
    b[-1, :-1] = edge if last_row else edge | (x[-1, :-1] != 0)
    edge = x[:-1, -1] != x[1:, -1]
    b[:-1, -1] = edge if last_col else edge | (x[:-1, -1] != 0)
    b[-1, -1] = 0 if last_row and last_col else x[-1, -1] != 0
    return out


@lru_cache(maxsize=256)
def _rect_offsets(radius: int, width: int) -> np.ndarray:
    """(R, 4) flat offsets, in an integral image of row length width + 1, of the four corners
    (bottom-right, bottom-left, top-right, top-left) of each rectangle of `disk_rectangles(radius)`
    around a pixel, largest rectangle first."""
    w1 = width + 1
    rects = sorted(disk_rectangles(radius), key=lambda r: -(2 * r[0] + 1) * (2 * r[1] + 1))
    return np.array([[(dy + 1) * w1 + dx + 1, (dy + 1) * w1 - dx, -dy * w1 + dx + 1, -dy * w1 - dx]
                     for dy, dx in rects], dtype=np.intp)


def _matched(flat: np.ndarray, width: int, integral: np.ndarray, radius: int) -> int:
    """How many pixels `flat` (flat indices into a padded boundary array of row length `width`)
    have a pixel of the other boundary within the disk, read from that boundary's integral image
    (cv2.integral, (H + 1, W + 1)): a rectangle sum per rectangle of the disk, largest first, each
    asked only for the pixels no earlier rectangle matched."""
    corner = flat + flat // width  # the same (row, col) in the integral image's layout
    table = integral.ravel()
    matched = 0
    for offsets in _rect_offsets(radius, width):
        v = table.take(corner[:, None] + offsets)
        hit = (v[:, 0] - v[:, 1] - v[:, 2] + v[:, 3]) > 0
        matched += int(np.count_nonzero(hit))
        corner = corner[~hit]
        if corner.size == 0:
            break
    return matched


def jf_counts(gt: np.ndarray, pred: np.ndarray, bound_th: float = DAVIS_BOUND_TH) -> tuple[int, int, float]:
    """(I, U, F) of one frame: |gt & pred|, |gt | pred| and davis2017's F, in one pass.

    gt, pred: (H, W) bool masks of one shape (callers check; `jaccard`/`f_measure` do).
    J = I / U (1.0 when U == 0). Same values as `db_eval_iou` and `f_measure` (held to the parity
    vectors), computed on the objects' bounding box only (`jf_counts_box`).
    """
    box_g, box_p = _bbox(gt), _bbox(pred)
    if box_g is None and box_p is None:
        return 0, 0, 1.0
    box = object_box([b for b in (box_g, box_p) if b is not None], gt.shape)
    y0, y1, x0, x1 = box
    return jf_counts_box(gt[y0:y1, x0:x1], pred[y0:y1, x0:x1], box, gt.shape, bound_th)


def object_box(boxes: Sequence[tuple[int, int, int, int]], shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """The union of (y0, y1, x0, x1) boxes grown by one pixel on each side, clipped to the frame:
    the box `jf_counts_box` needs."""
    height, width = shape
    return (max(min(b[0] for b in boxes) - 1, 0), min(max(b[1] for b in boxes) + 1, height),
            max(min(b[2] for b in boxes) - 1, 0), min(max(b[3] for b in boxes) + 1, width))


def jf_counts_box(g: np.ndarray, p: np.ndarray, box: tuple[int, int, int, int], shape: tuple[int, int],
                  bound_th: float = DAVIS_BOUND_TH) -> tuple[int, int, float]:
    """`jf_counts` of a frame of `shape` (H, W) from its masks inside `box` (y0, y1, x0, x1) only.

    g, p: bool crops of the box, which must hold every foreground pixel of both masks with one
    background pixel (or the frame edge) around it (`object_box`). The boundary maps are computed
    on the box, and the disk dilation is replaced by an exact equivalent at the boundary pixels
    only: a boundary pixel matches when the other boundary has a pixel in one of the disk's
    rectangles (`disk_rectangles`), each counted with an integral image.
    """
    height, width = shape
    inter = int(np.count_nonzero(g & p))
    n_g, n_p = int(np.count_nonzero(g)), int(np.count_nonzero(p))
    union = n_g + n_p - inter
    if union == 0:
        return 0, 0, 1.0
    radius = bound_pixels(height, width, bound_th)
    y0, y1, x0, x1 = box
    if radius != int(radius):  # a fractional pixel tolerance: the reference's dilation, on the full frame
        full_g, full_p = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
        full_g[y0:y1, x0:x1], full_p[y0:y1, x0:x1] = g, p
        return inter, union, _f_measure_dilate(full_g, full_p, radius)
    radius = int(radius)
    last_row, last_col = y1 == height, x1 == width
    gb = _boundary_padded(g, last_row, last_col, radius) if n_g else None
    pb = _boundary_padded(p, last_row, last_col, radius) if n_p else None
    g_flat = np.flatnonzero(gb.view(bool)) if gb is not None else np.empty(0, np.intp)
    p_flat = np.flatnonzero(pb.view(bool)) if pb is not None else np.empty(0, np.intp)
    n_gt, n_fg = g_flat.size, p_flat.size
    special = _empty_boundary_pr(n_fg, n_gt)
    if special is not None:
        precision, recall = special
    else:
        pad_width = gb.shape[1]
        precision = _matched(p_flat, pad_width, cv2.integral(gb), radius) / float(n_fg)
        recall = _matched(g_flat, pad_width, cv2.integral(pb), radius) / float(n_gt)
    return inter, union, _harmonic_mean(precision, recall)


# --- LISA gIoU / cIoU -------------------------------------------------------------------------------


def lisa_intersection_union(
    pred: np.ndarray, gt: np.ndarray, ignore: np.ndarray | None = None
) -> tuple[int, int, int]:
    """Foreground (class 1) counts of LISA `intersectionAndUnionGPU(pred, label_map, 2, 255)`.

    pred, gt: (H, W) masks; ignore: (H, W) mask of LISA's 255 pixels, or None. The label map is
    0 background, 1 where gt, 255 where ignore (255 wins where both are set). Ignore pixels are
    removed from both masks, as the reference sets `output[target == 255] = 255`.
    Returns (intersection, union, target) pixel counts as Python ints.
    Raises ValueError on mismatched shapes.
    """
    gt, pred = _check_pair(gt, pred, "lisa_intersection_union")
    if ignore is not None:
        _, ignore = _check_pair(gt, ignore, "lisa_intersection_union (ignore)")
        keep = ~ignore
        gt, pred = gt & keep, pred & keep
    inter = int(np.count_nonzero(gt & pred))
    target = int(np.count_nonzero(gt))
    union = int(np.count_nonzero(pred)) + target - inter
    return inter, union, target


_F32_EPS_IOU = np.float32(1e-5)


def lisa_sample_iou(intersection: int, union: int) -> float:
    """Per-sample gIoU term of LISA `train_ds.py::validate` (one mask per sample).

    float32 arithmetic, as on the GPU: I / (U + 1e-5), plus 1.0 when U == 0 ("no-object target").
    So a perfect 1-px match scores 1/(1+1e-5) = 0.99999 and an empty/empty sample exactly 1.0.
    Returns the float32 value widened to float (exact).
    """
    term = np.float32(intersection) / (np.float32(union) + _F32_EPS_IOU)
    if union == 0:
        term = term + np.float32(1.0)
    return float(term)


def sample_iou(intersection: int, union: int) -> float:
    """Textbook per-sample IoU in float64: I / U, and 1.0 when U == 0."""
    return 1.0 if union == 0 else intersection / union


def giou(terms: Sequence[float], mode: Mode = "reference") -> float:
    """gIoU: the mean of per-sample terms.

    terms: per-sample values in a fixed order (callers sort by sample id), `lisa_sample_iou` for
    mode="reference", `sample_iou` for mode="textbook".
    reference: LISA's `AverageMeter` after `all_reduce`: a float32 running sum in the given order,
      divided in float32 by float32(N + 1e-5) (N + 1e-5, not N, as the original). Matches LISA's
      printed gIoU bit for bit; differs from the textbook mean by ~1e-6 on real sets.
    textbook: math.fsum(terms) / N in float64.
    Raises ValueError when terms is empty or mode is unknown.
    """
    if len(terms) == 0:
        raise ValueError("giou: no samples to aggregate")
    if mode == "reference":
        total = np.float32(0.0)
        for t in terms:
            total = np.float32(total + np.float32(t))
        return float(total / np.float32(len(terms) + 1e-5))
    if mode == "textbook":
        return math.fsum(terms) / len(terms)
    raise ValueError(f"giou: mode must be 'reference' or 'textbook', got {mode!r}")


def ciou(intersections: Iterable[int], unions: Iterable[int], mode: Mode = "reference") -> float:
    """cIoU: cumulative intersection over cumulative union.

    intersections, unions: per-sample pixel counts (e.g. from lisa_intersection_union), same order.
    reference: LISA `validate`: float32 running sums in the given order (they round once past
      2**24 pixels), then sum_I / (sum_U + 1e-10) in float32.
    textbook: exact integer sums, sum_I / sum_U in float64.
    Both return 0.0 when the total union is 0 (the reference's I / 1e-10 with I = 0).
    Raises ValueError when the lists are empty or of different lengths, or mode is unknown.
    """
    inters, unions = list(intersections), list(unions)
    if len(inters) == 0 or len(inters) != len(unions):
        raise ValueError(f"ciou: need equal, non-empty lists, got {len(inters)} and {len(unions)} entries")
    if mode == "reference":
        sum_i, sum_u = np.float32(0.0), np.float32(0.0)
        for i, u in zip(inters, unions):
            sum_i = np.float32(sum_i + np.float32(i))
            sum_u = np.float32(sum_u + np.float32(u))
        return float(sum_i / (sum_u + np.float32(1e-10)))
    if mode == "textbook":
        total_u = sum(int(u) for u in unions)
        return 0.0 if total_u == 0 else sum(int(i) for i in inters) / total_u
    raise ValueError(f"ciou: mode must be 'reference' or 'textbook', got {mode!r}")
