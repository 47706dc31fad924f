"""Instance semantic embeddings (issue 43 item 4a): the DINOv2 node pools its patch tokens over each
instance's mask (adapters/twin/backends/dinov2.py) into ``Instance.embedding``; the policy's JSON shows
cosine similarities, the sandbox's payload the full vectors (adapters/twin/schema.py). Tiny
random-weight DINOv2, offline."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from rvt_bench.adapters.twin.backends.dinov2 import Dinov2Backend
from rvt_bench.adapters.twin.backends.sam2_common import Track
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.cache import ToolCache
from rvt_bench.adapters.twin.foundation import FoundationPerception
from rvt_bench.adapters.twin.schema import Instance, InstanceFrame, Twin, VideoInfo, FrameInfo
from rvt_bench.core.types import ParseError, Sample, Target

H, W, D = 64, 160, 16


@pytest.fixture(scope="module")
def dinov2():
    return Dinov2Backend.tiny(seed=0, device="cpu", batch_size=2)


def _texture(seed, size=24):
    return np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)


# --- the backend: mask pooling ---------------------------------------------------------------------


def test_a_full_mask_pools_every_patch_token_of_the_models_output(dinov2):
    crop = np.random.default_rng(0).integers(0, 255, (40, 50, 3), dtype=np.uint8)
    model, processor = dinov2.components()
    with torch.no_grad():
        tokens = model(**processor(images=[crop], return_tensors="pt")).last_hidden_state[0, 1:]
    expected = torch.nn.functional.normalize(tokens.mean(0), dim=0).numpy()
    got = dinov2.embed_masked([crop], [np.ones((40, 50), bool)])
    assert got.shape == (1, D) and got.dtype == np.float32
    np.testing.assert_allclose(got[0], expected, atol=1e-5)


def test_a_partial_mask_weighs_the_patches_it_covers(dinov2):
    # 64 px: the processor's shortest edge, so no resize; its 56 px centre crop starts at 4 px
    crop = np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    mask = np.zeros((64, 64), bool)
    mask[:, 4:32] = True  # the crop's left half: patch columns 0-1 of the 4 x 4 grid the model sees
    model, processor = dinov2.components()
    with torch.no_grad():
        tokens = model(**processor(images=[crop], return_tensors="pt")).last_hidden_state[0, 1:].reshape(4, 4, D)
    left = torch.nn.functional.normalize(tokens[:, :2].reshape(-1, D).mean(0), dim=0).numpy()
    np.testing.assert_allclose(dinov2.embed_masked([crop], [mask])[0], left, atol=1e-4)


def test_an_empty_mask_falls_back_to_the_cls_feature(dinov2):
    crop = np.random.default_rng(2).integers(0, 255, (30, 30, 3), dtype=np.uint8)
    np.testing.assert_allclose(dinov2.embed_masked([crop], [np.zeros((30, 30), bool)]), dinov2.embed([crop]), atol=1e-5)


def test_identical_crops_and_masks_embed_alike_and_different_ones_do_not(dinov2):
    a, b = _texture(1, 40), _texture(2, 40)
    full = np.ones((40, 40), bool)
    e = dinov2.embed_masked([a, b, a.copy()], [full, full, full])
    np.testing.assert_allclose(e[0], e[2], atol=1e-6)
    assert float(e[0] @ e[1]) < 0.999
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)


def test_mismatched_masks_are_refused(dinov2):
    with pytest.raises(ValueError, match="one \\(h, w\\) mask per"):
        dinov2.embed_masked([_texture(0)], [np.ones((5, 5), bool)])
    assert dinov2.embed_masked([], []).shape == (0, D)


# --- the plan node: the twin's instances --------------------------------------------------------


class ThreeSquares:
    """Three 24 px squares on a grey frame: instances 1 and 3 the same texture, instance 2 another."""

    name = "sam2"

    def fingerprint(self):
        return {"backend": "three-squares", "model_id": "stub", "revision": "0", "params": {}}

    def segment(self, frames, key_frame, boxes=None, labels=None, scores=None):
        tracks = []
        for x0 in (16, 68, 120):
            m = np.zeros((1, H, W), bool)
            m[0, 20:44, x0:x0 + 24] = True
            tracks.append(Track(m, 0.9))
        return tracks


@pytest.fixture
def sample(tmp_path):
    frame = np.full((H, W, 3), 128, np.uint8)
    for x0, seed in ((16, 1), (68, 2), (120, 1)):
        frame[20:44, x0:x0 + 24] = _texture(seed)
    path = tmp_path / "frame.png"
    Image.fromarray(frame).save(path)
    return Sample(id="img/0", dataset="toy", split="test", modality="image", frames=[str(path)], frame_ids=["0"],
                  query="the odd one", task="segmentation", target=Target(masks=[None]))


def test_each_instance_gets_its_embedding_and_the_json_its_similarities(sample, dinov2, tmp_path):
    perception = FoundationPerception(sam2=ThreeSquares(), dinov2=dinov2, cache=ToolCache(tmp_path / "cache"))
    twin = build_twin(sample, ["SAM2", "DINOv2"], perception)
    e = {inst.id: np.array(inst.embedding) for inst in twin.instances}
    assert sorted(e) == [1, 2, 3] and all(v.shape == (D,) for v in e.values())
    assert all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in e.values())
    np.testing.assert_allclose(e[1], e[3], atol=1e-6)  # same texture, same mask, same crop content
    assert float(e[1] @ e[2]) < 0.999

    shown = json.loads(twin.to_llm_json())
    assert "similarity" in shown and "cosine" in shown["similarity"]
    similar = {inst["id"]: inst["similar"] for inst in shown["instances"]}
    assert similar[1]["3"] == 1 and similar[3]["1"] == 1
    assert similar[1]["2"] == round(float(e[1] @ e[2]), 2) and set(similar[2]) == {"1", "3"}
    assert "embedding" not in json.dumps(shown["instances"])  # the vectors are code's, not the prompt's
    compact = json.loads(twin.to_llm_json(style="compact"))
    assert compact["instances"][0]["similar"] == similar[1]

    code = twin.to_code_payload()["variables"]["twin"]
    assert [len(i["embedding"]) for i in code["instances"]] == [D, D, D]
    assert code["instances"][1]["embedding"] == twin.instances[1].embedding
    assert Twin.from_dict(json.loads(json.dumps(twin.to_dict()))).instances[1].embedding == twin.instances[1].embedding

    again = build_twin(sample, ["SAM2", "DINOv2"], perception)
    assert again.artifacts["cache"]["DINOv2/instances"] == "hit"
    assert [i.embedding for i in again.instances] == [i.embedding for i in twin.instances]


def test_a_plan_without_dinov2_leaves_no_embedding_anywhere(sample, tmp_path):
    twin = build_twin(sample, ["SAM2"], FoundationPerception(sam2=ThreeSquares(), cache=None))
    assert all(inst.embedding is None for inst in twin.instances)
    for text in (twin.to_llm_json(), twin.to_llm_json(style="compact"), json.dumps(twin.to_code_payload()),
                 json.dumps(twin.to_dict())):
        assert "similar" not in text and "embedding" not in text


# --- the schema ------------------------------------------------------------------------------------------


def _twin(*embeddings):
    frame = InstanceFrame(bbox=[0, 0, 1, 1], centroid=[0.5, 0.5], area=1, mask="m")
    return Twin(video=VideoInfo(size=[4, 4], num_frames=1), frames=[FrameInfo(index=0, frame_id="0")],
                instances=[Instance(id=k + 1, frames={0: frame}, embedding=e) for k, e in enumerate(embeddings)],
                masks={"m": {"size": [4, 4], "counts": "0"}})


def test_similarity_is_the_cosine_rounded_and_absent_for_instances_without_embedding():
    twin = _twin([1.0, 0.0], [0.6, 0.8], None)
    shown = {i["id"]: i.get("similar") for i in twin.to_llm_dict()["instances"]}
    assert shown == {1: {"2": 0.6}, 2: {"1": 0.6}, 3: None}


def test_the_minimal_detail_drops_similarities():
    twin = _twin([1.0, 0.0], [0.0, 1.0])
    small = twin.to_llm_dict(max_chars=1)  # nothing fits: minimal, instances dropped
    assert small["detail"] == "minimal" and all("similar" not in i for i in small["instances"])


@pytest.mark.parametrize("bad", [[], "0.1", [0.1, "x"], [float("nan")], [True, 0.0], {"0": 1.0}])
def test_a_twin_file_with_a_malformed_embedding_is_refused(bad):
    record = json.loads(json.dumps(_twin([1.0, 0.0]).to_dict()))
    record["instances"][0]["embedding"] = bad
    with pytest.raises(ParseError, match="embedding"):
        Twin.from_dict(record)
