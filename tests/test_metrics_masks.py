"""metrics/masks.py against numbers printed by the reference code (tests/data/parity/README.md)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.core.masks import decode
from rvt_bench.metrics.masks import (
    boundary_map,
    bound_pixels,
    ciou,
    disk_kernel,
    disk_rectangles,
    f_measure,
    giou,
    jaccard,
    jf_counts,
    lisa_intersection_union,
    lisa_sample_iou,
    sample_iou,
)

PARITY = Path(__file__).parent / "data" / "parity"


def _jsonl(name: str) -> list[dict]:
    with open(PARITY / name) as fh:
        return [json.loads(line) for line in fh if line.strip()]


DAVIS = _jsonl("davis_jf.jsonl")
DAVIS_FRESH = _jsonl("davis_fresh.jsonl")
LISA = _jsonl("lisa_giou_ciou.jsonl")
LISA_AGG = json.loads((PARITY / "lisa_giou_ciou_aggregate.json").read_text())


# --- DAVIS J / F: davis2017-evaluation ac7c43f ------------------------------------------------------


@pytest.mark.parametrize("case", DAVIS, ids=[c["id"] for c in DAVIS])
def test_davis_parity(case):
    gt, pred = decode(case["gt"]), decode(case["pred"])
    assert abs(jaccard(gt, pred) - case["J"]) <= 1e-12
    assert abs(f_measure(gt, pred) - case["F"]) <= 1e-12


@pytest.mark.parametrize("case", DAVIS_FRESH, ids=[c["id"] for c in DAVIS_FRESH])
def test_davis_fresh_parity(case):
    gt, pred = decode(case["gt"]), decode(case["pred"])
    assert abs(jaccard(gt, pred) - case["J"]) <= 1e-9
    assert abs(f_measure(gt, pred) - case["F"]) <= 1e-9


@pytest.mark.parametrize("case", DAVIS + DAVIS_FRESH, ids=[c["id"] for c in DAVIS + DAVIS_FRESH])
def test_one_pass_jf_counts_equal_davis(case):
    """jf_counts (J and F on the objects' box, disk dilation by rectangle sums) against davis2017's
    db_eval_iou and f_measure on every parity pair."""
    inter, union, f = jf_counts(decode(case["gt"]).astype(bool), decode(case["pred"]).astype(bool))
    assert abs((1.0 if union == 0 else inter / union) - case["J"]) <= 1e-12
    assert abs(f - case["F"]) <= 1e-12


@pytest.mark.parametrize("radius", [1, 2, 3, 8, 12, 18, 25])
def test_disk_rectangles_cover_exactly_the_disk_kernel(radius):
    cover = np.zeros((2 * radius + 1,) * 2, dtype=np.uint8)
    for dy, dx in disk_rectangles(radius):
        cover[radius - dy:radius + dy + 1, radius - dx:radius + dx + 1] = 1
    np.testing.assert_array_equal(cover, disk_kernel(float(radius)))


def test_fractional_pixel_tolerance_uses_the_dilation_path():
    """bound_th >= 1 is a tolerance in pixels; a fractional one (disk(1.5)) goes through the
    reference's dilation, since the one-pass path handles whole pixels only."""
    gt = np.zeros((20, 20), bool)
    gt[5:10, 5:10] = True
    pred = np.roll(gt, 2, axis=1)
    assert f_measure(gt, pred, bound_th=1.5) == jf_counts(gt, pred, bound_th=1.5)[2]
    assert f_measure(gt, pred, bound_th=1.5) < f_measure(gt, pred, bound_th=2.0)


def test_fresh_set_covers_the_frame_sizes_the_brief_names():
    sizes = {(c["height"], c["width"]) for c in DAVIS_FRESH}
    assert {(480, 854), (720, 1280), (1, 1)} <= sizes
    assert len(DAVIS_FRESH) >= 50


@pytest.mark.parametrize("radius", [1.0, 2.0, 8.0, 12.0, 18.0, 30.0, 1.5])
def test_disk_kernel_equals_skimage_disk(radius):
    morphology = pytest.importorskip("skimage.morphology")
    np.testing.assert_array_equal(disk_kernel(radius), morphology.disk(radius).astype(np.uint8))


@pytest.mark.parametrize("shape, expected", [((480, 854), 8.0), ((720, 1280), 12.0), ((1080, 1920), 18.0), ((1, 1), 1.0)])
def test_bound_pixels_is_ceil_of_diagonal_fraction(shape, expected):
    assert bound_pixels(*shape) == expected


def test_both_empty_is_perfect():
    z = np.zeros((48, 64), bool)
    assert jaccard(z, z) == 1.0
    assert f_measure(z, z) == 1.0


def test_empty_gt_against_a_prediction_scores_zero():
    gt = np.zeros((48, 64), bool)
    pred = gt.copy()
    pred[10:20, 10:30] = True
    assert jaccard(gt, pred) == 0.0
    assert f_measure(gt, pred) == 0.0


def test_empty_prediction_against_a_gt_scores_zero():
    gt = np.zeros((48, 64), bool)
    gt[5:9, 5:9] = True
    assert jaccard(gt, np.zeros_like(gt)) == 0.0
    assert f_measure(gt, np.zeros_like(gt)) == 0.0


def test_full_frame_mask_has_no_davis_boundary_so_f_is_one_against_empty():
    full = np.ones((30, 40), bool)
    assert not boundary_map(full).any()
    assert jaccard(full, np.zeros_like(full)) == 0.0
    assert f_measure(full, np.zeros_like(full)) == 1.0


def test_one_pixel_object_boundary_is_its_upper_left_2x2_block():
    seg = np.zeros((6, 6), bool)
    seg[3, 3] = True
    expected = np.zeros_like(seg)
    expected[2:4, 2:4] = True
    np.testing.assert_array_equal(boundary_map(seg), expected)


def test_boundaries_within_bound_pix_match_fully_and_farther_do_not():
    gt = np.zeros((480, 854), bool)
    gt[100:200, 100:300] = True
    near = np.roll(gt, 8, axis=1)  # bound_pix is 8 at 480x854
    far = np.roll(gt, 9, axis=1)
    assert f_measure(gt, near) == 1.0
    assert f_measure(gt, far) < 1.0


def test_integer_masks_count_nonzero_as_foreground():
    gt = np.zeros((20, 20), np.uint8)
    gt[2:8, 2:8] = 1
    pred = gt * 255
    assert jaccard(gt, pred) == 1.0
    assert f_measure(gt, pred) == 1.0


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="same shape"):
        jaccard(np.zeros((4, 4), bool), np.zeros((4, 5), bool))
    with pytest.raises(ValueError, match="same shape"):
        f_measure(np.zeros((4, 4), bool), np.zeros((5, 4), bool))


# --- LISA I / U / gIoU / cIoU: LISA 3cb2d43 ---------------------------------------------------------


def _lisa_counts(case):
    ignore = decode(case["ignore"]) if case["ignore"] is not None else None
    return lisa_intersection_union(decode(case["pred"]), decode(case["gt"]), ignore)


@pytest.mark.parametrize("case", LISA, ids=[c["id"] for c in LISA])
def test_lisa_counts_and_term_parity(case):
    inter, union, target = _lisa_counts(case)
    assert (inter, union, target) == (case["intersection"], case["union"], case["target"])
    assert abs(lisa_sample_iou(inter, union) - case["acc_iou_float32"]) <= 1e-7


def test_lisa_aggregates_reference_and_textbook():
    counts = [_lisa_counts(c)[:2] for c in LISA]  # file order, as the reference run
    inters, unions = [i for i, _ in counts], [u for _, u in counts]
    ref, book = LISA_AGG["lisa_reference"], LISA_AGG["textbook_float64"]
    assert abs(giou([lisa_sample_iou(i, u) for i, u in counts]) - ref["giou"]["value"]) <= 1e-6
    assert abs(ciou(inters, unions) - ref["ciou"]["value"]) <= 1e-6
    assert abs(giou([sample_iou(i, u) for i, u in counts], "textbook") - book["giou"]) <= 1e-12
    assert abs(ciou(inters, unions, "textbook") - book["ciou"]) <= 1e-12


def test_lisa_reference_aggregates_are_bit_exact_float32():
    counts = [_lisa_counts(c)[:2] for c in LISA]
    ref = LISA_AGG["lisa_reference"]
    assert giou([lisa_sample_iou(i, u) for i, u in counts]).hex() == ref["giou"]["hex"]
    assert giou([lisa_sample_iou(i, u) for i, u in counts]) == ref["giou"]["value"]
    assert ciou([i for i, _ in counts], [u for _, u in counts]).hex() == ref["ciou"]["hex"]


def test_ignore_pixels_leave_both_masks():
    gt = np.zeros((10, 10), bool)
    gt[0:4, 0:4] = True
    pred = np.zeros_like(gt)
    pred[2:6, 2:6] = True
    ignore = np.zeros_like(gt)
    ignore[:, 3:] = True  # keeps columns 0..2 only
    # kept: gt rows 0-3 x cols 0-2 (12 px); pred rows 2-5 x col 2 (4 px); overlap rows 2-3 x col 2
    assert lisa_intersection_union(pred, gt, ignore) == (2, 14, 12)


def test_lisa_term_has_epsilon_and_counts_empty_union_as_one():
    assert lisa_sample_iou(1, 1) == float(np.float32(1) / np.float32(1 + 1e-5))
    assert lisa_sample_iou(1, 1) < 1.0
    assert lisa_sample_iou(0, 0) == 1.0
    assert sample_iou(1, 1) == 1.0


def test_reference_giou_divides_by_n_plus_epsilon():
    assert giou([1.0, 1.0], "reference") == float(np.float32(2.0) / np.float32(2 + 1e-5))
    assert giou([1.0, 1.0], "textbook") == 1.0


def test_ciou_with_no_union_at_all_is_zero_in_both_modes():
    assert ciou([0, 0], [0, 0]) == 0.0
    assert ciou([0, 0], [0, 0], "textbook") == 0.0


def test_aggregates_reject_empty_input_and_unknown_modes():
    with pytest.raises(ValueError):
        giou([])
    with pytest.raises(ValueError):
        ciou([], [])
    with pytest.raises(ValueError):
        ciou([1], [1, 2])
    with pytest.raises(ValueError):
        giou([0.5], "float16")
