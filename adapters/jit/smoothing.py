"""JiT's temporal smoothing of the output masks (arXiv 2503.21056, sec. 3.4: an exponential moving
average with alpha = 0.8), an option of the JiT adapter.

Read here as S_0 = M_0, S_t = alpha * S_{t-1} + (1 - alpha) * M_t per pixel, mask_t = S_t >= 0.5:
alpha weighs the past, so a pixel must be on for a few frames before it shows (at alpha = 0.8, four
frames: 1 - 0.8**4 = 0.59) and stays on for a few frames after it disappears (0.8**3 = 0.51).
The paper gives alpha but not the formula's orientation; with alpha weighing the present, any
alpha > 0.5 would return binary masks unchanged.
"""
from __future__ import annotations

import numpy as np

from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import RLE


def smooth_masks(masks: list[RLE | None], height: int, width: int, alpha: float = 0.8) -> list[RLE | None]:
    """Per frame RLE (None = empty) -> smoothed per frame RLE (None where the result is empty).
    Raises ValueError unless 0 <= alpha < 1."""
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"smoothing alpha must be in [0, 1), got {alpha}")
    state: np.ndarray | None = None
    out: list[RLE | None] = []
    for rle in masks:
        current = np.zeros((height, width), np.float32) if rle is None else mask_io.decode(rle).astype(np.float32)
        state = current if state is None else alpha * state + (1.0 - alpha) * current
        binary = state >= 0.5
        out.append(mask_io.encode(binary) if binary.any() else None)
    return out
