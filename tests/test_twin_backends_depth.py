"""adapters/twin/backends/depth_anything.py with a tiny random-weight DepthAnything V2."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rvt_bench.adapters.twin.backends.depth_anything import DepthAnythingBackend


@pytest.fixture(scope="module")
def depth():
    return DepthAnythingBackend.tiny(seed=0, device="cpu", batch_size=2)


def _frames(n, height, width, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, (height, width, 3), dtype=np.uint8) for _ in range(n)]


@pytest.mark.parametrize("height,width", [(40, 90), (90, 40), (33, 33)])
def test_one_float32_map_per_frame_at_the_frames_size(depth, height, width):
    maps = depth.estimate(_frames(3, height, width))
    assert [m.shape for m in maps] == [(height, width)] * 3
    assert all(m.dtype == np.float32 and np.isfinite(m).all() for m in maps)


def test_batching_does_not_change_the_maps(depth):
    frames = _frames(3, 40, 90, seed=3)
    batched = depth.estimate(frames)
    single = [depth.estimate([f])[0] for f in frames]
    for a, b in zip(batched, single):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_map_is_the_models_output_resized_bicubically_to_the_frame(depth):
    frame = _frames(1, 40, 90, seed=5)[0]
    model, processor = depth.components()
    inputs = processor(images=[frame], return_tensors="pt")
    assert tuple(inputs["pixel_values"].shape[-2:]) == (28, 56)  # aspect kept, multiples of 14
    with torch.no_grad():
        raw = model(**inputs).predicted_depth  # (1, 28, 56)
    expected = torch.nn.functional.interpolate(raw[:, None], size=(40, 90), mode="bicubic", align_corners=False)[0, 0]
    np.testing.assert_allclose(depth.estimate([frame])[0], expected.numpy(), rtol=1e-5, atol=1e-5)


def test_relative_checkpoints_say_larger_is_nearer(depth):
    assert depth.convention() == ("relative", "relative inverse depth, larger = nearer")


def test_metric_checkpoints_say_metres_larger_is_farther():
    metric = DepthAnythingBackend.tiny(seed=0, device="cpu")
    metric.components()[0].config.depth_estimation_type = "metric"
    assert metric.convention() == ("m", "larger = farther")


def test_same_seed_same_weights():
    a = DepthAnythingBackend.tiny(seed=7, device="cpu").estimate(_frames(1, 20, 30))[0]
    b = DepthAnythingBackend.tiny(seed=7, device="cpu").estimate(_frames(1, 20, 30))[0]
    np.testing.assert_array_equal(a, b)
