"""Mask codecs: COCO RLE (pycocotools), LabelMe polygons (LISA rules) and PNG masks.

The one place where masks change representation. RLE dicts are {"size": [H, W], "counts": str}
with ASCII counts so they serialise to JSON as-is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from bench.types import RLE, DatasetFormatError

IGNORE_VALUE = 255


def encode(mask: np.ndarray) -> RLE:
    """Encode one (H, W) mask (bool or 0/1 integers; any nonzero = foreground) as a COCO RLE dict."""
    if mask.ndim != 2:
        raise ValueError(f"encode expects a 2-D (H, W) mask, got shape {mask.shape}")
    rle = mask_utils.encode(np.asfortranarray(mask != 0, dtype=np.uint8))
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": rle["counts"].decode("ascii")}


def decode(rle: RLE) -> np.ndarray:
    """Decode a COCO RLE dict (compressed counts as str or bytes, or uncompressed counts as a list)
    into an (H, W) bool array. Raises DatasetFormatError on a malformed RLE."""
    try:
        h, w = (int(v) for v in rle["size"])
        counts = rle["counts"]
        return mask_utils.decode(_coded({"size": [h, w], "counts": counts})).astype(bool)
    except (KeyError, TypeError, ValueError) as exc:
        raise DatasetFormatError(f"malformed RLE {str(rle)[:120]!r}: {exc}") from exc


def compressed_runs(counts: str | bytes) -> list[int]:
    """The run lengths of COCO's compressed RLE string, decoded as pycocotools ``rleFrString`` does
    (maskApi.c: 6-bit groups offset by 48, 5 value bits + a continuation bit, sign from bit 4 of the
    last group, runs from the fourth on stored as the difference to the run two before).

    Unlike pycocotools, which reads past a cut-short string and wraps negative runs into huge
    unsigned ones, this raises ValueError naming the problem: a character outside '0'..'o', a
    string that ends inside a run, or a negative run length."""
    data = counts.encode("ascii") if isinstance(counts, str) else bytes(counts)
    runs: list[int] = []
    p = 0
    while p < len(data):
        x, k, more = 0, 0, True
        while more:
            if p >= len(data):
                raise ValueError(f"truncated: the string ends inside run {len(runs)}")
            c = data[p] - 48
            if not 0 <= c < 64:
                raise ValueError(f"character {chr(data[p])!r} at offset {p} is not an RLE character ('0'..'o')")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and c & 0x10:
                x |= -1 << (5 * k)
        if len(runs) > 2:
            x += runs[-2]
        if x < 0:
            raise ValueError(f"run {len(runs)} has a negative length ({x})")
        runs.append(x)
    return runs


def rle_problem(rle: Any, size: tuple[int, int] | None = None) -> str | None:
    """What is wrong with one COCO RLE entry, or None when it is well formed (and of ``size`` = (H, W)
    when given). Checks what scoring will need, without decoding the mask: a dict with ``size`` [H, W]
    (two non-negative ints) and ``counts``; uncompressed counts (a list) of non-negative ints; compressed
    counts (str or bytes) readable run by run (``compressed_runs``); and the runs summing to exactly
    H*W (more = runs that overrun the frame, fewer = a truncated string). Cost: one pass over the
    counts string (no H x W array)."""
    if not isinstance(rle, dict) or "size" not in rle or "counts" not in rle:
        return f"expected a COCO RLE {{'size': [H, W], 'counts': ...}}, got {str(rle)[:80]}"
    shape = rle["size"]
    if (not isinstance(shape, (list, tuple)) or len(shape) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape)):
        return f"'size' must be [H, W] (two non-negative ints), got {str(shape)[:40]}"
    height, width = int(shape[0]), int(shape[1])
    if size is not None and [height, width] != [int(size[0]), int(size[1])]:
        return f"'size' {[height, width]} differs from the frame size [H, W] = {[int(size[0]), int(size[1])]}"
    counts = rle["counts"]
    if isinstance(counts, list):
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            return "uncompressed 'counts' must be non-negative ints"
        runs = counts
    elif isinstance(counts, (str, bytes)):
        try:
            runs = compressed_runs(counts)
        except (ValueError, UnicodeEncodeError) as exc:
            return f"compressed 'counts' {counts[:40]!r} are corrupt: {exc}"
    else:
        return f"'counts' must be a str, bytes or list, got {type(counts).__name__}"
    total = sum(runs)
    if total != height * width:
        what = "overrun the frame" if total > height * width else "stop short (truncated?)"
        return f"'counts' runs sum to {total} pixels, expected H*W = {height * width}: they {what}"
    return None


def check_rle(rle: Any, size: tuple[int, int] | None, where: str) -> None:
    """Raise DatasetFormatError "<where>: <problem>" when ``rle_problem(rle, size)`` finds one."""
    problem = rle_problem(rle, size)
    if problem is not None:
        raise DatasetFormatError(f"{where}: {problem}")


def empty(height: int, width: int) -> RLE:
    """RLE of an all-background (H, W) mask."""
    return encode(np.zeros((height, width), dtype=bool))


def area(rle: RLE | None) -> int:
    """Foreground pixel count of an RLE (0 for None)."""
    return 0 if rle is None else int(mask_utils.area(_coded(rle)))


def to_bbox(rle: RLE | None) -> list[float] | None:
    """Tight box [x1, y1, x2, y2] in pixels (continuous: x2 = last column + 1), None if empty."""
    if rle is None or area(rle) == 0:
        return None
    x, y, w, h = (float(v) for v in mask_utils.toBbox(_coded(rle)))
    return [x, y, x + w, y + h]


def union(rles: Iterable[RLE | None], height: int, width: int) -> RLE:
    """Union of several RLEs of the same (H, W); None entries are skipped."""
    present = [_coded(r) for r in rles if r is not None]
    if not present:
        return empty(height, width)
    merged = mask_utils.merge(present, intersect=False)
    return {"size": [height, width], "counts": merged["counts"].decode("ascii")}


def compress(rle: RLE) -> RLE:
    """The same mask as a compressed RLE with ASCII counts (uncompressed list counts, as COCO's
    iscrowd annotations have them, are compressed; compressed ones are returned as str)."""
    coded = _coded(rle)
    return {"size": [int(v) for v in coded["size"]], "counts": coded["counts"].decode("ascii")}


def _coded(rle: RLE) -> dict:
    """pycocotools' form: compressed counts as bytes (list counts compressed first)."""
    counts = rle["counts"]
    if isinstance(counts, list):
        h, w = (int(v) for v in rle["size"])
        return mask_utils.frPyObjects({"size": [h, w], "counts": counts}, h, w)
    return {"size": list(rle["size"]), "counts": counts.encode("ascii") if isinstance(counts, str) else counts}


# --- LabelMe polygons -----------------------------------------------------------------------------


def rasterize_labelme(shapes: Sequence[dict], height: int, width: int) -> np.ndarray:
    """Label map of LabelMe shapes following LISA `utils/data_processing.py::get_mask_from_json`.

    shapes: [{"label": str, "points": [[x, y], ...]}, ...] in pixels.
    Returns (H, W) uint8: 0 background, 1 target, 255 ignore. Rules (LISA's, kept exactly):
    a label whose lower() equals "flag" is skipped; "ignore" anywhere in lower() means 255;
    points are truncated toward zero by int32 conversion; each shape is drawn as a 1-px closed
    outline then filled; shapes are drawn in descending order of their own rasterised area
    (np.argsort(area)[::-1]), so smaller shapes end on top.
    Raises DatasetFormatError when a shape lacks a label or points.
    """
    areas, kept = [], []
    for k, shape in enumerate(shapes):
        try:
            label, points = shape["label"], shape["points"]
            poly = np.array([points], dtype=np.int32)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise DatasetFormatError(f"shape {k}: expected {{'label', 'points': [[x, y], ...]}}, got {str(shape)[:120]}") from exc
        if not isinstance(label, str):  # LISA calls label.lower(): anything but a str stops it
            raise DatasetFormatError(f"shape {k}: field 'label' must be a string, got {label!r}")
        if label.lower() == "flag":
            continue
        if poly.ndim != 3 or poly.shape[-1] != 2 or poly.shape[1] == 0:
            raise DatasetFormatError(f"shape {k} ({label!r}): points must be a non-empty [[x, y], ...] list")
        tmp = np.zeros((height, width), dtype=np.uint8)
        cv2.polylines(tmp, poly, True, 1, 1)
        cv2.fillPoly(tmp, poly, 1)
        areas.append(tmp.sum())
        kept.append((label, poly))
    label_map = np.zeros((height, width), dtype=np.uint8)
    for idx in np.argsort(areas)[::-1]:
        label, poly = kept[idx]
        value = IGNORE_VALUE if "ignore" in label.lower() else 1
        cv2.polylines(label_map, poly, True, value, 1)
        cv2.fillPoly(label_map, poly, value)
    return label_map


def rasterize_polygon(points: Sequence[Sequence[float]], height: int, width: int) -> np.ndarray:
    """One polygon as an (H, W) bool mask, drawn like LISA draws a shape (outline + fill, int32 points)."""
    poly = np.array([points], dtype=np.int32)
    out = np.zeros((height, width), dtype=np.uint8)
    cv2.polylines(out, poly, True, 1, 1)
    cv2.fillPoly(out, poly, 1)
    return out.astype(bool)


# --- PNG masks ------------------------------------------------------------------------------------


def read_png_mask(path: str | Path) -> np.ndarray:
    """Read a PNG mask as (H, W) bool, any nonzero value (any channel) = foreground.

    Raises DatasetFormatError when the file is missing or unreadable."""
    arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise DatasetFormatError(f"cannot read mask PNG {path}")
    if arr.ndim == 3:
        arr = arr.max(axis=2)
    return arr != 0


def write_png_mask(path: str | Path, mask: np.ndarray) -> None:
    """Write an (H, W) mask as an 8-bit PNG with values 0/255."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), (np.asarray(mask) != 0).astype(np.uint8) * 255):
        raise OSError(f"could not write {path}")
