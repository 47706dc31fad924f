"""The compact LLM view of the twin (Twin.to_llm_compact, to_llm_json(style="compact")): boxes
normalized at key frames, no null fields, and its character budget."""
import json

import pytest

from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.oracle import OraclePerception
from tests.test_twin_oracle import ALL_TOOLS, H, W, synthetic_sample
from tests.test_twin_schema import _large_twin


@pytest.fixture(scope="module")
def twin():
    return build_twin(synthetic_sample(), ALL_TOOLS, OraclePerception())


@pytest.fixture(scope="module")
def large():
    return _large_twin()


def test_boxes_are_the_pixel_boxes_normalized_by_the_frame_size(twin):
    view = twin.to_llm_compact()
    assert view["video"]["size"] == [H, W] and view["video"]["num_frames"] == 3
    for inst in view["instances"]:
        frames = twin.instance(inst["id"]).frames
        assert list(inst["box"]) == [str(t) for t in sorted(frames)]  # every box changes here
        for t, box in inst["box"].items():
            x1, y1, x2, y2 = frames[int(t)].bbox
            assert box == [round(x1 / W, 2), round(y1 / H, 2), round(x2 / W, 2), round(y2 / H, 2)]
            assert all(0 <= v <= 1 for v in box)


def test_fields_of_tools_not_planned_are_absent_not_null(twin):
    dog = next(i for i in twin.to_llm_compact()["instances"] if i["label"] == "dog")
    assert dog["depth"] == 3 and dog["move"] == [round(1 / W, 2), round(1 / H, 2)]
    bare = build_twin(synthetic_sample(), ["SAM2"], OraclePerception()).to_llm_compact()
    assert "depth_unit" not in bare
    assert all(set(i) == {"id", "box"} for i in bare["instances"])
    assert "null" not in json.dumps(bare)


def test_unchanged_boxes_are_left_out_but_first_and_last_frame_stay():
    import numpy as np

    from rvt_bench.core import masks as mask_io
    from rvt_bench.core.types import InstanceAnnotation, Sample, Target

    still = np.zeros((10, 10), bool)
    still[2:5, 2:5] = True
    moved = np.zeros((10, 10), bool)
    moved[2:5, 5:8] = True
    rles = [mask_io.encode(m) for m in (still, still, still, moved, moved)]
    sample = Sample(id="k/0", dataset="synthetic", split="test", modality="video", frames=[f"{t}.jpg" for t in range(5)],
                    frame_ids=[str(t) for t in range(5)], query="q", task="segmentation", target=Target(),
                    annotations=[InstanceAnnotation(id="1", label="box", masks=rles)])
    view = build_twin(sample, ["SAM2"], OraclePerception()).to_llm_compact()
    assert list(view["instances"][0]["box"]) == ["0", "3", "4"]


def test_budget_thins_key_frames_then_drops_instances_from_the_end(large):
    full = large.to_llm_compact()
    assert "box_stride" not in full and len(full["instances"]) == 10
    for budget in (3000, 1500, 600):
        text = large.to_llm_json(budget, style="compact")
        view = json.loads(text)
        assert len(text) <= budget
        kept = view["instances"]
        assert [i["id"] for i in kept] == list(range(1, len(kept) + 1))
        assert view.get("instances_omitted", 0) == 10 - len(kept)
    thinned = json.loads(large.to_llm_json(3000, style="compact"))
    assert thinned["box_stride"] > 1 and len(thinned["instances"]) == 10
    assert all({"0", "15"} <= set(i["box"]) for i in thinned["instances"])
    assert json.loads(large.to_llm_json(600, style="compact"))["instances_omitted"] > 0


def test_compact_is_far_smaller_than_the_full_view_at_the_same_budget(large):
    assert len(large.to_llm_json(None, style="compact")) < len(large.to_llm_json(None)) / 2


def test_unknown_style_is_a_value_error(twin):
    with pytest.raises(ValueError, match="twin style"):
        twin.to_llm_json(1000, style="tiny")
