"""metrics/boxes.py: continuous-coordinate box IoU, union-of-boxes frames, gIoU / cIoU / Acc@0.5.

References: pycocotools `mask.iou` on xywh boxes for single boxes (same continuous convention,
no +1); for several boxes per frame, pixel counting on a grid, which is exact when every
coordinate is an integer (and, after scaling by 4, a multiple of 0.25).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from rvt_bench.metrics.boxes import aggregate_boxes, as_boxes, box_iou, frame_box_iou, sample_box_scores


def _raster_inter_union(pred, gt, scale=1):
    """Reference for union-of-boxes frames: paint boxes on a grid of 1/scale-pixel cells."""
    size = 96 * scale  # boxes reach at most 60 + 20 = 80 px
    p = np.zeros((size, size), dtype=bool)
    g = np.zeros((size, size), dtype=bool)
    for boxes, canvas in ((pred, p), (gt, g)):
        for x1, y1, x2, y2 in boxes:
            canvas[round(y1 * scale) : round(y2 * scale), round(x1 * scale) : round(x2 * scale)] = True
    cell = 1.0 / scale**2
    return np.count_nonzero(p & g) * cell, np.count_nonzero(p | g) * cell


def _random_boxes(rng, n, step=1.0):
    xy = rng.integers(0, int(60 / step), size=(n, 2)) * step
    wh = rng.integers(0, int(20 / step), size=(n, 2)) * step
    return np.concatenate([xy, xy + wh], axis=1).tolist()


def test_half_overlap_is_exactly_one_half():
    assert box_iou([0, 0, 10, 10], [0, 5, 10, 10]) == 0.5


def test_no_plus_one_convention():
    # Pascal VOC's +1 would give 2*2 / (2*2 + 2*2 - 1*2) = 2/3; continuous coordinates give 1/3.
    assert box_iou([0, 0, 1, 1], [0, 0, 1, 3]) == pytest.approx(1 / 3, abs=0)


def test_disjoint_and_touching_boxes_score_zero():
    assert box_iou([0, 0, 10, 10], [20, 20, 30, 30]) == 0.0
    assert box_iou([0, 0, 10, 10], [10, 0, 20, 10]) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_box_iou_matches_pycocotools(seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 100, size=(50, 2))
    b = rng.uniform(0, 100, size=(50, 2))
    wh_a = rng.uniform(0.1, 50, size=(50, 2))
    wh_b = rng.uniform(0.1, 50, size=(50, 2))
    # pycocotools takes xywh boxes; iscrowd=0 gives the plain IoU
    ref = mask_utils.iou(np.hstack([a, wh_a]), np.hstack([b, wh_b]), [0] * 50)
    ours = np.array([[box_iou(x, y) for y in np.hstack([b, b + wh_b])] for x in np.hstack([a, a + wh_a])])
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("bad", [[10, 0, 5, 10], [0, 10, 10, 5]])
def test_inverted_box_raises_naming_the_box(bad):
    with pytest.raises(ValueError, match=r"box 0 \[.*\] is invalid"):
        box_iou(bad, [0, 0, 1, 1])


def test_non_finite_and_misshapen_boxes_raise():
    with pytest.raises(ValueError, match="non-finite"):
        as_boxes([0, 0, float("nan"), 1])
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        as_boxes([[0, 0, 1]])


def test_zero_area_boxes_are_valid_and_count_as_nothing():
    assert box_iou([5, 5, 5, 5], [1, 1, 1, 9]) == 1.0
    assert box_iou([5, 5, 5, 5], [0, 0, 10, 10]) == 0.0


def test_frame_with_no_box_on_either_side():
    assert frame_box_iou([], None) == (0.0, 0.0)


def test_frame_with_prediction_but_no_gt_box():
    assert frame_box_iou([[0, 0, 4, 5]], []) == (0.0, 20.0)
    assert frame_box_iou(None, [[0, 0, 4, 5]]) == (0.0, 20.0)


def test_overlapping_boxes_on_one_side_are_not_double_counted():
    # GT = two 10x10 boxes overlapping on a 5x10 strip: union area 150, not 200.
    inter, union = frame_box_iou([[0, 0, 10, 10]], [[0, 0, 10, 10], [5, 0, 15, 10]])
    assert (inter, union) == (100.0, 150.0)


@pytest.mark.parametrize("seed", range(20))
def test_union_of_boxes_matches_pixel_counting_on_integer_boxes(seed):
    rng = np.random.default_rng(seed)
    pred = _random_boxes(rng, rng.integers(0, 4))
    gt = _random_boxes(rng, rng.integers(1, 4))
    assert frame_box_iou(pred, gt) == _raster_inter_union(pred, gt)


@pytest.mark.parametrize("seed", range(10))
def test_union_of_boxes_is_continuous_not_pixel_snapped(seed):
    rng = np.random.default_rng(100 + seed)
    pred = _random_boxes(rng, rng.integers(1, 4), step=0.25)
    gt = _random_boxes(rng, rng.integers(1, 4), step=0.25)
    inter, union = frame_box_iou(pred, gt)
    ref_i, ref_u = _raster_inter_union(pred, gt, scale=4)
    assert inter == pytest.approx(ref_i, abs=1e-9) and union == pytest.approx(ref_u, abs=1e-9)


def test_sample_scores_mean_over_frames_and_sum_counts():
    pred = [[[0, 0, 10, 10]], [], [[0, 0, 2, 2]], None]
    gt = [[[0, 5, 10, 10]], [], [], [[0, 0, 1, 1]]]
    rec = sample_box_scores(pred, gt)
    # frames: 50/100, both empty -> 1.0, pred where GT has none -> 0, missed GT -> 0
    assert rec["frame_ious"] == [0.5, 1.0, 0.0, 0.0]
    assert rec["giou_term"] == 0.375
    assert (rec["I"], rec["U"]) == (50.0, 105.0)


def test_missing_prediction_scores_as_empty():
    rec = sample_box_scores(None, [[[0, 0, 1, 1]], []])
    assert rec["frame_ious"] == [0.0, 1.0]


def test_sample_frame_count_mismatch_and_bad_frame_raise():
    with pytest.raises(ValueError, match="2 predicted frames vs 1 GT frames"):
        sample_box_scores([[], []], [[]])
    with pytest.raises(ValueError, match="frame 1: prediction: box 0"):
        sample_box_scores([[], [[3, 0, 1, 1]]], [[], []])


def test_aggregate_giou_ciou_and_accuracy():
    records = [
        {"giou_term": 0.5, "I": 50.0, "U": 100.0},  # exactly 0.5 is not > 0.5
        {"giou_term": 0.9, "I": 90.0, "U": 100.0},
        {"giou_term": 1.0, "I": 0.0, "U": 0.0},
        {"giou_term": 0.1, "I": 10.0, "U": 200.0},
    ]
    out = aggregate_boxes(records)
    assert out["gIoU"] == pytest.approx(0.625, abs=1e-15)
    assert out["cIoU"] == 150.0 / 400.0
    assert out["Acc@0.5"] == 0.5
    assert out["n"] == 4


def test_aggregate_with_no_union_at_all_and_no_records():
    assert aggregate_boxes([{"giou_term": 1.0, "I": 0.0, "U": 0.0}])["cIoU"] == 0.0
    with pytest.raises(ValueError, match="no records"):
        aggregate_boxes([])
    assert math.isclose(aggregate_boxes([{"giou_term": 0.8, "I": 8, "U": 10}], threshold=0.75)["Acc@0.75"], 1.0)


# --- HC-STVG vIoU against TubeDETR's evaluator (tests/data/parity/hcstvg_viou.json) -----------------

HCSTVG = json.loads((Path(__file__).parent / "data" / "parity" / "hcstvg_viou.json").read_text())


def _tube_records():
    return [sample_box_scores([[b] if b else [] for b in c["pred"]], [[b] if b else [] for b in c["gt"]])
            for c in HCSTVG["cases"]]


def test_viou_per_sample_equals_tubedetr():
    for case, rec in zip(HCSTVG["cases"], _tube_records()):
        assert rec["viou"] == pytest.approx(HCSTVG["viou"][str(case["video_id"])], abs=1e-12), case["video_id"]


def test_m_viou_and_viou_at_r_equal_tubedetr():
    out = aggregate_boxes(_tube_records())
    for key in ("m_vIoU", "vIoU@0.3", "vIoU@0.5"):
        assert out[key] == pytest.approx(HCSTVG[key], abs=1e-12), key


def test_a_model_that_never_answers_scores_zero_viou_but_high_giou():
    """10 frames, object visible in 2: gIoU credits the 8 silent frames; vIoU does not."""
    gt = [[[0, 0, 10, 10]] if t < 2 else [] for t in range(10)]
    rec = sample_box_scores(None, gt)
    assert rec["giou_term"] == 0.8 and rec["viou"] == 0.0 and rec["tube_frames"] == 2
