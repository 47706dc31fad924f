"""Twin built by oracle perception (adapters/twin/oracle.py, builder.py) from a synthetic sample
whose boxes, centroids, areas and depths are computed by hand in the comments below.

Geometry convention (adapters/twin/geometry.py): pixel (row r, col c) covers [c, c+1) x [r, r+1);
bbox x2 = last column + 1; centroid = mean of pixel centres (c + 0.5, r + 0.5).
"""
import math
from pathlib import Path

import hydra.utils
import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.dag import parse_dag, validate_dag
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import AdapterError, InstanceAnnotation, Sample, Target

H, W = 6, 8
ALL_TOOLS = ["SAM2", "DepthAnything2", "OWLv2", "Qwen2.5-VL", "DepthStats", "SemanticAnalysis", "Trajectory"]


def _mask(pixels):
    m = np.zeros((H, W), dtype=bool)
    for r, c in pixels:
        m[r, c] = True
    return m


def synthetic_sample(annotations=True) -> Sample:
    """2 objects x 3 frames, 6 x 8 px, fps 2.

    "7" (dog):  t0 rows 1-2 x cols 1-3, t1 rows 2-3 x cols 2-4, t2 absent; depth 2.0, 4.0, None m.
    "10" (ball): t0 absent, t1 pixel (r5, c0), t2 pixels (r0, c6), (r0, c7), (r1, c7); no depth.
    Listed "10" first: oracle ids follow annotation ids numerically, so "7" -> 1 and "10" -> 2.
    """
    dog = [_mask([(r, c) for r in (1, 2) for c in (1, 2, 3)]),
           _mask([(r, c) for r in (2, 3) for c in (2, 3, 4)]),
           None]
    ball = [None, _mask([(5, 0)]), _mask([(0, 6), (0, 7), (1, 7)])]
    enc = lambda ms: [None if m is None else mask_io.encode(m) for m in ms]  # noqa: E731
    anns = [InstanceAnnotation(id="10", label="ball", masks=enc(ball)),
            InstanceAnnotation(id="7", label="dog", masks=enc(dog), depth=[2.0, 4.0, None])]
    return Sample(
        id="synthetic/0", dataset="synthetic", split="test", modality="video",
        frames=[f"/nonexistent/{i:05d}.jpg" for i in range(3)], frame_ids=["00000", "00005", "00010"],
        query="the ball", task="segmentation", target=Target(masks=enc(ball)),
        meta={"fps": 2}, annotations=anns if annotations else None,
    )


def full_twin():
    return build_twin(synthetic_sample(), ALL_TOOLS, OraclePerception())


def test_video_and_frame_tiers():
    twin = build_twin(synthetic_sample(), [], OraclePerception())
    assert twin.size == (H, W) and twin.num_frames == 3 and twin.video.fps == 2.0
    assert [(f.index, f.frame_id, f.timestamp) for f in twin.frames] == [(0, "00000", 0.0), (1, "00005", 0.5), (2, "00010", 1.0)]
    assert twin.instances == [] and twin.tools == []


def test_sam2_instances_have_exact_boxes_centroids_and_areas():
    twin = build_twin(synthetic_sample(), ["SAM2"], OraclePerception())
    assert twin.instance_ids() == [1, 2]
    dog, ball = twin.instances
    assert sorted(dog.frames) == [0, 1] and sorted(ball.frames) == [1, 2]
    assert dog.frames[0].bbox == [1.0, 1.0, 4.0, 3.0] and dog.frames[0].centroid == [2.5, 2.0] and dog.frames[0].area == 6
    assert dog.frames[1].bbox == [2.0, 2.0, 5.0, 4.0] and dog.frames[1].centroid == [3.5, 3.0] and dog.frames[1].area == 6
    assert ball.frames[1].bbox == [0.0, 5.0, 1.0, 6.0] and ball.frames[1].centroid == [0.5, 5.5] and ball.frames[1].area == 1
    assert ball.frames[2].bbox == [6.0, 0.0, 8.0, 2.0] and ball.frames[2].area == 3
    assert ball.frames[2].centroid == pytest.approx([(6 + 7 + 7) / 3 + 0.5, (0 + 0 + 1) / 3 + 0.5])
    # SAM2 alone: no label, depth, trajectory or caption
    assert dog.label is None and dog.depth is None and dog.trajectory is None and dog.caption is None


def test_mask_refs_point_at_the_annotated_masks():
    sample = synthetic_sample()
    twin = build_twin(sample, ["SAM2"], OraclePerception())
    ball_ann = sample.annotations[0]
    assert twin.masks[twin.instance(2).frames[2].mask] == ball_ann.masks[2]
    assert twin.mask_array(2).shape == (3, H, W)
    assert twin.mask_array(2)[0].sum() == 0 and twin.mask_array(2)[2].sum() == 3


def test_depth_stats_in_metres_over_frames_with_known_depth():
    twin = full_twin()
    dog, ball = twin.instances
    assert (dog.depth.mean, dog.depth.std, dog.depth.frames) == (3.0, 1.0, 2)  # mean(2, 4), population std
    assert dog.depth.unit == "m" and dog.depth.convention == "larger = farther"
    assert ball.depth is None


def test_labels_captions_and_trajectory():
    twin = full_twin()
    dog, ball = twin.instances
    assert (dog.label, dog.score, ball.label) == ("dog", 1.0, "ball")
    assert twin.video.summary == "unavailable" and {f.caption for f in twin.frames} == {"unavailable"}
    assert dog.caption == ball.caption == "unavailable"
    assert (dog.trajectory.first_frame, dog.trajectory.last_frame) == (0, 1)
    assert dog.trajectory.displacement == [1.0, 1.0] and dog.trajectory.path_length == pytest.approx(math.sqrt(2))
    dx, dy = (43 / 6 - 0.5, 5 / 6 - 5.5)
    assert ball.trajectory.displacement == pytest.approx([dx, dy])
    assert ball.trajectory.path_length == pytest.approx(math.hypot(dx, dy))
    assert twin.tools == ALL_TOOLS


def test_only_planned_tools_run():
    order = validate_dag(parse_dag('{"SAM2": [], "SemanticAnalysis": ["SAM2"]}'))
    twin = build_twin(synthetic_sample(), order, OraclePerception())
    assert twin.tools == ["SAM2", "SemanticAnalysis"]
    assert [i.label for i in twin.instances] == ["dog", "ball"]
    assert all(i.depth is None and i.trajectory is None and i.caption is None for i in twin.instances)
    assert twin.video.summary is None


def test_twin_does_not_depend_on_which_object_is_the_target():
    a = synthetic_sample()
    b = synthetic_sample()
    b.target = Target(masks=a.annotations[1].masks)
    b.query = "the dog"
    assert build_twin(a, ALL_TOOLS, OraclePerception()).to_dict() == build_twin(b, ALL_TOOLS, OraclePerception()).to_dict()


def test_no_annotations_is_an_adapter_error_naming_the_sample():
    with pytest.raises(AdapterError, match="synthetic/0"):
        build_twin(synthetic_sample(annotations=False), ["SAM2"], OraclePerception())


def test_annotation_with_wrong_frame_count_is_an_adapter_error():
    sample = synthetic_sample()
    sample.annotations[0].masks = sample.annotations[0].masks[:2]
    with pytest.raises(AdapterError, match="'10' has 2 masks"):
        build_twin(sample, ["SAM2"], OraclePerception())


def test_order_with_a_tool_before_its_requirement_is_rejected():
    with pytest.raises(AdapterError, match="DepthStats"):
        build_twin(synthetic_sample(), ["DepthStats", "SAM2", "DepthAnything2"], OraclePerception())


def test_hydra_config_instantiates_the_oracle():
    cfg = OmegaConf.load(Path(__file__).parents[1] / "conf/perception/oracle.yaml")
    perception = hydra.utils.instantiate(cfg)
    assert isinstance(perception, OraclePerception)
    assert perception.name == "oracle" and perception.fingerprint() == {"name": "oracle", "version": 1}
