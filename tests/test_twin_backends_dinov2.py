"""DINOv2 as a twin tool (adapters/twin/backends/dinov2.py: the model and the "DINOv2" plan node's
step, which foundation perception runs): a tiny random-weight Dinov2Model built from its config."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from rvt_bench.adapters.twin import registry
from rvt_bench.adapters.twin.backends.dinov2 import Dinov2Backend, dinov2_step
from rvt_bench.adapters.twin.backends.sam2_hf import Sam2HFBackend
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.cache import ToolCache
from rvt_bench.adapters.twin.foundation import FoundationPerception
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.core.types import AdapterError, Sample, Target


@pytest.fixture(scope="module")
def dinov2():
    return Dinov2Backend.tiny(seed=0, device="cpu", batch_size=2)


def _crop(h, w, seed):
    return np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)


def test_features_are_unit_vectors_one_per_crop(dinov2):
    feats = dinov2.embed([_crop(30, 40, 0), _crop(60, 20, 1), _crop(28, 28, 2)])
    assert feats.shape == (3, 16) and feats.dtype == np.float32
    assert np.allclose(np.linalg.norm(feats, axis=1), 1.0, atol=1e-5)


def test_batches_do_not_change_features(dinov2):
    crops = [_crop(30, 40, 0), _crop(60, 20, 1), _crop(28, 28, 2)]
    assert np.allclose(dinov2.embed(crops), np.concatenate([dinov2.embed([c]) for c in crops]), atol=1e-5)


def test_no_crop_gives_an_empty_matrix(dinov2):
    assert dinov2.embed([]).shape == (0, 16)


@pytest.fixture
def sample(tmp_path):
    paths = []
    for t in range(2):
        p = tmp_path / f"{t}.png"
        Image.fromarray(_crop(48, 64, t)).save(p)
        paths.append(str(p))
    return Sample(id="clip/0", dataset="toy", split="test", modality="video", frames=paths, frame_ids=["0", "1"],
                  query="the dog", task="segmentation", target=Target(masks=[None, None]))


def test_the_node_leaves_a_feature_per_instance_and_a_second_build_hits_the_cache(sample, dinov2, tmp_path):
    perception = FoundationPerception(sam2=Sam2HFBackend.tiny(seed=0, device="cpu", points_per_side=2, max_instances=3),
                                      dinov2=dinov2, cache=ToolCache(tmp_path / "cache"))
    twin = build_twin(sample, ["SAM2", "DINOv2"], perception)
    assert twin.tools == ["SAM2", "DINOv2"] and twin.instances
    assert set(twin.artifacts["dinov2"]) == set(twin.instance_ids())
    assert all(v.shape == (16,) for v in twin.artifacts["dinov2"].values())
    again = build_twin(sample, ["SAM2", "DINOv2"], perception)
    assert again.artifacts["cache"]["DINOv2"] == "hit"
    assert all(np.allclose(again.artifacts["dinov2"][i], twin.artifacts["dinov2"][i], atol=1e-3) for i in twin.instance_ids())


def test_a_disabled_dinov2_is_skipped(sample, tmp_path):
    perception = FoundationPerception(sam2=Sam2HFBackend.tiny(seed=0, device="cpu", points_per_side=2, max_instances=2),
                                      disable=["DINOv2"], cache=None)
    twin = build_twin(sample, ["SAM2", "DINOv2"], perception)
    assert twin.artifacts["skipped"] == ["DINOv2"] and "dinov2" not in twin.artifacts


def test_without_a_configured_backend_the_fingerprint_is_as_before():
    assert "DINOv2" not in FoundationPerception().fingerprint()["backends"]
    assert FoundationPerception(dinov2=Dinov2Backend(model_id="x")).fingerprint()["backends"]["DINOv2"]["model_id"] == "x"


def test_oracle_perception_has_no_features_and_says_what_to_use(sample):
    with pytest.raises(AdapterError, match="perception 'oracle' has no tool 'DINOv2' .*perception=foundation"):
        OraclePerception().run("DINOv2", sample, None)


def test_the_node_is_the_step_of_its_backend_module():
    spec = registry.TOOLS["DINOv2"]
    assert spec.method is None and registry.step_function(spec) is dinov2_step
