"""adapters/vlm/coords.py: boxes in replies and the coordinate conventions of model families."""
from __future__ import annotations

import pytest

from rvt_bench.adapters.vlm.coords import COORDINATE_FAMILIES, Detection, from_frame, parse_detections, to_frame
from rvt_bench.adapters.vlm.reply import ReplyError
from rvt_bench.core.types import AdapterError

FRAME_HW = (480, 854)
INPUT_HW = (476, 840)  # smart_resize(480, 854) at factor 28


def test_qwen_json_with_points_and_frames_inside_a_fence():
    text = '```json\n[{"bbox_2d": [10, 20, 30, 40], "point_2d": [15, 25], "frame": 3, "label": "cup"}]\n```'
    assert parse_detections(text) == [Detection([10.0, 20.0, 30.0, 40.0], [15.0, 25.0], 3)]


def test_a_single_object_and_swapped_corners():
    assert parse_detections('{"bbox_2d": [30, 40, 10, 20]}') == [Detection([10.0, 20.0, 30.0, 40.0])]


def test_json_inside_prose():
    assert parse_detections('Sure! [{"bbox": [1, 2, 3, 4]}] is the cup.') == [Detection([1.0, 2.0, 3.0, 4.0])]


def test_qwen2_box_tokens_with_special_tokens_stripped():
    assert parse_detections("the cup(120,250),(380,700)") == [Detection([120.0, 250.0, 380.0, 700.0])]


def test_bracketed_numbers_as_last_resort():
    assert parse_detections("box: [5, 6.5, 7, 8]") == [Detection([5.0, 6.5, 7.0, 8.0])]


def test_an_empty_json_list_means_no_object():
    assert parse_detections("[]") == []


def test_a_reply_without_boxes_is_a_parse_failure_with_its_reason():
    with pytest.raises(ReplyError) as err:
        parse_detections("I cannot see any cup.")
    assert err.value.reason == "no_boxes" and err.value.kind == "parse"


def test_a_non_integer_frame_is_refused():
    with pytest.raises(ReplyError, match="frame"):
        parse_detections('[{"bbox_2d": [1, 2, 3, 4], "frame": "3"}]')


@pytest.mark.parametrize("family", sorted(COORDINATE_FAMILIES))
def test_round_trip_frame_pixels_to_family_and_back(family):
    box = [100.0, 50.0, 700.5, 479.0]
    written = from_frame(box, family, INPUT_HW, FRAME_HW)
    assert to_frame(Detection(written), family, INPUT_HW, FRAME_HW).box == pytest.approx(box)


def test_qwen2_5_vl_boxes_are_pixels_of_the_resized_input():
    det = to_frame(Detection([420, 238, 840, 476], [210, 119]), "qwen2_5_vl", INPUT_HW, FRAME_HW)
    assert det.box == pytest.approx([427.0, 240.0, 854.0, 480.0])
    assert det.point == pytest.approx([213.5, 120.0])


def test_qwen2_vl_boxes_are_per_mille():
    assert to_frame(Detection([500, 250, 1000, 1000]), "qwen2_vl", INPUT_HW, FRAME_HW).box == \
        pytest.approx([427.0, 120.0, 854.0, 480.0])


def test_normalized_boxes_are_fractions():
    assert to_frame(Detection([0.5, 0.25, 1.0, 1.0]), "normalized", INPUT_HW, FRAME_HW).box == \
        pytest.approx([427.0, 120.0, 854.0, 480.0])


def test_boxes_are_clamped_to_the_frame():
    det = to_frame(Detection([-10, -5, 900, 500], [-1, 999]), "qwen2_5_vl", INPUT_HW, FRAME_HW)
    assert det.box[0] == 0.0 and det.box[1] == 0.0 and det.box[2] == 854.0 and det.box[3] == 480.0
    assert det.point == [0.0, 480.0]


def test_unknown_family_is_a_config_error():
    with pytest.raises(AdapterError, match="model.coords"):
        to_frame(Detection([0, 0, 1, 1]), "pixels", INPUT_HW, FRAME_HW)


def test_json_python_cannot_read_is_not_a_crash():
    from rvt_bench.adapters.vlm.reply import ReplyError

    with pytest.raises(ReplyError) as err:  # nesting past the parser's stack: no box anywhere
        parse_detections("[" * 50000 + "]" * 50000)
    assert err.value.reason == "no_boxes"
    # numbers that are no coordinate: past the digit limit, too large for a float, NaN, infinite
    for text in ('{"bbox_2d": [' + "1" * 5000 + ", 2, 3, 4]}", '[{"bbox_2d": [0, 0, 10, 1' + "0" * 400 + "]}]",
                 '{"bbox_2d": [NaN, 0, 10, 10]}', "[0, 0, 10, 1e999]"):
        with pytest.raises(ReplyError):
            parse_detections(text)
    with pytest.raises(ReplyError):  # a frame index no video has
        parse_detections('{"bbox_2d": [0, 0, 10, 10], "frame": 1' + "0" * 400 + "}")
