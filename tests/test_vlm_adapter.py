"""adapters/vlm/adapter.py on demo samples with a stand-in backend (canned replies, requests kept)
and a stand-in SAM2 (prompts kept): frame sampling, resizing, coordinate mapping, grounding fill,
think budgets and failures. The real backends and SAM2 have their own tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.twin.backends.sam2_common import Track
from rvt_bench.adapters.vlm.adapter import VLMAdapter
from rvt_bench.adapters.vlm.backend import VLMBackend
from rvt_bench.adapters.vlm.reply import Reply, ReplyError
from rvt_bench.core import masks as mask_io
from rvt_bench.loaders.demo import DemoDataset
from rvt_bench.core.types import AdapterError
from rvt_bench.harness.config import group_node

REPO = Path(__file__).resolve().parents[1]
# the composed `model` node (schema defaults + conf/model/vlm.yaml), unresolved: as run_bench.py builds it
CONF = OmegaConf.to_container(group_node("model", "vlm"), resolve=False)


@pytest.fixture(scope="module")
def demo():
    return {s.id: s for s in DemoDataset(REPO / "demo")}


class Canned(VLMBackend):
    """Answers every request with the next reply; keeps the requests."""

    name = "canned"

    def __init__(self, *replies: str | Reply):
        self.replies = [r if isinstance(r, Reply) else Reply(r, "stop", len(r.split())) for r in replies]
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        return [self.replies.pop(0) for _ in requests]

    def fingerprint(self):
        return {"backend": "canned"}


class FakeSam2:
    """Records prompts; every object's mask is its box, on every frame."""

    def __init__(self):
        self.calls = []

    def fingerprint(self):
        return {"backend": "fake-sam2"}

    def _box(self, shape, box):
        m = np.zeros(shape, bool)
        x1, y1, x2, y2 = (int(round(v)) for v in box)
        m[y1:y2, x1:x2] = True
        return m

    def segment_image(self, frame, boxes, points=None):
        self.calls.append(("image", boxes, points))
        return np.stack([self._box(frame.shape[:2], b) for b in boxes])

    def segment(self, frames, key_frame, boxes=None, labels=None, scores=None):
        self.calls.append(("video", key_frame, boxes))
        return [Track(np.stack([self._box(f.shape[:2], b) for f in frames]), 1.0) for b in boxes]


def make(backend, **overrides):
    kw = {k: CONF[k] for k in ("coords", "frames", "generation", "think", "grounding_fill", "prompts")}
    kw.update(overrides)
    return VLMAdapter(backend=backend, **kw)


def test_video_grounding_maps_resized_input_pixels_to_frame_pixels(demo):
    # 240 x 320 frames -> smart_resize -> 252 x 308 input; x * 320/308, y * 240/252
    sample = demo["rvt/grounding/kitchen_table"]
    backend = Canned('[{"bbox_2d": [0, 0, 154, 126], "frame": 0}]')
    pred = make(backend, frames=dict(CONF["frames"], num_frames=None)).predict(sample)
    assert pred.boxes[0] == [pytest.approx([0.0, 0.0, 160.0, 120.0])]
    assert pred.trace["input_size"] == [252, 308]
    assert len(pred.boxes) == sample.num_frames and pred.boxes[1] == []


def test_frames_not_shown_take_the_nearest_shown_frames_boxes(demo):
    sample = demo["rvt/grounding/kitchen_table"]  # 16 frames; 4 shown: 0, 5, 10, 15
    reply = '[{"bbox_2d": [0, 0, 0.1, 0.1], "frame": 0}, {"bbox_2d": [0, 0, 0.2, 0.2], "frame": 10}]'
    pred = make(Canned(reply), frames=dict(CONF["frames"], num_frames=4), coords="normalized").predict(sample)
    assert pred.trace["frames"] == [0, 5, 10, 15]
    sizes = [[b[2] for b in boxes] for boxes in pred.boxes]
    assert sizes[2] == [32.0] and sizes[12] == [64.0] and sizes[13] == [] and sizes[7] == []


def test_grounding_fill_none_leaves_unshown_frames_empty(demo):
    sample = demo["rvt/grounding/kitchen_table"]
    pred = make(Canned('[{"bbox_2d": [0, 0, 1, 1], "frame": 0}]'), frames=dict(CONF["frames"], num_frames=4),
                coords="normalized", grounding_fill="none").predict(sample)
    assert pred.boxes[0] == [[0.0, 0.0, 320.0, 240.0]] and pred.boxes[1] == []


def test_a_frame_that_was_not_shown_is_a_parse_failure_with_the_trace(demo):
    sample = demo["rvt/grounding/kitchen_table"]
    with pytest.raises(ReplyError) as err:
        make(Canned('[{"bbox_2d": [0, 0, 1, 1], "frame": 3}]'), frames=dict(CONF["frames"], num_frames=4),
             coords="normalized").predict(sample)
    assert err.value.reason == "unknown_frame" and err.value.trace["frames"] == [0, 5, 10, 15]


def test_the_request_shows_each_sampled_frame_resized_after_its_label(demo):
    sample = demo["rvt/vqa/launch_pad"]
    backend = Canned("A rocket.")
    make(backend, frames=dict(CONF["frames"], num_frames=3, max_pixels=112 * 112)).predict(sample)
    content = backend.requests[0].content
    assert [v for k, v in content if k == "text"][:3] == ["Frame 0:", "Frame 8:", "Frame 15:"]
    images = [v for k, v in content if k == "image"]
    assert len(images) == 3 and all(img.shape == (84, 112, 3) for img in images)  # smart_resize(240, 320) at 112**2
    assert content[-1][1].endswith("Question: What flies upward in this video?\nAnswer the question in one short sentence.")


def test_vqa_answer_is_the_text_after_think_and_the_thought_is_traced(demo):
    pred = make(Canned("<think>it goes up</think><answer>The rocket.</answer>"),
                think={"enabled": True, "budget": 100}).predict(demo["rvt/vqa/launch_pad"])
    assert pred.text == "The rocket." and pred.trace["thought"] == "it goes up"


def test_the_think_budget_adds_to_the_answer_tokens(demo):
    backend = Canned("x", "y")
    make(backend, think={"enabled": True, "budget": 100}).predict(demo["rvt/vqa/launch_pad"])
    make(backend).predict(demo["rvt/vqa/launch_pad"])
    assert [r.max_new_tokens for r in backend.requests] == [612, 512]


def test_a_reply_cut_inside_think_fails_the_sample_with_that_reason(demo):
    backend = Canned(Reply("<think>the rocket rises and then", "length", 612))
    with pytest.raises(ReplyError) as err:
        make(backend, think={"enabled": True, "budget": 100}).predict(demo["rvt/vqa/launch_pad"])
    assert err.value.kind == "parse" and err.value.reason == "think_unclosed"
    assert err.value.trace["reply"] == "<think>the rocket rises and then"


def test_image_segmentation_prompts_sam2_with_frame_pixel_boxes_and_points(demo):
    sample = demo["image/coffee_cup"]  # 400 x 600 -> 392 x 588 input
    sam2 = FakeSam2()
    pred = make(Canned('[{"bbox_2d": [294, 196, 588, 392], "point_2d": [441, 294]}]'), sam2=sam2).predict(sample)
    (kind, boxes, points), = sam2.calls
    assert kind == "image" and boxes == [pytest.approx([300.0, 200.0, 600.0, 400.0])]
    assert points == [pytest.approx([450.0, 300.0])]
    mask = mask_io.decode(pred.masks[0])
    assert mask.shape == (400, 600) and mask.sum() == 300 * 200


def test_video_segmentation_propagates_from_the_first_named_frame(demo):
    sample = demo["video/kitchen_table/0"]
    sam2 = FakeSam2()
    reply = '[{"bbox_2d": [0, 0, 0.5, 0.5], "frame": 5}, {"bbox_2d": [0.5, 0.5, 1, 1], "frame": 10}]'
    pred = make(Canned(reply), sam2=sam2, coords="normalized", frames=dict(CONF["frames"], num_frames=4)).predict(sample)
    (kind, key, boxes), = sam2.calls
    assert kind == "video" and key == 5 and boxes == [[0.0, 0.0, 160.0, 120.0]]
    assert len(pred.masks) == 16 and pred.trace["key_frame"] == 5


def test_an_empty_list_is_the_no_target_answer_not_a_failure(demo):
    sam2 = FakeSam2()
    pred = make(Canned("[]"), sam2=sam2).predict(demo["image/coffee_cup"])
    assert pred.no_target and pred.masks is None and pred.error is None and sam2.calls == []


def test_segmentation_without_sam2_is_an_adapter_error(demo):
    with pytest.raises(AdapterError, match="model.sam2"):
        make(Canned('[{"bbox_2d": [1, 2, 3, 4]}]')).predict(demo["image/coffee_cup"])


def test_backend_errors_fail_only_their_sample(demo):
    class HalfBroken(Canned):
        def generate(self, requests):
            return [AdapterError("server said 500"), Reply("A rocket.", "stop", 2)]

    out = make(HalfBroken()).predict_batch([demo["rvt/vqa/launch_pad"], demo["rvt/vqa/coin_entry"]])
    assert isinstance(out[0], AdapterError) and out[1].text == "A rocket."


@pytest.mark.parametrize("change", [
    {"frames": dict(CONF["frames"], max_pixels=12544)}, {"frames": dict(CONF["frames"], num_frames=8)},
    {"generation": dict(CONF["generation"], max_new_tokens=64)}, {"think": {"enabled": True, "budget": 1024}},
    {"coords": "qwen2_vl"}, {"prompts": dict(CONF["prompts"], vqa="Answer: {query}")}])
def test_sampling_generation_coordinates_and_prompts_change_the_fingerprint(change):
    assert make(Canned()).fingerprint() != make(Canned(), **change).fingerprint()


def test_unknown_settings_are_refused():
    with pytest.raises(AdapterError, match="frames"):
        make(Canned(), frames={"num_frame": 4})
    with pytest.raises(AdapterError, match="backend"):
        VLMAdapter(backend="llava", model="x", prompts=CONF["prompts"])
