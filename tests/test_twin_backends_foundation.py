"""adapters/twin/foundation.py: the planned DAG runs through real (tiny) model backends, numbers from
stub backends are exact, ablations skip what they disable, and a second build does no model work."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from PIL import Image

from rvt_bench.adapters.twin.backends.depth_anything import DepthAnythingBackend
from rvt_bench.adapters.twin.backends.owlv2 import Owlv2Backend
from rvt_bench.adapters.twin.backends.qwen_vl import QwenVLBackend
from rvt_bench.adapters.twin.backends.sam2_common import Track
from rvt_bench.adapters.twin.backends.sam2_hf import Sam2HFBackend
from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.cache import ToolCache
from rvt_bench.adapters.twin.dag import parse_dag, validate_dag
from rvt_bench.adapters.twin.foundation import FoundationPerception, crop_box, summary_frame_indices
from rvt_bench.adapters.twin.schema import Instance, InstanceFrame
from rvt_bench.core.types import AdapterError, Sample, Target

CONF = Path(__file__).resolve().parents[1] / "conf"
T, H, W = 3, 8, 10
ALL = '{"SAM2": [], "DepthAnything2": [], "OWLv2": [], "Qwen2.5-VL": [], "DepthStats": ["SAM2", "DepthAnything2"], ' \
      '"SemanticAnalysis": ["SAM2"], "Trajectory": ["SAM2"]}'


def order(plan: str) -> list[str]:
    return validate_dag(parse_dag(plan))


@pytest.fixture
def sample(tmp_path) -> Sample:
    """3 frames of 8 x 10 px (distinct content) on disk, fps 5."""
    paths = []
    for t in range(T):
        p = tmp_path / "frames" / f"img_{t}.png"
        p.parent.mkdir(exist_ok=True)
        Image.fromarray(np.full((H, W, 3), 30 * (t + 1), np.uint8)).save(p)
        paths.append(str(p))
    return Sample(id="clip/0", dataset="toy", split="test", modality="video", frames=paths,
                  frame_ids=["00000", "00005", "00010"], query="the dog", task="segmentation",
                  target=Target(masks=[None] * T), meta={"fps": 5})


# --- stub backends: fixed outputs, counted calls -----------------------------------------------------

def _box(r0, r1, c0, c1):
    m = np.zeros((H, W), bool)
    m[r0:r1, c0:c1] = True
    return m


class Stub:
    def __init__(self, name, **params):
        self.name, self.params, self.calls = name, params, []

    def fingerprint(self):
        return {"backend": self.name, "model_id": "stub", "revision": "0", "params": self.params}


class StubSam2(Stub):
    """Object A: t0 rows 0-1 x cols 0-1 (4 px), t1 row 0 x cols 0-2 (3 px), lost at t2.
    Object B: rows 5-7 x cols 6-9 in every frame. Prompted: one track per box, masks of object A."""

    def segment(self, frames, key_frame, boxes=None, labels=None, scores=None):
        self.calls.append({"key_frame": key_frame, "boxes": boxes, "labels": labels})
        a = np.stack([_box(0, 2, 0, 2), _box(0, 1, 0, 3), np.zeros((H, W), bool)])
        b = np.stack([_box(5, 8, 6, 10)] * T)
        if boxes is None:
            return [Track(a, 0.9), Track(b, 0.8)]
        return [Track(a, s, lab) for s, lab in zip(scores, labels)]


class StubDepth(Stub):
    """Frame t: value 1 + r * W + c + 100 * t at pixel (r, c) (exact in float16 below 2048)."""

    def estimate(self, frames):
        self.calls.append(len(frames))
        return [np.arange(H * W, dtype=np.float32).reshape(H, W) + 1 + 100 * t for t in range(len(frames))]

    def convention(self):
        return "relative", "relative inverse depth, larger = nearer"


class StubOwl(Stub):
    def __init__(self, detections):
        super().__init__("owl")
        self.detections = detections

    def detect(self, frames, phrases):
        self.calls.append(list(phrases))
        return [list(self.detections)]


class StubQwen(Stub):
    def prompt(self, key, **fields):
        return key

    def generate(self, requests):
        self.calls.append(len(requests))
        return [f"{text}:{len(images)}x{images[0].shape[0]}x{images[0].shape[1]}" for images, text in requests]


def stubs(detections=()):
    return dict(sam2=StubSam2("sam2"), depth=StubDepth("depth"), owlv2=StubOwl(detections), qwen=StubQwen("qwen"))


def perception(tmp_path, backends, **kw):
    return FoundationPerception(**backends, cache=ToolCache(tmp_path / "cache"), **kw)


# --- exact numbers with stubs ---------------------------------------------------------------------------

def test_sam2_instances_have_geometry_masks_and_scores(sample, tmp_path):
    twin = build_twin(sample, order('{"SAM2": []}'), perception(tmp_path, stubs()))
    a, b = twin.instances
    assert (a.id, a.score, sorted(a.frames)) == (1, 0.9, [0, 1])
    assert a.frames[0].bbox == [0.0, 0.0, 2.0, 2.0] and a.frames[0].area == 4
    assert a.frames[1].centroid == [1.5, 0.5] and a.frames[1].area == 3
    assert np.array_equal(twin.mask_array(2)[2], _box(5, 8, 6, 10))


def test_depth_stats_pool_mask_pixels_across_frames(sample, tmp_path):
    twin = build_twin(sample, order('{"SAM2": [], "DepthAnything2": [], "DepthStats": ["SAM2", "DepthAnything2"]}'),
                      perception(tmp_path, stubs()))
    # instance 1: t0 pixels (0,0) (0,1) (1,0) (1,1) -> 1, 2, 11, 12; t1 pixels (0,0..2) -> 101, 102, 103
    values = [1, 2, 11, 12, 101, 102, 103]
    depth = twin.instances[0].depth
    assert depth.mean == pytest.approx(statistics.fmean(values))
    assert depth.std == pytest.approx(statistics.pstdev(values))
    assert (depth.frames, depth.unit, depth.convention) == (2, "relative", "relative inverse depth, larger = nearer")
    assert json.loads(twin.to_llm_json())["depth_unit"] == "relative, relative inverse depth, larger = nearer"


def test_owlv2_after_sam2_labels_the_best_overlapping_instance(sample, tmp_path):
    dets = [{"box": [6.0, 5.0, 10.0, 8.0], "score": 0.6, "label": "ball"},  # instance 2 exactly
            {"box": [0.0, 0.0, 9.0, 9.0], "score": 0.7, "label": "room"}]   # instance 1: IoU 4/81 < match_iou
    twin = build_twin(sample, order('{"SAM2": [], "OWLv2": []}'), perception(tmp_path, stubs(dets), key_frame="first"))
    assert [(i.label, i.score) for i in twin.instances] == [(None, 0.9), ("ball", 0.6)]


def test_owlv2_upstream_prompts_sam2_with_its_boxes(sample, tmp_path):
    dets = [{"box": [0.0, 0.0, 2.0, 2.0], "score": 0.6, "label": "dog"}]
    backends = stubs(dets)
    twin = build_twin(sample, order('{"OWLv2": [], "SAM2": ["OWLv2"]}'), perception(tmp_path, backends))
    assert backends["sam2"].calls == [{"key_frame": 1, "boxes": [[0.0, 0.0, 2.0, 2.0]], "labels": ["dog"]}]
    assert [(i.id, i.label, i.score) for i in twin.instances] == [(1, "dog", 0.6)]
    assert backends["owlv2"].calls == [["person", "animal", "vehicle", "object", "the dog"]]


def test_sample_phrases_replace_vocabulary_and_query(sample, tmp_path):
    sample.meta["phrases"] = ["puppy", "blanket"]
    backends = stubs()
    build_twin(sample, order('{"OWLv2": []}'), perception(tmp_path, backends))
    assert backends["owlv2"].calls == [["puppy", "blanket"]]


def test_qwen_captions_every_frame_summary_and_instance_crops(sample, tmp_path):
    twin = build_twin(sample, order('{"SAM2": [], "Qwen2.5-VL": [], "SemanticAnalysis": ["SAM2"]}'),
                      perception(tmp_path, stubs()))
    assert [f.caption for f in twin.frames] == ["frame:1x8x10"] * 3
    assert twin.video.summary == "summary:3x8x10"
    # crops: instance 1 is largest at t0 (box 2 x 2 px), grown to MIN_CROP and clamped to the frame
    assert [i.caption for i in twin.instances] == ["instance:1x8x10", "instance:1x8x10"]
    assert [i.label for i in twin.instances] == ["label:1x8x10", "label:1x8x10"]


def test_crop_box_grows_small_boxes_and_clamps():
    inst = Instance(id=1, frames={0: InstanceFrame([10, 10, 20, 20], [15, 15], 100, "m"),
                                  2: InstanceFrame([100, 50, 200, 150], [150, 100], 10000, "m")})
    assert crop_box(inst, (120, 300)) == (2, (90, 40, 210, 120))
    small = Instance(id=1, frames={0: InstanceFrame([0, 0, 4, 4], [2, 2], 16, "m")})
    assert crop_box(small, (100, 100)) == (0, (0, 0, 16, 16))


def test_summary_frames_are_evenly_spaced():
    assert summary_frame_indices(16, 8) == [0, 2, 4, 6, 9, 11, 13, 15]
    assert summary_frame_indices(3, 8) == [0, 1, 2]
    assert summary_frame_indices(1, 8) == [0]


# --- just in time, ablation -------------------------------------------------------------------------

def test_tools_not_in_the_plan_do_not_run(sample, tmp_path):
    backends = stubs()
    twin = build_twin(sample, order('{"SAM2": [], "Trajectory": ["SAM2"]}'), perception(tmp_path, backends))
    assert twin.tools == ["SAM2", "Trajectory"]
    assert (backends["depth"].calls, backends["owlv2"].calls, backends["qwen"].calls) == ([], [], [])


def test_disabled_detector_leaves_sam2_automatic(sample, tmp_path):
    backends = stubs([{"box": [0.0, 0.0, 2.0, 2.0], "score": 0.6, "label": "dog"}])
    twin = build_twin(sample, order('{"OWLv2": [], "SAM2": ["OWLv2"]}'),
                      perception(tmp_path, backends, disable=["OWLv2"]))
    assert backends["owlv2"].calls == [] and backends["sam2"].calls[0]["boxes"] is None
    assert twin.tools == ["SAM2"] and twin.artifacts["skipped"] == ["OWLv2"]


def test_disabled_depth_model_skips_depth_stats(sample, tmp_path):
    twin = build_twin(sample, order(ALL), perception(tmp_path, stubs(), disable=["DepthAnything2"]))
    assert twin.artifacts["skipped"] == ["DepthAnything2", "DepthStats"]
    assert all(i.depth is None for i in twin.instances)


def test_disabled_vlm_skips_semantic_analysis(sample, tmp_path):
    twin = build_twin(sample, order(ALL), perception(tmp_path, stubs(), disable=["Qwen2.5-VL"]))
    assert twin.artifacts["skipped"] == ["Qwen2.5-VL", "SemanticAnalysis"]
    assert twin.video.summary is None and all(i.label is None and i.caption is None for i in twin.instances)


def test_disabled_segmenter_leaves_no_instances(sample, tmp_path):
    twin = build_twin(sample, order(ALL), perception(tmp_path, stubs(), disable=["SAM2"]))
    assert twin.instances == [] and twin.tools == ["DepthAnything2", "OWLv2", "Qwen2.5-VL"]


def test_unknown_disabled_node_is_refused():
    with pytest.raises(AdapterError, match="Trajectory"):
        FoundationPerception(disable=["Trajectory"])


def test_a_single_disabled_name_is_one_node():
    assert FoundationPerception(disable="OWLv2").disable == frozenset({"OWLv2"})


def test_a_planned_node_without_backend_names_the_config_key(sample, tmp_path):
    with pytest.raises(AdapterError, match="perception.depth"):
        build_twin(sample, order('{"DepthAnything2": []}'), FoundationPerception(cache=None))


# --- cache ------------------------------------------------------------------------------------------

def test_second_build_hits_the_cache_for_every_model_call(sample, tmp_path):
    first_backends, second_backends = stubs(), stubs()
    first = build_twin(sample, order(ALL), perception(tmp_path, first_backends))
    second = build_twin(sample, order(ALL), perception(tmp_path, second_backends))
    assert set(first.artifacts["cache"].values()) == {"miss"}
    assert second.artifacts["cache"] == {call: "hit" for call in first.artifacts["cache"]}
    assert sorted(first.artifacts["cache"]) == ["DepthAnything2", "OWLv2", "Qwen2.5-VL/frames",
                                                "Qwen2.5-VL/instances", "Qwen2.5-VL/summary", "SAM2",
                                                "SemanticAnalysis"]
    assert all(b.calls == [] for b in second_backends.values())
    assert "frames" not in second.artifacts  # a hit reads no pixels
    assert second.to_dict() == first.to_dict()


def test_changing_one_models_params_misses_only_what_depends_on_it(sample, tmp_path):
    build_twin(sample, order(ALL), perception(tmp_path, stubs()))
    backends = stubs()
    backends["sam2"].params = {"points_per_side": 16}
    twin = build_twin(sample, order(ALL), perception(tmp_path, backends))
    assert twin.artifacts["cache"] == {"SAM2": "miss", "DepthAnything2": "hit", "OWLv2": "hit",
                                       "Qwen2.5-VL/summary": "hit", "Qwen2.5-VL/frames": "hit",
                                       "Qwen2.5-VL/instances": "hit", "SemanticAnalysis": "hit"}


def test_edited_frame_misses(sample, tmp_path):
    build_twin(sample, order('{"DepthAnything2": []}'), perception(tmp_path, stubs()))
    Image.fromarray(np.zeros((H, W, 3), np.uint8)).save(sample.frames[1])
    twin = build_twin(sample, order('{"DepthAnything2": []}'), perception(tmp_path, stubs()))
    assert twin.artifacts["cache"] == {"DepthAnything2": "miss"}


# --- tiny real models -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_backends():
    return dict(sam2=Sam2HFBackend.tiny(device="cpu", points_per_side=3, max_instances=3),
                depth=DepthAnythingBackend.tiny(device="cpu"),
                owlv2=Owlv2Backend.tiny(device="cpu", threshold=0.0),
                qwen=QwenVLBackend.tiny(device="cpu", max_new_tokens=4))


def test_tiny_models_build_a_full_twin_and_a_second_build_loads_no_model(sample, tmp_path, tiny_backends):
    first = build_twin(sample, order(ALL), perception(tmp_path, tiny_backends))
    assert first.tools == ["SAM2", "DepthAnything2", "OWLv2", "Qwen2.5-VL", "DepthStats", "SemanticAnalysis",
                           "Trajectory"]
    assert all(isinstance(f.caption, str) for f in first.frames) and isinstance(first.video.summary, str)
    for inst in first.instances:
        assert all(first.masks[fr.mask]["size"] == [H, W] for fr in inst.frames.values())
        assert inst.depth is not None and inst.depth.unit == "relative"
    json.loads(first.to_llm_json())

    fresh = dict(sam2=Sam2HFBackend.tiny(device="cpu", points_per_side=3, max_instances=3),
                 depth=DepthAnythingBackend.tiny(device="cpu"),
                 owlv2=Owlv2Backend.tiny(device="cpu", threshold=0.0),
                 qwen=QwenVLBackend.tiny(device="cpu", max_new_tokens=4))
    for backend in fresh.values():
        backend._components = None  # any model use would now try to load the hub id "tiny-random/..."
        backend.load = lambda: (_ for _ in ()).throw(AssertionError("model work on a cache hit"))
    second = build_twin(sample, order(ALL), perception(tmp_path, fresh))
    assert set(second.artifacts["cache"].values()) == {"hit"}
    assert second.to_dict() == first.to_dict()


def test_tiny_owlv2_upstream_prompts_tiny_sam2(sample, tmp_path, tiny_backends):
    twin = build_twin(sample, order('{"OWLv2": [], "SAM2": ["OWLv2"]}'), perception(tmp_path, tiny_backends))
    phrases = ["person", "animal", "vehicle", "object", "the dog"]
    assert len(twin.instances) <= len(twin.artifacts["owlv2"])
    assert all(i.label in phrases for i in twin.instances)


def test_the_sam2_package_backend_serves_the_same_node(sample, tmp_path):
    from rvt_bench.adapters.twin.backends.sam2_pkg import Sam2PkgBackend

    sam2 = Sam2PkgBackend.tiny(device="cpu", points_per_side=2, max_instances=2)
    twin = build_twin(sample, order('{"SAM2": [], "Trajectory": ["SAM2"]}'),
                      FoundationPerception(sam2=sam2, cache=ToolCache(tmp_path / "cache")))
    assert twin.tools == ["SAM2", "Trajectory"] and twin.artifacts["cache"] == {"SAM2": "miss"}
    assert all(twin.masks[fr.mask]["size"] == [H, W] for i in twin.instances for fr in i.frames.values())


# --- Hydra configs ----------------------------------------------------------------------------------

def _perception_cfg(name, tmp_path, *overrides):
    """conf/perception/<name>.yaml as Hydra composes it (its defaults list: the depth model)."""
    from hydra import compose, initialize_config_dir

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[f"perception={name}", f"run.root={tmp_path}", *overrides])
    return cfg.perception


def test_foundation_config_names_hub_models_and_loads_nothing(tmp_path):
    p = instantiate(_perception_cfg("foundation", tmp_path), _convert_="all")
    ids = {node: b.model_id for node, b in p.backends.items()}
    assert ids == {"SAM2": "facebook/sam2.1-hiera-tiny", "DepthAnything2": "depth-anything/Depth-Anything-V2-Small-hf",
                   "OWLv2": "google/owlv2-base-patch16-ensemble", "Qwen2.5-VL": "Qwen/Qwen2.5-VL-3B-Instruct",
                   "DINOv2": "facebook/dinov2-small"}
    assert all(b._components is None for b in p.backends.values())
    assert p.cache.root == tmp_path / ".cache" / "perception"


def test_tiny_config_builds_tiny_models(tmp_path):
    p = instantiate(_perception_cfg("tiny", tmp_path), _convert_="all")
    assert {b.model_id for b in p.backends.values()} == {"tiny-random/sam2.1", "tiny-random/depth-anything-v2",
                                                       "tiny-random/owlv2", "tiny-random/qwen2.5-vl", "tiny-random/dinov2"}


def test_vfm_ablation_sweep_runs_full_and_each_model_removed():
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    import run_bench  # noqa: F401  (registers the ${repo:} resolver)

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "+model=dtr1", "+sweep=vfm_ablation"],
                      return_hydra_config=True)
    assert cfg.perception._target_ == "rvt_bench.adapters.twin.foundation.FoundationPerception"
    (override,) = OverridesParser.create().parse_overrides(
        [f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()])
    points = [json.loads(json.dumps(OverridesParser.create().parse_override(f"x={v}").value()))
              for v in override.sweep_string_iterator()]
    assert override.key_or_group == "perception.disable"
    assert points == [[], ["SAM2"], ["DepthAnything2"], ["OWLv2"], ["Qwen2.5-VL"]]
    for disable in points:
        assert FoundationPerception(disable=disable).disable == frozenset(disable)
