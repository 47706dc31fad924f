"""The twin's typed record (adapters/twin/schema.py): mask unions, serialisation, the LLM view and
its size budget."""
import json

import numpy as np
import pytest

from rvt_bench.adapters.twin.builder import build_twin
from rvt_bench.adapters.twin.oracle import OraclePerception
from rvt_bench.adapters.twin.schema import DEFAULT_MAX_CHARS, Twin
from rvt_bench.core import masks as mask_io
from rvt_bench.core.types import InstanceAnnotation, ParseError, Sample, Target
from tests.test_twin_oracle import ALL_TOOLS, synthetic_sample


@pytest.fixture(scope="module")
def twin():
    return build_twin(synthetic_sample(), ALL_TOOLS, OraclePerception())


def _decoded(rles):
    return [None if r is None else mask_io.decode(r) for r in rles]


def test_masks_for_is_the_per_frame_union(twin):
    dog, ball = twin.mask_array(1), twin.mask_array(2)
    both = _decoded(twin.masks_for([1, 2]))
    assert len(both) == 3
    np.testing.assert_array_equal(both[0], dog[0])
    np.testing.assert_array_equal(both[1], dog[1] | ball[1])
    np.testing.assert_array_equal(both[2], ball[2])
    assert [int(m.sum()) for m in both] == [6, 7, 3]


def test_masks_for_gives_none_where_no_chosen_instance_is_visible(twin):
    assert twin.masks_for([2])[0] is None
    assert twin.masks_for([1])[2] is None
    assert twin.masks_for([]) == [None, None, None]


@pytest.mark.parametrize("ids", [[3], [0], [1, 99], ["1"], [True], [1.0]])
def test_masks_for_unknown_ids_is_a_parse_error(twin, ids):
    with pytest.raises(ParseError, match="not in the twin"):
        twin.masks_for(ids)


def test_dict_round_trip_through_json(twin):
    again = Twin.from_dict(json.loads(json.dumps(twin.to_dict())))
    assert again == twin
    assert again.masks_for([1, 2]) == twin.masks_for([1, 2])


def test_from_dict_rejects_another_version(twin):
    record = dict(twin.to_dict(), version=99)
    with pytest.raises(ParseError, match="version 99"):
        Twin.from_dict(record)


def test_llm_view_unabridged_has_exact_tracks_and_no_masks(twin):
    view = twin.to_llm_dict()
    assert view["detail"] == "full"
    assert view["track_fields"] == ["x1", "y1", "x2", "y2", "cx", "cy", "area"]
    dog = view["instances"][0]
    assert dog["track"] == {"0": [1, 1, 4, 3, 2.5, 2, 6], "1": [2, 2, 5, 4, 3.5, 3, 6]}
    assert dog["depth"] == {"mean": 3.0, "std": 1.0, "frames": 2}
    assert view["depth_unit"] == "m, larger = farther"
    assert "counts" not in json.dumps(view)


# --- size budget: 16 frames x 10 instances at 480 x 854 ------------------------------------------


def _large_twin() -> Twin:
    """10 rectangles of random size drifting (+3, +2) px per frame over 16 frames; every tool run."""
    frames, n, height, width = 16, 10, 480, 854
    rng = np.random.default_rng(0)
    anns = []
    for k in range(n):
        x, y = int(rng.integers(0, width - 200)), int(rng.integers(0, height - 150))
        w, h = int(rng.integers(20, 200)), int(rng.integers(20, 150))
        rles = []
        for t in range(frames):
            m = np.zeros((height, width), dtype=bool)
            m[y + 2 * t:y + 2 * t + h, x + 3 * t:x + 3 * t + w] = True
            rles.append(mask_io.encode(m))
        anns.append(InstanceAnnotation(id=str(k), label=f"object{k}", masks=rles,
                                       depth=[float(v) for v in rng.uniform(1, 20, frames)]))
    sample = Sample(id="large/0", dataset="synthetic", split="test", modality="video",
                    frames=[f"{t}.jpg" for t in range(frames)], frame_ids=[f"{t:05d}" for t in range(frames)],
                    query="q", task="segmentation", target=Target(), meta={"fps": 6}, annotations=anns)
    return build_twin(sample, ALL_TOOLS, OraclePerception())


@pytest.fixture(scope="module")
def large():
    return _large_twin()


def test_default_budget_keeps_all_instances_and_about_2k_tokens(large):
    full = json.dumps(large.to_llm_dict(), separators=(",", ":"))
    text = large.to_llm_json()
    view = json.loads(text)
    # measured: unabridged 10150 chars; default 7532 chars (stride 2) = 1883 tokens at chars/4,
    # 4993 SmolLM2-135M / 4623 Gemma-3-270m tokens (numbers tokenize densely)
    assert len(full) > DEFAULT_MAX_CHARS
    assert len(text) <= DEFAULT_MAX_CHARS
    assert len(text) / 4 <= 2000
    assert view["detail"] == "every_k" and len(view["instances"]) == 10
    assert "instances_omitted" not in view


def test_subsampled_tracks_keep_first_and_last_frame(large):
    view = large.to_llm_dict(6000)
    stride = view["track_stride"]
    assert view["detail"] == "every_k" and stride > 2
    expected = [str(t) for t in range(0, 16, stride)]
    if expected[-1] != "15":
        expected.append("15")
    assert all(list(inst["track"]) == expected for inst in view["instances"])


@pytest.mark.parametrize("budget, detail", [(4500, "summary"), (3000, "minimal")])
def test_smaller_budgets_summarise_before_dropping_instances(large, budget, detail):
    text = large.to_llm_json(budget)
    view = json.loads(text)
    assert len(text) <= budget
    assert view["detail"] == detail and len(view["instances"]) == 10
    assert "instances_omitted" not in view
    assert ("visible" in view["instances"][0]) and ("track" not in view["instances"][0])


def test_instances_are_dropped_from_the_end_only_as_a_last_resort(large):
    text = large.to_llm_json(2000)
    view = json.loads(text)
    kept = len(view["instances"])
    assert len(text) <= 2000 and view["detail"] == "minimal"
    assert 0 < kept < 10 and view["instances_omitted"] == 10 - kept
    assert [i["id"] for i in view["instances"]] == list(range(1, kept + 1))
