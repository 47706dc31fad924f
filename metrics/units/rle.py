"""Validation of the RLEs a scorer reads, in one place: a malformed or wrongly sized *predicted* mask
is the model's fault (AdapterError), a malformed *GT* mask the dataset's (DatasetFormatError); every
message names the sample and the frame."""
from __future__ import annotations

from typing import Any

import numpy as np

from rvt_bench.core.masks import bbox, decode, decode_box
from rvt_bench.core.types import RLE, AdapterError, DatasetFormatError, Prediction, Sample

Box = tuple[int, int, int, int]  # (y0, y1, x0, x1), half-open pixel rows and columns
_ERRORS = {"ground-truth": DatasetFormatError, "predicted": AdapterError}


def _error(what: str) -> type[Exception]:
    return _ERRORS.get(what, AdapterError)


def _where(sample: Sample, frame: int) -> str:
    return f"sample {sample.id!r} frame {frame}"


def rle_size_box(sample: Sample, frame: int, rle: Any, what: str) -> tuple[tuple[int, int], Box | None]:
    """((H, W), foreground box or None when empty) of one RLE, read without decoding it.

    what: "ground-truth" (errors are DatasetFormatError) or "predicted" (AdapterError). Raises when
    the RLE is not a COCO RLE dict or its size is not (H, W)."""
    try:
        size = tuple(int(v) for v in rle["size"])
        found = bbox(rle)
    except (DatasetFormatError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _error(what)(f"{_where(sample, frame)}: {what} mask is not a valid COCO RLE: {exc}") from exc
    if len(size) != 2:
        raise _error(what)(f"{_where(sample, frame)}: {what} mask has size {list(size)}, expected (H, W)")
    return size, found


def check_same_size(sample: Sample, frame: int, gt_size: tuple[int, ...], pred_size: tuple[int, ...]) -> None:
    """AdapterError when the predicted mask's (H, W) differs from the GT's."""
    if tuple(gt_size) != tuple(pred_size):
        raise AdapterError(f"{_where(sample, frame)}: predicted mask is {list(pred_size)} (H, W), "
                           f"the ground truth is {list(gt_size)}")


def decode_checked(sample: Sample, frame: int, rle: RLE | None, what: str) -> np.ndarray | None:
    """The (H, W) bool mask of `rle` (None for None); a malformed RLE raises as `rle_size_box`."""
    if rle is None:
        return None
    try:
        mask = decode(rle)
    except (DatasetFormatError, AttributeError, TypeError, KeyError) as exc:  # bad counts, or not a dict at all
        raise _error(what)(f"{_where(sample, frame)}: {what} mask is not a valid COCO RLE: {exc}") from exc
    if mask.ndim != 2:
        raise _error(what)(f"{_where(sample, frame)}: {what} mask decodes to shape {mask.shape}, expected (H, W)")
    return mask


def crop_checked(sample: Sample, frame: int, rle: RLE | None, box: Box, what: str) -> np.ndarray:
    """The bool mask of `rle` inside `box` (all False for None); a malformed RLE raises as `rle_size_box`."""
    if rle is None:
        return np.zeros((box[1] - box[0], box[3] - box[2]), dtype=bool)
    try:
        return decode_box(rle, box)
    except DatasetFormatError as exc:
        raise _error(what)(f"{_where(sample, frame)}: {what} mask is not a valid COCO RLE: {exc}") from exc


def predicted_masks(sample: Sample, pred: Prediction) -> list[RLE | None]:
    """pred.masks checked against the sample's frame count; all-None when the prediction has none
    (a failed or non-segmentation answer scores as empty). Raises AdapterError on a length mismatch."""
    n = sample.num_frames
    if pred.masks is None:
        return [None] * n
    if len(pred.masks) != n:
        raise AdapterError(f"sample {sample.id!r}: prediction has {len(pred.masks)} masks, the sample has {n} frames")
    return list(pred.masks)


def decode_pair(sample: Sample, frame: int, gt: RLE | None, pred: RLE | None) -> tuple[np.ndarray, np.ndarray]:
    """Decode one frame's GT and predicted RLE (None = empty) to (H, W) bool arrays of one size.

    The size comes from whichever RLE is present; call only when at least one is. Raises AdapterError
    for a malformed predicted RLE or one whose size differs from the GT's, DatasetFormatError for a
    malformed GT RLE; both messages name the sample and frame.
    """
    gt_mask = decode_checked(sample, frame, gt, "ground-truth")
    pred_mask = decode_checked(sample, frame, pred, "predicted")
    if gt_mask is not None and pred_mask is not None:
        check_same_size(sample, frame, gt_mask.shape, pred_mask.shape)
    shape = gt_mask.shape if gt_mask is not None else pred_mask.shape
    empty = np.zeros(shape, dtype=bool)
    return (gt_mask if gt_mask is not None else empty), (pred_mask if pred_mask is not None else empty)
