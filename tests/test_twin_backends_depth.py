"""adapters/twin/backends/depth_anything.py with a tiny random-weight DepthAnything V2."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rvt_bench.adapters.twin.backends.depth_anything import DepthAnythingBackend
from rvt_bench.core.types import AdapterError


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


# --- metric depth (issue 43 item 4b): perception/depth=metric_indoor | metric_outdoor ----------------


@pytest.fixture(scope="module")
def metric():
    return DepthAnythingBackend.tiny(seed=0, device="cpu", max_depth=20)


def test_a_metric_model_reports_metres_and_its_maps_are_its_output_in_metres(metric):
    assert metric.convention() == ("m", "larger = farther")
    assert metric.model_id == "tiny-random/depth-anything-v2-metric-20"
    frame = _frames(1, 40, 90, seed=5)[0]
    model, processor = metric.components()
    with torch.no_grad():
        raw = model(**processor(images=[frame], return_tensors="pt")).predicted_depth
    expected = torch.nn.functional.interpolate(raw[:, None], size=(40, 90), mode="bicubic", align_corners=False)[0, 0]
    got = metric.estimate([frame])[0]
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-5)
    assert 0 < raw.min() and raw.max() < 20  # the metric head: sigmoid x max_depth metres


def test_the_relative_tiny_model_is_as_before():
    relative = DepthAnythingBackend.tiny(seed=0, device="cpu")
    assert relative.model_id == "tiny-random/depth-anything-v2" and relative.fingerprint()["params"] == {}
    assert relative.components()[0].config.depth_estimation_type == "relative"


def _perception(tmp_path, *overrides):
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)
    from rvt_bench.core.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"run.root={tmp_path}", *overrides]).perception


@pytest.mark.parametrize("choice, model_id", [
    (None, "depth-anything/Depth-Anything-V2-Small-hf"),
    ("metric_indoor", "depth-anything/Depth-Anything-V2-Metric-Indoor-Small-hf"),
    ("metric_outdoor", "depth-anything/Depth-Anything-V2-Metric-Outdoor-Small-hf")])
def test_the_depth_setting_picks_the_checkpoint(tmp_path, choice, model_id):
    from hydra.utils import instantiate

    overrides = ["perception=foundation"] + ([f"perception/depth={choice}"] if choice else [])
    built = instantiate(_perception(tmp_path, *overrides), _convert_="all")
    assert built.backends["DepthAnything2"].model_id == model_id
    assert built.backends["DepthAnything2"]._components is None  # nothing loaded


def test_metric_depth_reaches_the_twin_in_metres(tmp_path):
    from hydra.utils import instantiate
    from omegaconf import open_dict
    from PIL import Image

    from rvt_bench.adapters.twin.builder import build_twin
    from rvt_bench.core import masks as mask_io
    from rvt_bench.core.types import Sample, Target

    node = _perception(tmp_path, "perception=tiny", "perception/depth=tiny_metric")
    with open_dict(node):
        node.cache.enabled = False
    perception = instantiate(node, _convert_="all")
    paths = []
    for t, frame in enumerate(_frames(2, 48, 64, seed=9)):
        paths.append(str(tmp_path / f"{t}.png"))
        Image.fromarray(frame).save(paths[-1])
    sample = Sample(id="clip/0", dataset="toy", split="test", modality="video", frames=paths, frame_ids=["0", "1"],
                    query="the dog", task="segmentation", target=Target(masks=[None, None]))
    twin = build_twin(sample, ["SAM2", "DepthAnything2", "DepthStats"], perception)
    assert twin.instances
    assert '"depth_unit":"m, larger = farther"' in twin.to_llm_json()
    maps = np.stack(perception.backends["DepthAnything2"].estimate([np.array(Image.open(p)) for p in paths]))
    maps = maps.astype(np.float16).astype(np.float64)  # as the twin stores them
    for inst in twin.instances:
        pixels = np.concatenate([maps[t][mask_io.decode(twin.masks[fr.mask])] for t, fr in sorted(inst.frames.items())])
        assert inst.depth.unit == "m" and inst.depth.convention == "larger = farther"
        assert inst.depth.mean == pytest.approx(pixels.mean(), rel=1e-9) and 0 < inst.depth.mean < 20


# --- the declared kind (depth_estimation_type): known before loading, held against the checkpoint -----


def test_the_declared_kind_is_known_without_loading_anything():
    indoor = DepthAnythingBackend(model_id="depth-anything/Depth-Anything-V2-Metric-Indoor-Small-hf",
                                  depth_estimation_type="metric")
    assert indoor.declared_convention() == ("m", "larger = farther") and indoor._components is None
    assert indoor.fingerprint()["params"] == {}  # the checkpoint decides the maps; run names unchanged
    assert DepthAnythingBackend().declared_convention() == ("relative", "relative inverse depth, larger = nearer")
    with pytest.raises(AdapterError, match="depth_estimation_type"):
        DepthAnythingBackend(depth_estimation_type="metres")


def test_a_checkpoint_of_another_kind_than_declared_is_refused_at_its_first_frame():
    declared_metric = DepthAnythingBackend.tiny(seed=0, device="cpu")  # a relative checkpoint ...
    declared_metric.depth_estimation_type = "metric"  # ... declared metric
    with pytest.raises(AdapterError, match="perception.depth.depth_estimation_type=relative"):
        declared_metric.estimate(_frames(1, 20, 30))
    assert DepthAnythingBackend.tiny(seed=0, device="cpu", max_depth=20).depth_estimation_type == "metric"
