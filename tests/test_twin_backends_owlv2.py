"""adapters/twin/backends/owlv2.py with a tiny random-weight OWLv2: boxes land on non-square frames."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.models.owlv2.modeling_owlv2 import Owlv2ObjectDetectionOutput

from rvt_bench.adapters.twin.backends.owlv2 import Owlv2Backend, box_iou, nms, to_detections
from rvt_bench.core.types import AdapterError


@pytest.fixture(scope="module")
def owl():
    return Owlv2Backend.tiny(seed=0, device="cpu", threshold=0.0)


def _outputs(boxes_cxcywh, logits):
    """Raw detector outputs for one image: normalised boxes of the padded square, (Q, P) logits."""
    return Owlv2ObjectDetectionOutput(logits=torch.tensor([logits], dtype=torch.float32),
                                      pred_boxes=torch.tensor([boxes_cxcywh], dtype=torch.float32))


def _post(owl, outputs, size, phrases, **kw):
    params = dict(threshold=0.1, nms_iou=0.3, max_detections=10)
    params.update(kw)
    return to_detections(owl.components()[1], outputs, [size], phrases, **params)[0]


def test_boxes_are_scaled_by_the_padded_square_not_by_h_w(owl):
    # a 100 x 200 (H x W) frame is padded to 200 x 200: the box centred at (0.5, 0.25) of the square
    # with half its side is x 50..150, y 0..100 in frame pixels (scaling y by H would give 0..50)
    dets = _post(owl, _outputs([[0.5, 0.25, 0.5, 0.5]], [[5.0]]), (100, 200), ["dog"])
    assert dets == [{"box": [50.0, 0.0, 150.0, 100.0], "score": pytest.approx(1 / (1 + np.exp(-5.0))),
                     "label": "dog"}]


def test_portrait_frames_pad_on_the_right(owl):
    # 200 x 100 frame: padded square side 200, so x is scaled by 200 too
    dets = _post(owl, _outputs([[0.25, 0.5, 0.5, 0.5]], [[5.0]]), (200, 100), ["dog"])
    assert dets[0]["box"] == [0.0, 50.0, 100.0, 150.0]


def test_boxes_in_the_padding_are_dropped_and_overhangs_clamped(owl):
    boxes = [[0.5, 0.9, 0.2, 0.1],    # y 170..190 px: entirely in the padding below a 100 px frame
             [0.95, 0.2, 0.3, 0.2]]   # x 160..220 px: overhangs the 200 px frame's right edge
    dets = _post(owl, _outputs(boxes, [[4.0], [3.0]]), (100, 200), ["cat"])
    assert [d["box"] for d in dets] == [pytest.approx([160.0, 20.0, 200.0, 60.0], abs=1e-4)]


def test_labels_are_the_best_phrase_and_threshold_is_strict(owl):
    logits = [[-1.0, 2.0], [np.log(0.1 / 0.9), -9.0]]  # second query scores exactly 0.1: dropped
    dets = _post(owl, _outputs([[0.25, 0.25, 0.2, 0.2], [0.75, 0.25, 0.2, 0.2]], logits), (100, 200),
                 ["dog", "cat"])
    assert [d["label"] for d in dets] == ["cat"]


def test_nms_drops_the_weaker_of_overlapping_boxes_and_caps_the_count(owl):
    boxes = [[0.25, 0.25, 0.2, 0.2], [0.26, 0.25, 0.2, 0.2], [0.75, 0.25, 0.2, 0.2]]
    dets = _post(owl, _outputs(boxes, [[1.0], [2.0], [0.5]]), (100, 200), ["x"])
    assert [round(d["box"][0]) for d in dets] == [32, 130]
    assert len(_post(owl, _outputs(boxes, [[1.0], [2.0], [0.5]]), (100, 200), ["x"], max_detections=1)) == 1


def test_box_iou_and_nms_reference_values():
    a = np.array([[0, 0, 10, 10]])
    b = np.array([[5, 0, 15, 10], [20, 20, 30, 30]])
    assert box_iou(a, b).tolist() == [[50 / 150, 0.0]]
    assert nms(np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]]), np.array([0.5, 0.9, 0.1]), 0.3) == [1, 2]


def test_tiny_model_detects_inside_a_non_square_frame(owl):
    frame = np.random.default_rng(1).integers(0, 255, (48, 96, 3), dtype=np.uint8)
    phrases = ["a dog", "a cat sitting on a long checkered blanket next to a red ball and a blue cup"]
    (dets,) = owl.detect([frame], phrases)
    assert dets, "threshold 0 keeps every query inside the frame"
    for d in dets:
        x1, y1, x2, y2 = d["box"]
        assert 0 <= x1 < x2 <= 96 and 0 <= y1 < y2 <= 48
        assert d["label"] in phrases
    assert [d["score"] for d in dets] == sorted((d["score"] for d in dets), reverse=True)


def test_batch_of_frames_gives_one_list_per_frame(owl):
    frames = [np.zeros((48, 96, 3), np.uint8), np.full((48, 96, 3), 200, np.uint8)]
    assert len(owl.detect(frames, ["a dog"])) == 2


def test_no_phrases_is_an_adapter_error(owl):
    with pytest.raises(AdapterError, match="phrase"):
        owl.detect([np.zeros((8, 8, 3), np.uint8)], [])


def test_fingerprint_names_model_revision_and_params(owl):
    assert owl.fingerprint() == {"backend": "owlv2", "model_id": "tiny-random/owlv2", "revision": "seed0",
                                 "params": {"threshold": 0.0, "nms_iou": 0.3, "max_detections": 10}}


def test_nms_keeps_equal_scores_in_input_order_and_handles_no_boxes():
    boxes = np.array([[0, 0, 10, 10], [100, 0, 110, 10], [1, 0, 11, 10], [200, 0, 210, 10]], dtype=float)
    assert nms(boxes, np.array([0.5, 0.5, 0.5, 0.5]), 0.3) == [0, 1, 3]
    assert nms(np.zeros((0, 4)), np.zeros(0), 0.3) == []
