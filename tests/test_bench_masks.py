"""bench/core/masks.py: LISA's polygon rasterisation (parity with the masks LISA's own code drew), the RLE
codec and PNG masks."""
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from rvt_bench.core import masks
from rvt_bench.core.types import DatasetFormatError

POLYGONS = Path(__file__).parent / "data" / "parity" / "polygons_reasonseg.jsonl"
CASES = [json.loads(line) for line in POLYGONS.read_text().splitlines() if line.strip()]
FILLS = [json.loads(line) for line in (POLYGONS.parent / "fillpoly_cv48.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_labelme_rasterisation_matches_lisa_under_any_opencv(case):
    """LISA's masks as its pinned OpenCV 4.8.0.74 drew them, whatever OpenCV is installed here
    (the 11 cases with `opencv_variants` are drawn differently by 4.5-4.7 and 4.11-5.0)."""
    label_map = masks.rasterize_labelme(case["shapes"], case["height"], case["width"])
    assert np.array_equal(label_map == 1, masks.decode(case["mask_value1"])), (case["case"], cv2.__version__)
    assert np.array_equal(label_map == 255, masks.decode(case["mask_value255"])), (case["case"], cv2.__version__)
    assert set(np.unique(label_map)) <= {0, 1, 255}


def test_parity_set_has_the_cases_where_opencv_versions_disagree():
    assert len(CASES) == 51
    assert sum("opencv_variants" in c for c in CASES) == 11


@pytest.mark.parametrize("case", FILLS, ids=[c["id"] for c in FILLS])
def test_fill_poly_port_equals_opencv_4_8_fillpoly(case):
    """Random int32 polygons (off-image points, 1-9 vertices) filled by OpenCV 4.8.0's cv2.fillPoly
    (tests/data/parity/README.md)."""
    img = np.zeros((case["height"], case["width"]), dtype=np.uint8)
    masks.fill_poly_cv48(img, np.array(case["points"]), 1)
    assert np.array_equal(img == 1, masks.decode(case["mask"]))


def _random_polygon(rng, k):
    n = int(rng.integers(1, 40))
    pts = rng.integers(*((-80, 140) if k % 3 else (-5, 70)), size=(n, 2))
    if k % 7 == 0:  # far off the image: clipped edges, fixed point near int64's range
        pts = pts * int(rng.integers(1, 10**6))
    return (int(rng.integers(1, 60)), int(rng.integers(1, 60))), pts


def test_fill_poly_rows_equal_the_linked_list_port_on_random_polygons():
    """masks._fill_edges (rows at once) against OpenCV 4.8.0's active-edge list walked row by row
    (tests/cv48_reference.py): self-intersecting, off-image and huge-coordinate polygons."""
    from tests.cv48_reference import fill_poly_reference

    rng = np.random.default_rng(24)
    for k in range(400):
        (h, w), pts = _random_polygon(rng, k)
        if pts[:, 1].min() < -5000:  # the reference walks every row from the top vertex: too slow here
            continue
        ours, theirs = np.zeros((h, w), np.uint8), np.zeros((h, w), np.uint8)
        masks.fill_poly_cv48(ours, pts, 1)
        fill_poly_reference(theirs, pts, 1)
        assert np.array_equal(ours, theirs), (h, w, pts.tolist())


def test_fill_poly_in_blocks_of_rows_equals_one_block(monkeypatch):
    rng = np.random.default_rng(7)
    cases = [((90, 100), rng.integers(-20, 120, size=(int(rng.integers(3, 60)), 2))) for _ in range(60)]
    whole = []
    for (h, w), pts in cases:
        img = np.zeros((h, w), np.uint8)
        masks.fill_poly_cv48(img, pts, 1)
        whole.append(img)
    monkeypatch.setattr(masks, "_BLOCK_VALUES", 50)
    for ((h, w), pts), expected in zip(cases, whole):
        img = np.zeros((h, w), np.uint8)
        masks.fill_poly_cv48(img, pts, 1)
        assert np.array_equal(img, expected)


def test_a_vertex_far_above_the_image_costs_no_rows():
    """OpenCV walks every row from the top vertex (2**31 of them here); the rows above the image draw nothing."""
    img = np.zeros((48, 64), np.uint8)
    masks.fill_poly_cv48(img, np.array([[0, -2**31], [60, 40], [10, 30]]), 1)
    assert img[47].sum() == 0 and img[:31].sum() > 0


def test_rle_round_trip_and_ascii_counts():
    rng = np.random.default_rng(0)
    m = rng.random((37, 53)) > 0.6
    rle = masks.encode(m)
    assert isinstance(rle["counts"], str) and rle["size"] == [37, 53]
    assert np.array_equal(masks.decode(rle), m)
    assert masks.area(rle) == int(m.sum())


def test_uncompressed_counts_decode_and_compress():
    # 2x3 frame, column-major runs: 1 background, 2 foreground, 3 background
    rle = {"size": [2, 3], "counts": [1, 2, 3]}
    want = np.array([[0, 1, 0], [1, 0, 0]], bool)
    assert np.array_equal(masks.decode(rle), want)
    compressed = masks.compress(rle)
    assert isinstance(compressed["counts"], str) and np.array_equal(masks.decode(compressed), want)


def test_union_and_tight_box():
    a = np.zeros((10, 20), bool)
    b = np.zeros((10, 20), bool)
    a[1:3, 2:5] = True
    b[6:8, 10:12] = True
    u = masks.union([masks.encode(a), None, masks.encode(b)], 10, 20)
    assert np.array_equal(masks.decode(u), a | b)
    assert masks.to_bbox(u) == [2.0, 1.0, 12.0, 8.0]  # continuous: x2 = last column + 1
    assert masks.to_bbox(masks.empty(10, 20)) is None


def test_malformed_rle_is_a_dataset_error():
    with pytest.raises(DatasetFormatError, match="malformed RLE"):
        masks.decode({"size": [4], "counts": "xx"})


def _small_string():
    m = np.zeros((10, 10), bool)
    m[2:5, 3:6] = True
    return masks.encode(m)["counts"]


@pytest.mark.parametrize("rle", [
    {"size": [512, 512], "counts": [100, 200]},                # runs cover 300 of 262144 pixels
    {"size": [512, 512], "counts": _small_string()},           # a 10 x 10 mask relabelled 512 x 512
    {"size": [4, 4], "counts": [10, 10]},                      # runs overrun the frame
    {"size": [4, 4], "counts": [-5, 21]},                      # a negative run
    {"size": [4.0, 4.5], "counts": [16]},                      # a fractional size
    {"size": [4, 4], "counts": []},                            # no runs at all
])
def test_rle_whose_runs_do_not_cover_the_frame_exactly_is_refused(rle):
    # pycocotools decodes into an uninitialised buffer without bounds: a short RLE once scored a
    # 200-pixel prediction as IoU 0.996 (the buffer still held the ground truth).
    with pytest.raises(DatasetFormatError, match="malformed RLE"):
        masks.decode(rle)


def _runs_or_error(fn, data):
    try:
        return fn(data)
    except ValueError as exc:
        return f"ValueError: {exc}"


def test_compressed_runs_gives_the_loops_runs_and_first_error_on_whole_and_spoilt_strings():
    # compressed_runs reads the whole string at once in NumPy; the character-by-character loop is the
    # specification (pycocotools rleFrString plus its three errors), with Python's unbounded ints
    rng = np.random.default_rng(20261208)
    long = masks._SHORT  # from this length on the NumPy path reads it: pad with whole runs ("1" = 1)
    cases = [b"", b"o" * 20 + b"0", b"O" * 9 + b"0", b"1" + b"O" * 9 + b"0", b"0" * 3 + b"\x80",  # 20 groups, negative
             b"o" * 20 + b"0" + b"1" * long, b"1" + b"O" * 9 + b"0" + b"1" * long, b"1" * long + b"0" * 3 + b"\x80"]
    for _ in range(400):
        h, w = (int(v) for v in rng.integers(1, 70, 2))
        s = masks.encode(rng.random((h, w)) < rng.random())["counts"].encode()
        spoilt = bytearray(s)
        spoilt[int(rng.integers(len(s)))] = int(rng.integers(30, 130))  # often outside '0'..'o'
        cases += [s, s[: len(s) // 2], s[:-1], bytes(spoilt),
                  bytes(rng.integers(48, 112, int(rng.integers(1, 400))).astype(np.uint8))]  # random: negative runs
    assert sum(len(c) >= long for c in cases) > 500  # both paths are met
    outcomes = set()
    for data in cases:
        want = _runs_or_error(masks._runs_loop, data)
        assert _runs_or_error(masks.compressed_runs, data) == want, data
        outcomes.add(want.split(" ")[1] if isinstance(want, str) else "runs")
    assert outcomes >= {"runs", "truncated:", "character", "run"}  # every error met, and whole strings
    assert masks.compressed_runs(b"o" * 20 + b"0") == [2 ** 100 - 1]  # past int64: the loop's answer
    assert masks.rle_problem({"size": [2, 2], "counts": b"o" * 20 + b"0"}).startswith("'counts' runs sum to 1267")


def test_intersection_union_are_the_decoded_masks_and_or_sums_and_refuse_bad_rles():
    rng = np.random.default_rng(45)
    for k in range(200):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        a, b = rng.random((h, w)) < rng.random(), rng.random((h, w)) < rng.random()
        a[:] = a if k % 7 else False  # empty masks too
        ra, rb = masks.encode(a), masks.encode(b)
        if k % 3 == 0:
            rb = {"size": [h, w], "counts": masks.compressed_runs(rb["counts"])}  # list counts
        assert masks.intersection_union(ra, rb) == (int((a & b).sum()), int((a | b).sum()))
    with pytest.raises(DatasetFormatError, match="two sizes"):
        masks.intersection_union(masks.encode(np.ones((4, 5), bool)), masks.encode(np.ones((5, 4), bool)))
    with pytest.raises(DatasetFormatError, match="malformed RLE"):
        masks.intersection_union({"size": [512, 512], "counts": _small_string()}, masks.empty(512, 512))


def test_a_well_formed_rle_still_decodes_in_both_count_forms():
    m = np.zeros((6, 5), bool)
    m[1:4, 2] = True
    rle = masks.encode(m)
    runs = masks._counts(rle["counts"]).tolist()
    assert np.array_equal(masks.decode(rle), m) and np.array_equal(masks.decode({"size": [6, 5], "counts": runs}), m)
    assert np.array_equal(masks.decode({"size": [6.0, 5.0], "counts": rle["counts"]}), m)


def test_png_masks_any_nonzero_is_foreground(tmp_path):
    m = np.zeros((5, 7), bool)
    m[2, 3] = True
    masks.write_png_mask(tmp_path / "m.png", m)
    assert np.array_equal(masks.read_png_mask(tmp_path / "m.png"), m)
    rgb = np.zeros((5, 7, 3), np.uint8)
    rgb[1, 1, 2] = 1  # a faint colour in one channel still counts
    cv2.imwrite(str(tmp_path / "c.png"), rgb)
    assert masks.read_png_mask(tmp_path / "c.png").sum() == 1
    with pytest.raises(DatasetFormatError, match="does not exist"):
        masks.read_png_mask(tmp_path / "missing.png")


def _random_masks():
    rng = np.random.default_rng(17)
    for k in range(120):
        h, w = int(rng.integers(1, 50)), int(rng.integers(1, 50))
        m = np.zeros((h, w), dtype=bool)
        if k % 4 == 0:
            m = rng.random((h, w)) < 0.5  # many runs per column
        elif k % 4 == 1:
            m[int(rng.integers(0, h)):, :] = True  # runs that continue into the next column
        elif k % 4 == 2:
            y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
            m[y:y + int(rng.integers(1, 9)), x:x + int(rng.integers(1, 9))] = True
        yield m


def test_encode_fast_gives_pycocotools_strings():
    for m in _random_masks():
        assert masks.encode_fast(m) == masks.encode(m)


def test_encode_box_from_any_box_holding_the_object_gives_pycocotools_strings():
    for m in _random_masks():
        h, w = m.shape
        ys, xs = np.nonzero(m)
        tight = (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) if ys.size else (0, 0, 0, 0)
        for y0, y1, x0, x1 in (tight, (0, h, 0, w), (min(tight[0], 1), h, 0, tight[3])):
            assert masks.encode_box(m[y0:y1, x0:x1], (y0, y1, x0, x1), (h, w)) == masks.encode(m)
        assert masks.encode_box(np.zeros((0, 0), dtype=bool), None, (h, w)) == masks.encode(np.zeros_like(m))
    with pytest.raises(ValueError, match="does not fit"):
        masks.encode_box(np.ones((2, 2), dtype=bool), (0, 3, 0, 2), (4, 4))


def test_decode_box_and_bbox_agree_with_the_full_decode():
    for m in _random_masks():
        rle = masks.encode(m)
        box = masks.bbox(rle)
        if box is None:
            assert not m.any()
            continue
        ys, xs = np.nonzero(m)
        assert box == (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1)
        h, w = m.shape
        for y0, y1, x0, x1 in (box, (0, h, 0, w), (h // 2, h, 0, max(1, w // 3))):
            if y1 > y0:
                assert np.array_equal(masks.decode_box(rle, (y0, y1, x0, x1)), m[y0:y1, x0:x1])


def test_decode_box_rejects_runs_that_do_not_cover_the_frame():
    with pytest.raises(DatasetFormatError, match="H\\*W"):
        masks.decode_box({"size": [4, 4], "counts": [1, 2]}, (0, 4, 0, 4))


@pytest.mark.parametrize("seed", range(6))
def test_coverage_equals_the_uint8_sum_and_the_union_of_the_decoded_masks(seed):
    """masks.coverage from the runs against pycocotools' decode summed as LISA sums it
    (np.sum(decode(rles), axis=2).astype(np.uint8)): random polygons (overlapping, off the image,
    degenerate), compressed and list RLEs, 256 copies of one mask (the uint8 sum wraps to 0)."""
    from pycocotools import mask as coco_mask

    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    polys = [list(rng.uniform(-5, max(h, w) + 5, 2 * int(rng.integers(3, 9)))) for _ in range(int(rng.integers(1, 12)))]
    rles = [coco_mask.frPyObjects([p], h, w)[0] for p in polys]
    rles.append(coco_mask.encode(np.asfortranarray(rng.random((h, w)) < 0.3)))
    rles.append({"size": [h, w], "counts": masks.compressed_runs(rles[0]["counts"])})  # list counts
    rles += [rles[1]] * (256 if seed % 2 else 3)
    coded = [masks._coded(r) for r in rles]
    want = np.sum(coco_mask.decode(coded), axis=2).astype(np.uint8)
    got = masks.coverage(rles, h, w)
    assert got.dtype == np.uint8 and got.shape == (h, w) and np.array_equal(got, want)
    assert np.array_equal(masks.coverage(rles, h, w, wrap=False), coco_mask.decode(coded).any(axis=2))
    assert not masks.coverage([], h, w).any()


def test_coverage_refuses_an_rle_of_another_size_or_malformed():
    with pytest.raises(DatasetFormatError, match=r"segmentation RLE is \[4, 5\] \(H, W\), the image is \[5, 4\]"):
        masks.coverage([{"size": [4, 5], "counts": [20]}], 5, 4)
    with pytest.raises(DatasetFormatError, match="malformed RLE"):
        masks.coverage([{"size": [4, 5], "counts": [3, 4]}], 4, 5)
