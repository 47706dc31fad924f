"""adapters/twin/backends/qwen_vl.py with a tiny random-weight Qwen2.5-VL and a local tokenizer."""
from __future__ import annotations

import numpy as np
import pytest
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

from rvt_bench.adapters.twin.backends.qwen_vl import QwenVLBackend, parse_boxes, rescale_box
from rvt_bench.core.types import AdapterError


@pytest.fixture(scope="module")
def qwen():
    return QwenVLBackend.tiny(seed=0, device="cpu", max_new_tokens=6, batch_size=3)


def _frame(height, width, seed):
    return np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)


def test_left_padded_batch_answers_like_one_by_one(qwen):
    requests = [([_frame(40, 90, 0)], "Describe this video frame in one sentence."),
                ([_frame(60, 60, 1)], "a dog"),
                ([_frame(50, 70, 2), _frame(50, 70, 3)], "Summarize what happens in two sentences.")]
    batched = qwen.generate(requests)
    alone = [qwen.generate([r])[0] for r in requests]
    assert batched == alone
    assert qwen.components()[1].tokenizer.padding_side == "left"


def test_right_padding_setting_is_overridden(qwen):
    qwen.components()[1].tokenizer.padding_side = "right"
    qwen.generate([([_frame(40, 90, 0)], "a"), ([_frame(40, 90, 1)], "a much longer prompt than the first")])
    assert qwen.components()[1].tokenizer.padding_side == "left"


def test_input_sizes_are_qwens_smart_resize_of_each_image(qwen):
    frames = [_frame(40, 90, 0), _frame(100, 30, 1)]
    (_, sizes), = qwen.generate_with_sizes([(frames, "x")])
    size = qwen.components()[1].image_processor.size
    lo, hi = size["shortest_edge"], size["longest_edge"]
    assert (lo, hi) == (56 * 56, 112 * 112)
    assert sizes == [smart_resize(40, 90, factor=28, min_pixels=lo, max_pixels=hi),
                     smart_resize(100, 30, factor=28, min_pixels=lo, max_pixels=hi)]
    assert all(h % 28 == 0 and w % 28 == 0 for h, w in sizes)


def test_rescale_box_maps_input_pixels_to_frame_pixels_and_clamps():
    # input 280 x 504 (h x w) for a 500 x 900 frame: scale 900/504 in x, 500/280 in y
    assert rescale_box([252, 140, 504, 280], (280, 504), (500, 900)) == pytest.approx([450.0, 250.0, 900.0, 500.0])
    assert rescale_box([-10, 10, 600, 300], (280, 504), (500, 900)) == pytest.approx([0.0, 500 / 28, 900.0, 500.0])


def test_parse_boxes_reads_qwens_json_and_falls_back_to_bracketed_lists():
    fenced = '```json\n[{"bbox_2d": [10, 20, 30, 40], "label": "dog"}, {"bbox_2d": [50, 5, 40, 1]}]\n```'
    assert parse_boxes(fenced) == [[10.0, 20.0, 30.0, 40.0], [40.0, 1.0, 50.0, 5.0]]
    assert parse_boxes("the dog is at [1, 2.5, 3, 4] and [5,6,7,8].") == [[1.0, 2.5, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]
    assert parse_boxes("no boxes here") == []


def test_ground_rescales_the_models_boxes_to_the_frame(qwen, monkeypatch):
    frame = _frame(500, 900, 0)
    monkeypatch.setattr(qwen, "generate_with_sizes",
                        lambda requests: [('[{"bbox_2d": [252, 140, 504, 280]}]', [(280, 504)])])
    assert qwen.ground(frame, "dog") == [pytest.approx([450.0, 250.0, 900.0, 500.0])]


def test_prompts_are_params_and_unknown_keys_are_refused():
    backend = QwenVLBackend(model_id="x", prompts={"frame": "Caption:"})
    assert backend.prompt("frame") == "Caption:" and backend.fingerprint()["params"]["prompts"]["frame"] == "Caption:"
    with pytest.raises(AdapterError, match="colour"):
        QwenVLBackend(model_id="x", prompts={"colour": "?"})
