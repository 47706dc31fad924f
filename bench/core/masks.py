"""Mask codecs: COCO RLE (pycocotools), LabelMe polygons (LISA rules) and PNG masks.

The one place where masks change representation. RLE dicts are {"size": [H, W], "counts": str}
with ASCII counts so they serialise to JSON as-is.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from rvt_bench.core import files
from rvt_bench.core.types import RLE, DatasetFormatError

IGNORE_VALUE = 255


def encode(mask: np.ndarray) -> RLE:
    """Encode one (H, W) mask (bool or 0/1 integers; any nonzero = foreground) as a COCO RLE dict."""
    if mask.ndim != 2:
        raise ValueError(f"encode expects a 2-D (H, W) mask, got shape {mask.shape}")
    rle = mask_utils.encode(np.asfortranarray(mask != 0, dtype=np.uint8))
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": rle["counts"].decode("ascii")}


def encode_fast(mask: np.ndarray) -> RLE:
    """`encode(mask)` (the same COCO RLE string) computed from the mask's bounding box only.

    mask: (H, W) bool. pycocotools needs a full Fortran-order copy of the frame; here the runs come
    from the object's box (`encode_box`).
    """
    h, w = mask.shape
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return encode(mask)
    y0, y1 = int(rows[0]), int(rows[-1]) + 1
    cols = np.flatnonzero(mask[y0:y1].any(axis=0))
    x0, x1 = int(cols[0]), int(cols[-1]) + 1
    return encode_box(mask[y0:y1, x0:x1], (y0, y1, x0, x1), (h, w))


def encode_box(crop: np.ndarray, box: tuple[int, int, int, int] | None, shape: tuple[int, int]) -> RLE:
    """`encode` of an (H, W) = shape mask that is background outside box (y0, y1, x0, x1), from
    its part inside the box only: crop, (y1 - y0, x1 - x0), bool (or integers, nonzero =
    foreground). box None = an empty mask. The same COCO RLE string as `encode`.

    The runs are read column by column inside the box and joined where an object runs from the
    bottom of one column into the top of the next; pycocotools compresses them.
    Raises ValueError when crop's shape is not the box's or the box leaves the frame.
    """
    h, w = (int(v) for v in shape)
    if box is None:
        return empty(h, w)
    y0, y1, x0, x1 = box
    if crop.shape != (y1 - y0, x1 - x0) or not (0 <= y0 <= y1 <= h and 0 <= x0 <= x1 <= w):
        raise ValueError(f"encode_box: crop {crop.shape} does not fit box {box} in a frame of {(h, w)}")
    if crop.size == 0:
        return empty(h, w)
    if crop.dtype != bool:
        crop = crop != 0
    # run starts and ends: where a column changes value going down (background above and below
    # the box), found row by row and put in column order, with no transposed copy of the crop
    change = np.empty((y1 - y0 + 1, x1 - x0), dtype=bool)
    change[0] = crop[0]
    np.not_equal(crop[1:], crop[:-1], out=change[1:-1])
    change[-1] = crop[-1]
    row, col = np.divmod(np.flatnonzero(change), x1 - x0)  # (flatnonzero: np.nonzero is slow in 2-D)
    order = np.argsort(col * (y1 - y0 + 1) + row)
    edges = (x0 + col[order]) * h + y0 + row[order]
    # an end at the bottom of a column equals the start at the top of the next: one run
    keep = np.ones(edges.size, dtype=bool)
    joined = np.flatnonzero(edges[1:-1:2] == edges[2::2])
    keep[2 * joined + 1] = keep[2 * joined + 2] = False
    edges = edges[keep]
    counts = np.diff(np.concatenate(([0], edges, [h * w])))
    if counts[-1] == 0:  # the mask ends with foreground: pycocotools writes no empty last run
        counts = counts[:-1]
    return compress({"size": [h, w], "counts": counts.tolist()})


def bbox(rle: RLE) -> tuple[int, int, int, int] | None:
    """(y0, y1, x0, x1) half-open bounding box of an RLE's foreground, None when empty."""
    coded = _coded(rle)
    if int(mask_utils.area(coded)) == 0:
        return None
    x, y, bw, bh = (int(v) for v in mask_utils.toBbox(coded))
    return y, y + bh, x, x + bw


def decode_box(rle: RLE, box: tuple[int, int, int, int]) -> np.ndarray:
    """The part of an RLE's mask inside box (y0, y1, x0, x1), as a (y1 - y0, x1 - x0) bool array,
    without building the full frame (the runs are decoded from the compressed counts).
    Raises DatasetFormatError on a malformed RLE."""
    h, _, counts = _checked_runs(rle)
    y0, y1, x0, x1 = box
    # the columns x0..x1 are one contiguous stretch of the column-major runs: expand it, keep the rows
    lo, hi = x0 * h, x1 * h
    ends = np.cumsum(counts)
    lengths = np.clip(np.minimum(ends, hi) - np.maximum(ends - counts, lo), 0, None)
    parity = np.zeros(counts.size, dtype=bool)
    parity[1::2] = True  # runs alternate background, foreground
    strip = np.repeat(parity, lengths).reshape(x1 - x0, h)
    return strip[:, y0:y1].T


def _counts(counts) -> np.ndarray:
    """Run lengths of an RLE's counts (a list, or pycocotools' compressed string: rleFrString).
    Parsed strings are memoised (a ReVOS anno's mask is read by every expression that names it)."""
    if isinstance(counts, list):
        return np.asarray(counts, dtype=np.int64)
    return _parse_counts(counts if isinstance(counts, str) else bytes(counts).decode("ascii"))


@lru_cache(maxsize=1024)
def _parse_counts(counts: str) -> np.ndarray:
    s = np.frombuffer(counts.encode("ascii"), dtype=np.uint8).astype(np.int64) - 48
    if s.size == 0:
        return np.zeros(0, dtype=np.int64)
    last = (s & 0x20) == 0  # the last character of each number
    number = np.cumsum(np.concatenate(([0], last[:-1])))
    start = np.flatnonzero(np.concatenate(([True], last[:-1])))
    k = np.arange(s.size) - start[number]
    x = np.zeros(int(number[-1]) + 1, dtype=np.int64)
    np.add.at(x, number, (s & 0x1f) << (5 * k))
    negative = last & ((s & 0x10) != 0)
    x[number[negative]] |= -1 << (5 * (k[negative] + 1))
    # counts after the second are coded as the difference to the count two places before
    x[3::2] = np.cumsum(x[1::2])[1:]
    x[4::2] = np.cumsum(x[2::2])[1:]
    x.setflags(write=False)  # shared by the memo
    return x


def decode(rle: RLE) -> np.ndarray:
    """Decode a COCO RLE dict (compressed counts as str or bytes, or uncompressed counts as a list)
    into an (H, W) bool array. Raises DatasetFormatError on a malformed RLE."""
    # pycocotools writes the runs into an uninitialised H x W buffer without bounds: runs that do not
    # cover it exactly would leave stale memory in the mask (fewer) or write past it (more).
    h, w, _ = _checked_runs(rle)
    try:
        return mask_utils.decode(_coded({"size": [h, w], "counts": rle["counts"]})).astype(bool)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DatasetFormatError(f"malformed RLE {str(rle)[:120]!r}: {exc}") from exc


def _checked_runs(rle: RLE) -> tuple[int, int, np.ndarray]:
    """(H, W, run lengths) of an RLE whose size is two non-negative integers and whose runs are
    non-negative and cover exactly H*W pixels; DatasetFormatError otherwise, and for H*W over
    dataset.limits.max_image_pixels (no frame is that large; a 7-byte string can claim 100000 x
    100000, which decoding would allocate, and whose runs pycocotools would wrap at 2**32)."""
    try:
        h, w = (_dimension(v) for v in rle["size"])
        runs = _counts(rle["counts"])
    except (KeyError, TypeError, ValueError, UnicodeEncodeError) as exc:
        raise DatasetFormatError(f"malformed RLE {str(rle)[:120]!r}: {exc}") from exc
    bound = files.limits().max_image_pixels
    if h * w > bound:
        raise DatasetFormatError(f"RLE of [H, W] = {[h, w]} holds {h * w} pixels, over the {bound} of the largest "
                                 f"image (dataset.limits.max_image_pixels); not decoded")
    if not runs.size:
        if h * w:
            raise DatasetFormatError(f"malformed RLE {str(rle)[:120]!r}: no runs for H*W = {h * w} pixels")
    elif int(runs.sum()) != h * w or int(runs.min()) < 0:
        raise DatasetFormatError(f"malformed RLE {str(rle)[:120]!r}: its runs cover {int(runs.sum())} pixels "
                                 f"(smallest run {int(runs.min())}), not H*W = {h * w}")
    return h, w, runs


def _dimension(v: Any) -> int:
    """One entry of an RLE's size as an int; ValueError for a negative or non-integral value (512.7)."""
    n = int(v)
    if n != v or n < 0:
        raise ValueError(f"size entries must be non-negative integers, got {v!r}")
    return n


def compressed_runs(counts: str | bytes) -> list[int]:
    """The run lengths of COCO's compressed RLE string, decoded as pycocotools ``rleFrString`` does
    (maskApi.c: 6-bit groups offset by 48, 5 value bits + a continuation bit, sign from bit 4 of the
    last group, runs from the fourth on stored as the difference to the run two before).

    Unlike pycocotools, which reads past a cut-short string and wraps negative runs into huge
    unsigned ones, this raises ValueError naming the problem: a character outside '0'..'o', a
    string that ends inside a run, or a negative run length."""
    runs = _runs_array(counts.encode("ascii") if isinstance(counts, str) else bytes(counts))
    return runs.tolist() if isinstance(runs, np.ndarray) else runs


_MAX_GROUPS = 8  # 40-bit numbers: any run of a frame under 2**40 pixels; longer ones take the loop
_SHORT = 128  # below this many characters the loop is the quicker (~0.5 us a character against ~60 us a call)


def _runs_array(data: bytes) -> np.ndarray | list[int]:
    """compressed_runs on the whole string at once in NumPy (int64 runs), the same runs and the same
    first error as the character-by-character loop (_runs_loop; its list is returned for strings
    under _SHORT characters, numbers of more than _MAX_GROUPS groups and strings of 4 M characters
    and more, where int64 could overflow). It is what checking every GT and prediction RLE costs:
    the loop alone was ~70% of scoring SA-Co/Gold and GroundingSuite-Eval (perf/bench_score_new.py)."""
    n = len(data)
    if n < _SHORT or n >= 1 << 22:
        return _runs_loop(data)
    v = np.frombuffer(data, dtype=np.uint8) - np.uint8(48)  # below '0' wraps past 63
    outside = v >= 64
    stop = int(outside.argmax()) if n and outside.any() else n  # the loop reads up to the first bad character
    c = v[:stop].astype(np.int64)
    ends = np.flatnonzero((c & 0x20) == 0)  # the last group of each complete number
    x = np.zeros(0, dtype=np.int64)
    if ends.size:
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        groups = ends - starts + 1
        if int(groups.max()) > _MAX_GROUPS:
            return _runs_loop(data)
        used = c[:int(ends[-1]) + 1]
        shift = 5 * (np.arange(used.size) - np.repeat(starts, groups))
        x = np.add.reduceat((used & 0x1F) << shift, starts)
        negative = (used[ends] & 0x10) != 0
        x[negative] -= np.int64(1) << (5 * groups[negative])  # x | (-1 << 5k), as x < 2**5k
        np.cumsum(x[1::2], out=x[1::2])  # from the fourth run on: the difference to the run two before
        np.cumsum(x[2::2], out=x[2::2])
        if x.min() < 0:
            first = int((x < 0).argmax())
            raise ValueError(f"run {first} has a negative length ({int(x[first])})")
    if stop < n:
        raise ValueError(f"character {chr(data[stop])!r} at offset {stop} is not an RLE character ('0'..'o')")
    if c.size and c[-1] & 0x20:
        raise ValueError(f"truncated: the string ends inside run {ends.size}")
    return x


def _runs_loop(data: bytes) -> list[int]:
    """compressed_runs character by character, with Python's unbounded ints."""
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


@lru_cache(maxsize=4096)
def _compressed_total(counts: str | bytes) -> tuple[int, int, str | None]:
    """(the runs' sum, their number, None) of a compressed counts string, or (0, 0, what is corrupt).
    Memoised by value: a prediction's RLE is checked where it is read and again where it is scored."""
    try:
        runs = _runs_array(counts.encode("ascii") if isinstance(counts, str) else bytes(counts))
    except (ValueError, UnicodeEncodeError) as exc:
        return 0, 0, f"compressed 'counts' {counts[:40]!r} are corrupt: {exc}"
    return (int(runs.sum()) if isinstance(runs, np.ndarray) else sum(runs)), len(runs), None


def rle_problem(rle: Any, size: tuple[int, int] | None = None) -> str | None:
    """What is wrong with one COCO RLE entry, or None when it is well formed (and of ``size`` = (H, W)
    when given). Checks what scoring will need, without decoding the mask: a dict with ``size`` [H, W]
    (two non-negative ints) and ``counts``; uncompressed counts (a list) of non-negative ints; compressed
    counts (str or bytes) readable run by run (``compressed_runs``); the runs summing to exactly
    H*W (more = runs that overrun the frame, fewer = a truncated string); and at most H*W + 1 runs
    (more are runs of length 0, which pycocotools' merge writes past its buffer of H*W + 1: a heap
    corruption that kills the process). Cost: one pass over the counts string (no H x W array)."""
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
        total, n_runs = sum(counts), len(counts)
    elif isinstance(counts, (str, bytes)):
        total, n_runs, corrupt = _compressed_total(counts)
        if corrupt:
            return corrupt
    else:
        return f"'counts' must be a str, bytes or list, got {type(counts).__name__}"
    if total != height * width:
        what = "overrun the frame" if total > height * width else "stop short (truncated?)"
        return f"'counts' runs sum to {total} pixels, expected H*W = {height * width}: they {what}"
    if n_runs > height * width + 1:  # zero-length runs: pycocotools' merge copies them into H*W + 1 slots
        return f"'counts' holds {n_runs} runs, more than H*W + 1 = {height * width + 1} (runs of length 0)"
    return None


def check_rle(rle: Any, size: tuple[int, int] | None, where: str) -> None:
    """Raise DatasetFormatError "<where>: <problem>" when ``rle_problem(rle, size)`` finds one."""
    problem = rle_problem(rle, size)
    if problem is not None:
        raise DatasetFormatError(f"{where}: {problem}")


def empty(height: int, width: int) -> RLE:
    """RLE of an all-background (H, W) mask."""
    if height * width == 0:
        return encode(np.zeros((height, width), dtype=bool))
    return compress({"size": [int(height), int(width)], "counts": [int(height) * int(width)]})


def area(rle: RLE | None) -> int:
    """Foreground pixel count of an RLE (0 for None)."""
    return 0 if rle is None else int(mask_utils.area(_coded(rle)))


def intersection_union(a: RLE, b: RLE) -> tuple[int, int]:
    """(|a AND b|, |a OR b|) in pixels of two RLEs of the same (H, W): the sums of
    np.logical_and / np.logical_or of their decoded masks, from the runs (pycocotools merge and area)
    without an H x W array. Raises DatasetFormatError for a malformed RLE (checked as decode checks
    it) or two sizes."""
    (ha, wa, _), (hb, wb, _) = _checked_runs(a), _checked_runs(b)
    if (ha, wa) != (hb, wb):
        raise DatasetFormatError(f"masks of two sizes: {[ha, wa]} and {[hb, wb]} (H, W)")
    ca, cb = _coded(a), _coded(b)
    inter = int(mask_utils.area(mask_utils.merge([ca, cb], intersect=True)))
    return inter, int(mask_utils.area(ca)) + int(mask_utils.area(cb)) - inter


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


def coverage(rles: Sequence[RLE], height: int, width: int, wrap: bool = True) -> np.ndarray:
    """(H, W) per pixel, how many of `rles` cover it: with `wrap`, uint8 modulo 256, which is the
    uint8 sum of their decoded masks (``np.sum(mask_utils.decode(rles), axis=2).astype(np.uint8)``,
    LISA's RefCOCO GT); without, bool: covered by any (their union).

    Computed from the runs (their starts and ends, sorted once), never decoding one mask: the cost
    is O(runs log runs) plus one (H, W) array, whatever the number of RLEs. Raises
    DatasetFormatError for a malformed RLE or one whose size is not (height, width)."""
    n = int(height) * int(width)
    starts, ends = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for rle in rles:
        h, w, runs = _checked_runs(rle)
        if (h, w) != (int(height), int(width)):
            raise DatasetFormatError(f"segmentation RLE is {[h, w]} (H, W), the image is {[int(height), int(width)]}")
        edges = np.cumsum(runs)  # run i covers [edges[i-1], edges[i]); runs alternate background, foreground
        ends.append(edges[1::2])
        starts.append(edges[0::2][:len(ends[-1])])
    pos = np.concatenate(starts + ends)
    opened = sum(len(a) for a in starts)
    step = np.concatenate([np.ones(opened, np.int64), -np.ones(len(pos) - opened, np.int64)])
    order = np.argsort(pos, kind="stable")
    pos, level = pos[order], np.cumsum(step[order])
    last = np.r_[pos[1:] != pos[:-1], True] if pos.size else np.zeros(0, bool)  # the level after a position's last event
    pos, level = pos[last], level[last]
    lengths = np.diff(np.r_[0, pos, n])
    values = np.r_[0, level]
    values = (values % 256).astype(np.uint8) if wrap else values > 0
    return np.repeat(values, lengths).reshape(int(width), int(height)).T  # COCO runs are column-major


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
        try:
            return mask_utils.frPyObjects({"size": [h, w], "counts": counts}, h, w)
        except OverflowError as exc:  # a negative or huge run (pycocotools packs runs as uint32)
            raise ValueError(f"runs must be non-negative 32-bit counts: {exc}") from exc
    return {"size": list(rle["size"]), "counts": counts.encode("ascii") if isinstance(counts, str) else counts}


# --- LabelMe polygons -----------------------------------------------------------------------------


def rasterize_labelme(shapes: Sequence[dict], height: int, width: int) -> np.ndarray:
    """Label map of LabelMe shapes following LISA `utils/data_processing.py::get_mask_from_json`.

    shapes: [{"label": str, "points": [[x, y], ...]}, ...] in pixels.
    Returns (H, W) uint8: 0 background, 1 target, 255 ignore. Rules (LISA's, kept exactly):
    a label whose lower() equals "flag" is skipped; "ignore" anywhere in lower() means 255;
    points are truncated toward zero by int32 conversion; each shape is drawn as a 1-px closed
    outline (cv2.polylines) then filled (`fill_poly_cv48`: OpenCV 4.8.0's fillPoly, LISA's pin,
    whatever OpenCV is installed); shapes are drawn in descending order of their own rasterised area
    (np.argsort(area)[::-1]), so smaller shapes end on top.
    Raises DatasetFormatError when a shape lacks a label or points, or when the shapes hold more
    points than dataset.limits.max_polygon_points (checked before anything is drawn).
    """
    _check_points(shapes)
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
        fill_poly_cv48(tmp, poly[0], 1)
        areas.append(tmp.sum())
        kept.append((label, poly))
    label_map = np.zeros((height, width), dtype=np.uint8)
    for idx in np.argsort(areas)[::-1]:
        label, poly = kept[idx]
        value = IGNORE_VALUE if "ignore" in label.lower() else 1
        cv2.polylines(label_map, poly, True, value, 1)
        fill_poly_cv48(label_map, poly[0], value)
    return label_map


def rasterize_polygon(points: Sequence[Sequence[float]], height: int, width: int) -> np.ndarray:
    """One polygon as an (H, W) bool mask, drawn like LISA draws a shape (outline + fill, int32 points).
    Raises DatasetFormatError over dataset.limits.max_polygon_points points."""
    _check_points([{"points": points}])
    poly = np.array([points], dtype=np.int32)
    out = np.zeros((height, width), dtype=np.uint8)
    cv2.polylines(out, poly, True, 1, 1)
    fill_poly_cv48(out, poly[0], 1)
    return out.astype(bool)


def _check_points(shapes: Sequence[Any]) -> None:
    """DatasetFormatError when the shapes' point lists hold more than max_polygon_points points in
    all (the fill's work grows with points x rows)."""
    limit = files.limits().max_polygon_points
    total = sum(len(s["points"]) for s in shapes if isinstance(s, dict) and isinstance(s.get("points"), list))
    if total > limit:
        raise DatasetFormatError(f"the polygons hold {total:,} points, more than the {limit:,} allowed "
                                 f"(dataset.limits.max_polygon_points)")


# OpenCV's fixed-point drawing precision (imgproc/src/drawing.cpp XY_SHIFT)
_XY_SHIFT = 16
_XY_ONE = 1 << _XY_SHIFT


def fill_poly_cv48(img: np.ndarray, points: np.ndarray, color: int) -> None:
    """`cv2.fillPoly(img, [points], color)` exactly as OpenCV 4.8.0 draws it (LINE_8, shift 0), in place.

    img: (H, W) uint8; points: (N, 2) int x, y pixels. Reference: OpenCV 4.8.0
    (opencv-python-headless 4.8.0.74, LISA's pin) `modules/imgproc/src/drawing.cpp`:
    `CollectPolyEdges` ported line by line (64-bit fixed point with 16 fractional bits, edges
    started half a pixel right of unclipped vertices, clipped edges through `clipLine`'s double
    arithmetic) and `FillEdgeCollection`'s pixels computed row block by row block (`_fill_edges`).
    The outline OpenCV's fillPoly also draws is `cv2.line`'s, the same in every version, drawn here
    with cv2.polylines. OpenCV 4.11+ fills some sloped edges differently (opencv issue 26130), so
    LISA's ReasonSeg masks depend on this port, not on the installed OpenCV.
    Cost: linear in the points plus (rows x edges crossing them) log(edges), at most the image's
    rows (a vertex at y = -2**31 costs nothing); OpenCV's own loop is quadratic in crossing edges.
    """
    pts = np.asarray(points, dtype=np.int64).reshape(-1, 2)
    height, width = img.shape[:2]
    cv2.polylines(img, [pts.astype(np.int32)], True, color, 1)
    _fill_edges(img, _poly_edges(pts, width, height), color)


def _poly_edges(pts: np.ndarray, width: int, height: int) -> list[tuple[int, int, int, int]]:
    """OpenCV 4.8.0 CollectPolyEdges: (y0, y1, x at y0, dx per row) per non-horizontal edge, x and
    dx in 16-bit fixed point, Python ints (no overflow)."""
    edges = []
    x0, y0 = int(pts[-1, 0]) << _XY_SHIFT, int(pts[-1, 1])
    for px, py in pts.tolist():
        x1, y1 = int(px) << _XY_SHIFT, int(py)
        c0x, c0y, c1x, c1y = x0, y0, x1, y1
        t0x, t1x = (x0 + (_XY_ONE >> 1)) >> _XY_SHIFT, (x1 + (_XY_ONE >> 1)) >> _XY_SHIFT
        t0y, t1y = y0, y1
        if not (0 <= t0x < width and 0 <= t1x < width and 0 <= t0y < height and 0 <= t1y < height):
            t0x, t0y, t1x, t1y = _clip_line(width, height, t0x, t0y, t1x, t1y)
            if t0y != t1y:
                c0x, c0y, c1x, c1y = t0x << _XY_SHIFT, t0y, t1x << _XY_SHIFT, t1y
        else:
            c0x += _XY_ONE >> 1
            c1x += _XY_ONE >> 1
        if y0 != y1:
            dx = _cdiv(c1x - c0x, c1y - c0y)
            if y0 < y1:
                edges.append((y0, y1, c0x + (y0 - c0y) * dx, dx))
            else:
                edges.append((y1, y0, c1x + (y1 - c1y) * dx, dx))
        x0, y0 = x1, y1
    return edges


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _clip_line(width: int, height: int, x1: int, y1: int, x2: int, y2: int) -> tuple[int, int, int, int]:
    """OpenCV's clipLine(Size2l, Point2l&, Point2l&): the segment clipped to the image, in place
    arithmetic as the C++ (double products, truncation toward zero, the second point clipped with
    the first already moved)."""
    right, bottom = width - 1, height - 1
    if width <= 0 or height <= 0:
        return x1, y1, x2, y2
    c1 = (x1 < 0) + (x1 > right) * 2 + (y1 < 0) * 4 + (y1 > bottom) * 8
    c2 = (x2 < 0) + (x2 > right) * 2 + (y2 < 0) * 4 + (y2 > bottom) * 8
    if (c1 & c2) == 0 and (c1 | c2) != 0:
        if c1 & 12:
            a = 0 if c1 < 8 else bottom
            x1 += int(float(a - y1) * (x2 - x1) / (y2 - y1))
            y1 = a
            c1 = (x1 < 0) + (x1 > right) * 2
        if c2 & 12:
            a = 0 if c2 < 8 else bottom
            x2 += int(float(a - y2) * (x2 - x1) / (y2 - y1))
            y2 = a
            c2 = (x2 < 0) + (x2 > right) * 2
        if (c1 & c2) == 0 and (c1 | c2) != 0:
            if c1:
                a = 0 if c1 == 1 else right
                y1 += int(float(a - x1) * (y2 - y1) / (x2 - x1))
                x1 = a
            if c2:
                a = 0 if c2 == 1 else right
                y2 += int(float(a - x2) * (y2 - y1) / (x2 - x1))
                x2 = a
    return x1, y1, x2, y2


# (row, edge) x values computed at once, bounding memory: rows are taken in blocks of about this many
_BLOCK_VALUES = 1 << 21


def _fill_edges(img: np.ndarray, edges: list[tuple[int, int, int, int]], color: int) -> None:
    """The pixels OpenCV 4.8.0 FillEdgeCollection (LINE_8) draws for `edges`, in place.

    OpenCV walks the rows from the top edge's y, keeping the edges that cross the row (y0 <= y < y1)
    in a list sorted by x (insertion in order, a bubble sort after each row), draws the span between
    the 1st and 2nd, 3rd and 4th ... edge, inclusive of both ends (x >> 16, clipped to the image),
    and advances each edge's x by dx. A closed polygon crosses every row an even number of times, so
    every crossing edge is advanced every row: at row y an edge's x is x0 + (y - y0) * dx, and the
    spans are the consecutive pairs of the row's sorted x values. That is computed here for all
    (row, edge) pairs of a block of rows at once, sorted by (row, x); rows above the image draw
    nothing and are skipped. Exact: x in Python integers where int64 could overflow (as OpenCV's
    own int64 would), then clamped to just outside the image (an order-preserving change that
    draws the same pixels).
    """
    height, width = img.shape[:2]
    if len(edges) < 2:
        return
    y0, y1, x, dx = (list(v) for v in zip(*edges))
    y_min, y_max = min(y0), max(y1)
    ends = [a + (b - c) * d for a, b, c, d in zip(x, y1, y0, dx)]
    x_min = min(min(x), min(ends))
    x_max = max(-1, max(x), max(ends))  # C++ starts x_max at (int64)0xFFFF... = -1
    if y_max < 0 or y_min >= height or x_max < 0 or x_min >= (width << _XY_SHIFT):
        return
    first, stop = max(y_min, 0), min(y_max, height)
    if first >= stop:
        return
    Y0, Y1 = np.asarray(y0, dtype=np.int64), np.asarray(y1, dtype=np.int64)
    lo, hi = np.clip(Y0, first, stop), np.clip(Y1, first, stop)  # each edge's rows inside [first, stop)
    wide = max(abs(a) + abs(d) * (b - c) for a, b, c, d in zip(x, y1, y0, dx)) >= 1 << 62
    X, DX = (np.asarray(v, dtype=object if wide else np.int64) for v in (x, dx))
    # rows per block: about _BLOCK_VALUES (row, edge) values each
    per_row = np.cumsum(np.bincount(lo - first, minlength=stop - first + 1)
                        - np.bincount(hi - first, minlength=stop - first + 1))[:-1]
    cuts = np.searchsorted(np.cumsum(per_row), np.arange(_BLOCK_VALUES, int(per_row.sum()), _BLOCK_VALUES))
    for top, bottom in zip([first, *(first + cuts + 1).tolist()], [*(first + cuts + 1).tolist(), stop]):
        if top < bottom:
            _draw_rows(img, top, min(bottom, stop), X, DX, Y0, np.clip(lo, top, bottom), np.clip(hi, top, bottom), color)


def _draw_rows(img: np.ndarray, top: int, bottom: int, X: np.ndarray, DX: np.ndarray, Y0: np.ndarray,
               lo: np.ndarray, hi: np.ndarray, color: int) -> None:
    """Rows top..bottom-1 of `_fill_edges`: edge k crosses rows lo[k]..hi[k]-1 of them."""
    width = img.shape[1]
    count = hi - lo
    edge = np.repeat(np.arange(count.size), count)
    if edge.size < 2:
        return
    row = lo[edge] + (np.arange(edge.size) - np.repeat(np.cumsum(count) - count, count))
    xs = X[edge] + (row - Y0[edge]) * DX[edge]
    # x outside [-1, width] pixels draws the same as x at its bound (a monotone change): one int64
    # sort key per (row, x) then, rows apart by more than any x
    low, span = -_XY_ONE, (width + 2) << _XY_SHIFT
    xs = np.minimum(np.maximum(xs, low), low + span - 1)
    key = np.sort((row - top) * span + (xs.astype(np.int64) - low))
    row, xs = key // span, key % span + low
    if not np.array_equal(row[0::2], row[1::2]):  # an odd count in a row: impossible for a closed polygon
        raise AssertionError("fill_poly_cv48: a row crossed an odd number of times")
    left, right, r = xs[0::2] >> _XY_SHIFT, xs[1::2] >> _XY_SHIFT, row[0::2]
    keep = (left < width) & (right >= 0)
    r, left, right = r[keep], np.maximum(left[keep], 0), np.minimum(right[keep], width - 1)
    if r.size <= 4 * (bottom - top):  # a few spans per row (any simple polygon): one slice each, as OpenCV
        for y, a, b in zip((r + top).tolist(), left.tolist(), right.tolist()):
            img[y, a:b + 1] = color
        return
    stride, n = width + 1, (bottom - top) * (width + 1)
    cover = np.bincount(r * stride + left, minlength=n) - np.bincount(r * stride + right + 1, minlength=n)
    filled = np.cumsum(cover.reshape(bottom - top, stride), axis=1)[:, :width] > 0
    img[top:bottom][filled] = color


# --- PNG masks ------------------------------------------------------------------------------------


def read_png_mask(path: str | Path) -> np.ndarray:
    """Read a PNG mask as (H, W) bool, any nonzero value (any channel) = foreground, as
    ``cv2.imread(path, cv2.IMREAD_UNCHANGED)`` reads it.

    Raises DatasetFormatError when the file is missing, unreadable, not a regular file, or larger
    than dataset.limits allows (bytes, or pixels from its header: checked before any decode)."""
    buf = files.read_data(path, "mask PNG")
    files.check_image_pixels(buf, path, "mask PNG")
    try:
        arr = cv2.imdecode(np.frombuffer(buf, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    except cv2.error:
        arr = None
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
