"""Parsing of DT-R1 answers into masks, pixel boxes and text."""
import numpy as np
import pytest

from rvt_bench.adapters.dtr1.answer import parse_answer, parse_task
from rvt_bench.adapters.dtr1.tags import TagError
from rvt_bench.core import masks as mask_io


class TinyTwin:
    """Two instances over T=2 frames of 4x6: instance 1 in both frames, instance 2 in frame 1 only."""

    size = (4, 6)
    num_frames = 2

    def __init__(self):
        a = np.zeros((4, 6), bool)
        a[0, 0:2] = True
        b = np.zeros((4, 6), bool)
        b[3, 4:6] = True
        self.arrays = {1: [a, a], 2: [None, b]}

    def instance_ids(self):
        return [1, 2]

    def masks_for(self, ids):
        out = []
        for t in range(2):
            present = [self.arrays[i][t] for i in ids if self.arrays[i][t] is not None]
            out.append(mask_io.encode(np.logical_or.reduce(present)) if present else None)
        return out


def test_segmentation_answer_is_per_frame_union():
    ans = parse_answer("segmentation", '{"instances": [1, 2]}', TinyTwin())
    assert mask_io.area(ans.masks[0]) == 2
    assert mask_io.area(ans.masks[1]) == 4
    assert ans.boxes is None and ans.text is None


def test_segmentation_answer_in_code_fence_with_whitespace():
    ans = parse_answer("segmentation", '\n```json\n{ "instances" : [2] }\n```\n', TinyTwin())
    assert ans.masks[0] is None
    assert mask_io.area(ans.masks[1]) == 2


def test_segmentation_empty_list_means_no_object():
    assert parse_answer("segmentation", '{"instances": []}', TinyTwin()).masks == [None, None]


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"instances": [3]}', "unknown_instance"),
        ('{"instances": [1,', "json"),
        ("instance 1", "json"),
        ('{"instances": ["1"]}', "schema"),
        ('{"instances": [true]}', "schema"),
        ('{"instances": 1}', "schema"),
        ('{"ids": [1]}', "schema"),
        ("[1]", "schema"),
        ('{"instances": [' + "1" * 5000 + "]}", "json"),                    # past Python's integer digit limit
        ('{"instances": ' + "[" * 50000 + "]" * 50000 + "}", "json"),       # past Python's parser stack
    ],
)
def test_segmentation_bad_answers_are_parse_errors(text, reason):
    with pytest.raises(TagError) as info:
        parse_answer("segmentation", text, TinyTwin())
    assert info.value.reason == reason


def test_grounding_boxes_are_converted_to_pixels():
    # size (H, W) = (4, 6): x scales by 6, y by 4
    ans = parse_answer("grounding", '{"boxes": {"1": [[0.5, 0.25, 1.0, 0.75]]}}', TinyTwin())
    assert ans.boxes == [[], [[3.0, 1.0, 6.0, 3.0]]]


@pytest.mark.parametrize(
    "text",
    [
        '{"boxes": {"2": [[0, 0, 1, 1]]}}',       # frame out of range
        '{"boxes": {"0": [[0, 0, 2, 1]]}}',       # not normalized
        '{"boxes": {"0": [[0.5, 0, 0.2, 1]]}}',   # x2 < x1
        '{"boxes": {"0": [[0, 0, 1]]}}',          # three numbers
        '{"boxes": [[0, 0, 1, 1]]}',              # not keyed by frame
        '{"boxes": {"0": [[0, 0, 1, 1' + "0" * 400 + ']]}}',  # an integer too large for a float
        '{"boxes": {"\u00b2": [[0, 0, 0.5, 0.5]]}}',          # "²" is a digit to str.isdigit, not to int()
        '{"boxes": {"' + "0" * 5000 + '1": [[0, 0, 0.5, 0.5]]}}',  # a frame index past the digit limit
        '{"boxes": {"0": [[NaN, 0, 0.5, 0.5]]}}',
    ],
)
def test_grounding_bad_boxes_are_parse_errors(text):
    with pytest.raises(TagError):
        parse_answer("grounding", text, TinyTwin())


def test_vqa_answer_is_stripped_text():
    assert parse_answer("vqa", "  a red car \n", TinyTwin()).text == "a red car"


def test_empty_text_answer_is_a_parse_error():
    with pytest.raises(TagError) as info:
        parse_answer("summarization", "  ", TinyTwin())
    assert info.value.reason == "empty_answer"


def test_parse_task_is_case_insensitive_and_strict():
    assert parse_task(" Segmentation\n") == "segmentation"
    assert parse_task(None) is None
    with pytest.raises(TagError) as info:
        parse_task("detection")
    assert info.value.reason == "unknown_task"
