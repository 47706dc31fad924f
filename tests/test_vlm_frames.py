"""adapters/vlm/frames.py: which frames a VLM sees and at what size."""
from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as qwen_smart_resize

from rvt_bench.adapters.vlm.frames import data_url, resize, sample_indices, smart_resize
from rvt_bench.core.types import AdapterError


def test_an_image_is_frame_zero():
    assert sample_indices(1, count=16) == [0]


def test_count_spaces_frames_evenly_from_first_to_last():
    assert sample_indices(20, count=5) == [0, 5, 10, 14, 19]
    assert sample_indices(12, count=1) == [0]


def test_no_count_and_no_fps_shows_every_frame():
    assert sample_indices(4) == [0, 1, 2, 3]


def test_fps_steps_by_source_fps_over_fps():
    assert sample_indices(12, fps=2, source_fps=6) == [0, 3, 6, 9]


def test_fps_is_ignored_without_the_samples_fps_and_count_caps_it():
    assert sample_indices(12, count=3, fps=2, source_fps=None) == [0, 6, 11]
    assert sample_indices(30, count=3, fps=2, source_fps=6) == [0, 12, 27]


def test_bad_sampling_settings_are_refused():
    with pytest.raises(AdapterError, match="num_frames"):
        sample_indices(5, count=0)
    with pytest.raises(AdapterError, match="fps"):
        sample_indices(5, fps=0)


@pytest.mark.parametrize("hw", [(40, 90), (100, 30), (480, 854), (1080, 1920), (28, 28), (7, 500)])
@pytest.mark.parametrize("bounds", [(56 * 56, 112 * 112), (3136, 401408), (3136, 28 * 28 * 1280)])
def test_smart_resize_matches_transformers_qwen2_vl(hw, bounds):
    assert smart_resize(*hw, factor=28, min_pixels=bounds[0], max_pixels=bounds[1]) == \
        tuple(qwen_smart_resize(*hw, factor=28, min_pixels=bounds[0], max_pixels=bounds[1]))


def test_resize_gives_the_requested_size_and_keeps_an_already_sized_frame():
    frame = np.zeros((50, 70, 3), np.uint8)
    assert resize(frame, (56, 84)).shape == (56, 84, 3)
    assert resize(frame, (50, 70)) is frame


def test_png_data_url_decodes_to_the_same_pixels():
    frame = np.random.default_rng(0).integers(0, 255, (9, 13, 3), dtype=np.uint8)
    url = data_url(frame)
    assert url.startswith("data:image/png;base64,")
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    assert np.array_equal(decoded, frame)
