"""The VLM prompts of conf/model/vlm.yaml, rendered (golden strings: a change to a prompt must
show up here and bump prompts.version)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rvt_bench.adapters.vlm import prompts as P
from rvt_bench.adapters.vlm.coords import COORDINATE_FAMILIES
from rvt_bench.core.types import AdapterError
from rvt_bench.harness.config import group_node

# the composed `model` node (schema defaults + conf/model/vlm.yaml), unresolved: as run_bench.py builds it
CONF = OmegaConf.to_container(group_node("model", "vlm"), resolve=False)
PROMPTS = P.check(CONF["prompts"])


def test_prompts_are_version_1():
    assert PROMPTS["version"] == 1 and PROMPTS["system"] is None


def test_image_segmentation_prompt():
    text = P.render_text(PROMPTS, "segmentation", "image", "the container used for hot drinks",
                         COORDINATE_FAMILIES["qwen2_5_vl"], 1)
    assert text == (
        "Look at the image.\n"
        "Query: the container used for hot drinks\n"
        'Find the object or objects the query refers to. Answer with a JSON list, one entry per object: '
        '[{"bbox_2d": [x1, y1, x2, y2], "point_2d": [x, y]}], with coordinates in pixels of the image as you '
        "see it; the point lies inside the object. Answer [] if nothing matches.")


def test_video_grounding_prompt():
    text = P.render_text(PROMPTS, "grounding", "video", "the cup", COORDINATE_FAMILIES["qwen2_vl"], 3)
    assert text == (
        "Look at these 3 frames of one video, in temporal order, each after its label.\n"
        "Query: the cup\n"
        'Locate the object or objects the query refers to. Answer with a JSON list, one entry per object: '
        '[{"bbox_2d": [x1, y1, x2, y2]}], with coordinates as integers from 0 to 1000 relative to the image '
        'width and height. For a video, write one entry per frame where the object is visible, with "frame": '
        "that frame number. Answer [] if nothing matches.")


def test_video_segmentation_asks_for_one_frame_per_object():
    text = P.render_text(PROMPTS, "segmentation", "video", "q", COORDINATE_FAMILIES["normalized"], 2)
    assert 'For a video, add "frame": the number of one frame where the object is clearly visible.' in text


def test_vqa_and_summary_prompts():
    assert P.render_text(PROMPTS, "vqa", "video", "What moves?", "", 4) == (
        "Look at these 4 frames of one video, in temporal order, each after its label.\n"
        "Question: What moves?\nAnswer the question in one short sentence.")
    assert P.render_text(PROMPTS, "summarization", "image", "Describe the scene.", "", 1) == (
        "Look at the image.\nDescribe the scene.\nAnswer in two or three sentences.")


def test_video_content_labels_each_frame_with_its_sample_index():
    frames = [np.zeros((2, 2, 3), np.uint8) for _ in range(2)]
    content = P.user_content(PROMPTS, "vqa", "video", "q", "", frames, [0, 7])
    assert [kind for kind, _ in content] == ["text", "image", "text", "image", "text"]
    assert content[0][1] == "Frame 0:" and content[2][1] == "Frame 7:" and content[1][1] is frames[0]


def test_image_content_is_the_image_then_the_text():
    frame = np.zeros((2, 2, 3), np.uint8)
    content = P.user_content(PROMPTS, "vqa", "image", "q", "", [frame], [0])
    assert [kind for kind, _ in content] == ["image", "text"]


def test_the_digest_changes_with_any_prompt_text():
    changed = dict(PROMPTS, vqa=PROMPTS["vqa"] + " ")
    assert P.digest(changed) != P.digest(PROMPTS)


def test_a_missing_prompt_is_named():
    with pytest.raises(AdapterError, match="grounding"):
        P.check({k: v for k, v in PROMPTS.items() if k != "grounding"})
