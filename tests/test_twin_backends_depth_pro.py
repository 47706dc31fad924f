"""adapters/twin/backends/depth_pro.py (perception/depth=depth_pro, issue 43 item 4) with a tiny
random-weight Depth Pro: metres scaled by the estimated focal length as transformers'
post_process_depth_estimation does, the twin's unit, the config choice, the demo's twin."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rvt_bench.adapters.twin.backends.depth_pro import DepthProBackend
from rvt_bench.core.types import AdapterError


@pytest.fixture(scope="module")
def depth():
    return DepthProBackend.tiny(seed=0, device="cpu", batch_size=2)


def _frames(n, height, width, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, (height, width, 3), dtype=np.uint8) for _ in range(n)]


@pytest.mark.parametrize("height,width", [(40, 90), (90, 40), (33, 33)])
def test_one_positive_finite_varying_map_in_metres_per_frame(depth, height, width):
    maps = depth.estimate(_frames(3, height, width))
    assert [m.shape for m in maps] == [(height, width)] * 3
    for m in maps:
        assert m.dtype == np.float32 and np.isfinite(m).all()
        assert 1e-4 < m.min() and m.max() < 1e4  # inside post-processing's clamp: no pixel at its bound
        assert m.std() > 1e-3  # not one value


def test_maps_are_the_canonical_inverse_depth_scaled_by_the_estimated_focal_length(depth):
    """The formula of transformers' post_process_depth_estimation and Apple's DepthPro.infer, written out."""
    frame = _frames(1, 40, 90, seed=5)[0]
    model, processor = depth.components()
    with torch.no_grad():
        out = model(**processor(images=[frame], return_tensors="pt"))
    fov = float(out.field_of_view[0])
    assert 50 < fov < 70  # the tiny model's field-of-view head is set near 60 degrees
    focal_px = 0.5 * 90 / math.tan(0.5 * math.radians(fov))
    inverse = out.predicted_depth[:, None] * 90 / focal_px
    inverse = torch.nn.functional.interpolate(inverse, size=(40, 90), mode="bilinear", align_corners=False)[0, 0]
    expected = 1.0 / inverse.clamp(1e-4, 1e4)
    np.testing.assert_allclose(depth.estimate([frame])[0], expected.numpy(), rtol=1e-5, atol=1e-6)
    # a wider field of view is a shorter focal length: the same canonical map reads nearer
    with torch.no_grad():
        out.field_of_view = out.field_of_view + 20
    wider = processor.post_process_depth_estimation(out, target_sizes=[(40, 90)])[0]["predicted_depth"]
    assert (wider.numpy() < expected.numpy()).all()


def test_batching_does_not_change_the_maps(depth):
    frames = _frames(3, 40, 90, seed=3)
    batched = depth.estimate(frames)
    single = [depth.estimate([f])[0] for f in frames]
    for a, b in zip(batched, single):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_depth_pro_says_metres_larger_is_farther(depth):
    assert depth.convention() == ("m", "larger = farther")
    assert depth.fingerprint()["backend"] == "depth_pro" and depth.model_id == "tiny-random/depth-pro"


def test_a_checkpoint_without_the_field_of_view_head_is_refused_not_labelled_metres():
    backend = DepthProBackend.tiny(seed=0, device="cpu")
    model, _ = backend.components()
    model.fov_model = None  # as a checkpoint with use_fov_model: false loads
    with pytest.raises(AdapterError, match="no field-of-view head"):
        backend.convention()
    with pytest.raises(AdapterError, match="no field-of-view head"):
        backend.estimate(_frames(1, 40, 90))


def test_same_seed_same_weights():
    a = DepthProBackend.tiny(seed=7, device="cpu").estimate(_frames(1, 20, 30))[0]
    b = DepthProBackend.tiny(seed=7, device="cpu").estimate(_frames(1, 20, 30))[0]
    np.testing.assert_array_equal(a, b)


def _compose(tmp_path, *overrides):
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)
    from rvt_bench.core.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"run.root={tmp_path}", *overrides])


def test_the_depth_pro_setting_picks_apples_checkpoint_and_loads_nothing(tmp_path):
    from hydra.utils import instantiate

    built = instantiate(_compose(tmp_path, "perception=foundation", "perception/depth=depth_pro").perception,
                        _convert_="all")
    backend = built.backends["DepthAnything2"]
    assert type(backend) is DepthProBackend and backend.model_id == "apple/DepthPro-hf"
    assert backend._components is None  # nothing loaded
    fingerprint = built.fingerprint()["backends"]["DepthAnything2"]
    assert fingerprint["backend"] == "depth_pro" and fingerprint["model_id"] == "apple/DepthPro-hf"


def test_depth_pro_reaches_the_demos_twin_in_metres(tmp_path):
    """The demo's first sample, perception=tiny with perception/depth=tiny_depth_pro: every instance's
    depth is the mean of the backend's map over its mask, in metres, and the instances differ."""
    from hydra.utils import instantiate
    from omegaconf import open_dict

    from rvt_bench.adapters.twin.builder import build_twin
    from rvt_bench.core import masks as mask_io
    from rvt_bench.core.frames import read_frame
    from rvt_bench.harness.samples import load_samples

    cfg = _compose(tmp_path, "+dataset=demo", "dataset.split=demo", "+model=dtr1", "perception=tiny",
                   "perception/depth=tiny_depth_pro", "run.limit=1")
    with open_dict(cfg.perception):
        cfg.perception.cache.enabled = False
    perception = instantiate(cfg.perception, _convert_="all")
    sample = load_samples(cfg).samples[0]
    twin = build_twin(sample, ["SAM2", "DepthAnything2", "DepthStats"], perception)
    assert len(twin.instances) >= 2
    assert json.loads(twin.to_llm_json())["depth_unit"] == "m, larger = farther"
    assert json.loads(twin.to_llm_json(style="compact"))["depth_unit"] == "m, larger = farther"
    frames = [read_frame(p) for p in sample.frames]
    maps = np.stack(perception.backends["DepthAnything2"].estimate(frames)).astype(np.float16).astype(np.float64)
    means = []
    for inst in twin.instances:
        pixels = np.concatenate([maps[t][mask_io.decode(twin.masks[fr.mask])] for t, fr in sorted(inst.frames.items())])
        assert inst.depth.unit == "m" and inst.depth.convention == "larger = farther"
        assert inst.depth.mean == pytest.approx(pixels.mean(), rel=1e-9)
        assert 0 < inst.depth.mean < 1e4 and math.isfinite(inst.depth.std)
        means.append(inst.depth.mean)
    assert len(set(means)) > 1
