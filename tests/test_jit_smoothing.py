"""adapters/jit/smoothing.py: JiT's exponential smoothing of masks over time."""
from __future__ import annotations

import numpy as np
import pytest

from rvt_bench.adapters.jit.smoothing import smooth_masks
from rvt_bench.core import masks as mask_io

ON = mask_io.encode(np.ones((2, 2), bool))


def test_a_pixel_shows_after_four_frames_at_alpha_0_8():
    out = smooth_masks([None, ON, ON, ON, ON], 2, 2, alpha=0.8)
    assert [m is not None for m in out] == [False, False, False, False, True]  # 1 - 0.8**4 = 0.59


def test_a_pixel_lingers_three_frames_after_it_disappears():
    out = smooth_masks([ON, None, None, None, None], 2, 2, alpha=0.8)
    assert [m is not None for m in out] == [True, True, True, True, False]  # 0.8**3 = 0.51, 0.8**4 = 0.41


def test_alpha_zero_returns_the_masks():
    masks = [ON, None, ON]
    assert [m is not None for m in smooth_masks(masks, 2, 2, alpha=0.0)] == [True, False, True]


def test_alpha_out_of_range_is_refused():
    with pytest.raises(ValueError):
        smooth_masks([ON], 2, 2, alpha=1.0)
