"""ReasonSeg loader on fixtures written in LISA's on-disk format (<split>/<name>.jpg + LabelMe <name>.json).

Expected masks are spelled out as array slices: an integer rectangle polygon [[x0, y0], [x1, y0],
[x1, y1], [x0, y1]] drawn by LISA's outline+fill covers rows y0..y1 and columns x0..x1 inclusive.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.core import masks
from rvt_bench.loaders.reasonseg import ReasonSegDataset
from rvt_bench.core.frames import read_frame
from rvt_bench.core.types import DatasetFormatError

H, W = 12, 16


def rect(x0: int, y0: int, x1: int, y1: int) -> list[list[int]]:
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def shape(label: str, points: list, image_name: str = "x.jpg") -> dict:
    """A shape with every key a real ReasonSeg annotation carries."""
    return {"label": label, "labels": [label], "shape_type": "polygon", "image_name": image_name,
            "points": points, "group_id": None, "group_ids": [None], "flags": {}}


def write_sample(split_dir: Path, name: str, shapes: list, text=("the thing",), is_sentence=False,
                 size=(H, W), encoding="utf-8", **extra) -> None:
    split_dir.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((*size, 3), 128, dtype=np.uint8)).save(split_dir / f"{name}.jpg", quality=90)
    anno = {"text": list(text), "is_sentence": is_sentence, "shapes": shapes, **extra}
    (split_dir / f"{name}.json").write_bytes(json.dumps(anno, ensure_ascii=False).encode(encoding))


def test_one_sample_per_image_sorted_by_name(tmp_path):
    for name in ("b_img", "a_img", "c_img"):
        write_sample(tmp_path / "val", name, [shape("target", rect(1, 1, 3, 3))])
    ds = ReasonSegDataset(tmp_path, split="val")
    assert [s.id for s in ds] == ["a_img", "b_img", "c_img"]
    s = ds[0]
    assert (s.dataset, s.split, s.modality, s.task) == ("reasonseg", "val", "image", "segmentation")
    assert s.frames == [str(tmp_path / "val" / "a_img.jpg")] and s.frame_ids == ["a_img"]
    assert s.annotations is None


def test_query_is_first_text_and_meta_has_is_sentence(tmp_path):
    write_sample(tmp_path / "val", "q", [shape("target", rect(1, 1, 3, 3))],
                 text=["What would you sit on?", "another phrasing"], is_sentence=True)
    s = ReasonSegDataset(tmp_path, "val")[0]
    assert s.query == "What would you sit on?"
    assert s.meta == {"name": "q", "is_sentence": True}


def test_target_mask_follows_lisa_rasterisation(tmp_path):
    write_sample(tmp_path / "val", "r", [shape("target", rect(2, 3, 9, 7))])
    s = ReasonSegDataset(tmp_path, "val")[0]
    expected = np.zeros((H, W), dtype=bool)
    expected[3:8, 2:10] = True
    np.testing.assert_array_equal(masks.decode(s.target.masks[0]), expected)
    assert s.target.ignore == [None]


def test_ignore_inside_target_wins_and_flag_is_skipped(tmp_path):
    shapes = [
        shape("target", rect(1, 1, 10, 8)),
        shape("ignore", rect(3, 3, 5, 5)),      # smaller: drawn last, so it stays 255
        shape("flag", rect(12, 0, 15, 11)),     # LISA's deprecated label: not target, not ignore
    ]
    write_sample(tmp_path / "val", "i", shapes)
    s = ReasonSegDataset(tmp_path, "val")[0]
    ignore = np.zeros((H, W), dtype=bool)
    ignore[3:6, 3:6] = True
    target = np.zeros((H, W), dtype=bool)
    target[1:9, 1:11] = True
    target &= ~ignore
    np.testing.assert_array_equal(masks.decode(s.target.ignore[0]), ignore)
    np.testing.assert_array_equal(masks.decode(s.target.masks[0]), target)


def test_two_target_shapes_are_one_mask(tmp_path):
    write_sample(tmp_path / "val", "two", [shape("target", rect(0, 0, 2, 2)), shape("target", rect(10, 5, 12, 9))])
    m = masks.decode(ReasonSegDataset(tmp_path, "val")[0].target.masks[0])
    assert m.sum() == 9 + 15 and m[0, 0] and m[9, 12]


def test_exif_rotated_image_uses_oriented_size_and_coordinates(tmp_path):
    # Oriented (displayed) image: 16 rows x 12 columns, a dark block at rows 2..5, columns 6..9,
    # annotated in those oriented coordinates; stored on disk rotated back, with EXIF orientation 6.
    oriented = np.full((16, 12, 3), 255, dtype=np.uint8)
    oriented[2:6, 6:10] = 0
    split_dir = tmp_path / "val"
    split_dir.mkdir()
    stored = np.rot90(oriented, k=1)  # orientation 6 displays it rotated 90 degrees clockwise
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(np.ascontiguousarray(stored)).save(split_dir / "rot.jpg", quality=95, exif=exif.tobytes())
    anno = {"text": ["the dark block"], "is_sentence": False, "shapes": [shape("target", rect(6, 2, 9, 5))]}
    (split_dir / "rot.json").write_text(json.dumps(anno))
    s = ReasonSegDataset(tmp_path, "val")[0]
    target = masks.decode(s.target.masks[0])
    assert target.shape == (16, 12)
    dark = read_frame(s.frames[0]).mean(axis=2) < 128
    np.testing.assert_array_equal(target, dark)


def test_cp1252_json_falls_back_like_lisa(tmp_path):
    write_sample(tmp_path / "val", "cafe", [shape("target", rect(1, 1, 3, 3))], text=["the café sign"],
                 encoding="cp1252")
    with pytest.raises(UnicodeDecodeError):
        (tmp_path / "val" / "cafe.json").read_bytes().decode("utf-8")
    assert ReasonSegDataset(tmp_path, "val")[0].query == "the café sign"


def test_demo_level_category_and_instances_sidecar(tmp_path):
    write_sample(tmp_path / "val", "d", [shape("target", rect(1, 1, 3, 3))], level=2, category="spatial")
    sidecar = {"instances": [{"id": "0", "label": "cup", "points": rect(1, 1, 3, 3)},
                             {"id": "1", "label": "spoon", "points": rect(8, 2, 9, 10)}]}
    (tmp_path / "val" / "instances").mkdir()
    (tmp_path / "val" / "instances" / "d.json").write_text(json.dumps(sidecar))
    s = ReasonSegDataset(tmp_path, "val")[0]
    assert s.meta["level"] == 2 and s.meta["category"] == "spatial"
    assert [(a.id, a.label) for a in s.annotations] == [("0", "cup"), ("1", "spoon")]
    assert [masks.area(a.masks[0]) for a in s.annotations] == [9, 18]
    assert s.annotations[1].depth is None


def test_far_nan_or_inf_polygon_points_fail_their_sample_and_the_rest_load(tmp_path):
    # the LabelMe shapes and the instances sidecar: a point beyond int32 (1e30) or non-finite is one
    # sample's data error (the sidecar's OverflowError used to end the whole load)
    write_sample(tmp_path / "val", "a", [shape("target", rect(1, 1, 3, 3))])
    write_sample(tmp_path / "val", "b", [shape("target", rect(1, 1, 3, 3))])
    write_sample(tmp_path / "val", "c", [shape("target", [[1e30, 1], [5, 1], [5, float("nan")]])])
    write_sample(tmp_path / "val", "d", [shape("target", [[float("inf"), 1], [5, 1], [5, 5]])])
    (tmp_path / "val" / "instances").mkdir()
    for name, points in (("a", [[1e30, 1], [5, 1], [5, 5]]), ("b", [[float("nan"), 1], [5, 1], [5, 5]])):
        (tmp_path / "val" / "instances" / f"{name}.json").write_text(
            json.dumps({"instances": [{"id": "0", "label": "cup", "points": points}]}))
    (tmp_path / "val" / "e.json").write_text((tmp_path / "val" / "a.json").read_text())
    Image.open(tmp_path / "val" / "a.jpg").save(tmp_path / "val" / "e.jpg")
    ds = ReasonSegDataset(tmp_path, "val")
    assert [s.id for s in ds] == ["e"]
    assert {e["sample_id"] for e in ds.errors} == {"a", "b", "c", "d"}
    assert all("points" in e["message"] for e in ds.errors)


def test_missing_root_says_what_was_expected(tmp_path):
    with pytest.raises(DatasetFormatError) as err:
        ReasonSegDataset(tmp_path / "nowhere", "val")
    message = str(err.value)
    assert str(tmp_path / "nowhere" / "val") in message
    assert "<name>.json" in message and "github.com/dvlab-research/LISA" in message


def test_split_without_annotations_is_an_error(tmp_path):
    (tmp_path / "val").mkdir()
    with pytest.raises(DatasetFormatError, match="no <name>.json"):
        ReasonSegDataset(tmp_path, "val")


def test_json_without_text_names_the_file(tmp_path):
    write_sample(tmp_path / "val", "broken", [shape("target", rect(1, 1, 3, 3))])
    path = tmp_path / "val" / "broken.json"
    anno = json.loads(path.read_text())
    del anno["text"]
    path.write_text(json.dumps(anno))
    with pytest.raises(DatasetFormatError, match=r"broken\.json.*'text'"):
        ReasonSegDataset(tmp_path, "val")


def test_json_without_image_names_the_file(tmp_path):
    write_sample(tmp_path / "val", "lonely", [shape("target", rect(1, 1, 3, 3))])
    (tmp_path / "val" / "lonely.jpg").unlink()
    with pytest.raises(DatasetFormatError, match=r"lonely\.json.*no image"):
        ReasonSegDataset(tmp_path, "val")


def test_shape_without_points_names_the_file(tmp_path):
    write_sample(tmp_path / "val", "nopts", [{"label": "target"}])
    with pytest.raises(DatasetFormatError, match=r"nopts\.json"):
        ReasonSegDataset(tmp_path, "val")


def test_unknown_constructor_keyword_is_an_error(tmp_path):
    write_sample(tmp_path / "val", "a", [shape("target", rect(1, 1, 3, 3))])
    with pytest.raises(TypeError):
        ReasonSegDataset(tmp_path, "val", frames_per_clip=8)


def write_lengths(split_dir: Path) -> None:
    write_sample(split_dir, "long_q", [shape("target", rect(1, 1, 3, 3))], text=["What holds the soup?"], is_sentence=True)
    write_sample(split_dir, "short_q", [shape("target", rect(1, 1, 3, 3))], text=["the soup bowl"], is_sentence=False)


@pytest.mark.parametrize("query_length, ids", [("all", ["long_q", "short_q"]), ("short", ["short_q"]), ("long", ["long_q"])])
def test_query_length_keeps_samples_by_is_sentence(tmp_path, query_length, ids):
    write_lengths(tmp_path / "val")
    assert [s.id for s in ReasonSegDataset(tmp_path, "val", query_length=query_length)] == ids


def test_unknown_query_length_is_rejected(tmp_path):
    write_lengths(tmp_path / "val")
    with pytest.raises(ValueError, match="short"):
        ReasonSegDataset(tmp_path, "val", query_length="medium")


def test_all_texts_gives_one_sample_per_rephrasing_with_the_same_target(tmp_path):
    write_sample(tmp_path / "val", "q", [shape("target", rect(1, 1, 3, 3))], text=["first", "second", "third"])
    write_sample(tmp_path / "val", "r", [shape("target", rect(2, 2, 4, 4))], text=["only"])
    ds = ReasonSegDataset(tmp_path, "val", all_texts=True)
    assert [(s.id, s.query, s.meta["text_index"]) for s in ds] == [
        ("q#0", "first", 0), ("q#1", "second", 1), ("q#2", "third", 2), ("r#0", "only", 0)]
    assert ds[0].target.masks == ds[2].target.masks and ds[0].frames == ds[2].frames
    assert all(s.meta["name"] == "q" for s in ds[:3])  # precomputed's reasonseg layout: one PNG per image


def test_json_without_polygons_gives_an_empty_target_of_image_size(tmp_path):
    write_sample(tmp_path / "test", "nothing_here", [], size=(9, 14))
    s = ReasonSegDataset(tmp_path, "test")[0]
    assert s.target.masks[0]["size"] == [9, 14]
    assert masks.area(s.target.masks[0]) == 0 and s.target.ignore == [None]


def test_shapes_not_a_list_names_the_file(tmp_path):
    write_sample(tmp_path / "val", "odd", {"label": "target"})
    with pytest.raises(DatasetFormatError, match=r"odd\.json.*'shapes' must be a list"):
        ReasonSegDataset(tmp_path, "val")


def test_bad_images_and_labelme_files_are_data_errors_and_loading_goes_on(tmp_path, caplog):
    split = tmp_path / "val"
    for name in ("a_good", "b_textimage", "c_noshapes", "d_pointsnotlist", "e_invalidjson", "f_good"):
        write_sample(split, name, [shape("target", rect(1, 1, 3, 3))])
    (split / "b_textimage.jpg").write_text("a text file named .jpg")
    anno = json.loads((split / "c_noshapes.json").read_text())
    del anno["shapes"]
    (split / "c_noshapes.json").write_text(json.dumps(anno))
    write_sample(split, "d_pointsnotlist", [shape("target", 7)])
    (split / "e_invalidjson.json").write_text('{"text": ["oops"], ')
    with caplog.at_level("WARNING", logger="rvt_bench.loaders.base"):
        ds = ReasonSegDataset(tmp_path, "val")
    assert [s.id for s in ds] == ["a_good", "f_good"]
    assert [(e["sample_id"], e["kind"]) for e in ds.errors] == [
        ("b_textimage", "data"), ("c_noshapes", "data"), ("d_pointsnotlist", "data"), ("e_invalidjson", "data")]
    b, c, d, e = (err["message"] for err in ds.errors)
    assert str(split / "b_textimage.jpg") in b and "not a readable image" in b
    assert "c_noshapes.json" in c and "'shapes'" in c
    assert "d_pointsnotlist.json" in d and "points" in d
    assert "e_invalidjson.json is not valid JSON" in e
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 4 and all("left out" in w for w in warned)


def test_every_image_failing_is_a_dataset_error_quoting_the_reasons(tmp_path):
    for name in ("x", "y"):
        write_sample(tmp_path / "val", name, [shape("target", rect(1, 1, 3, 3))])
        (tmp_path / "val" / f"{name}.jpg").write_bytes(b"")
    with pytest.raises(DatasetFormatError, match=r"every one of the 2 samples.*\n  x: .*x\.jpg.*\n  y: "):
        ReasonSegDataset(tmp_path, "val")


def test_unknown_split_lists_the_splits_present(tmp_path):
    write_sample(tmp_path / "train", "a", [shape("target", rect(1, 1, 3, 3))])
    write_sample(tmp_path / "val", "b", [shape("target", rect(1, 1, 3, 3))])
    (tmp_path / "not_a_split").mkdir()
    with pytest.raises(DatasetFormatError, match=r"no split 'test'.*splits present: \['train', 'val'\]"):
        ReasonSegDataset(tmp_path, "test")


def test_a_clean_split_has_no_errors(tmp_path):
    write_sample(tmp_path / "val", "a", [shape("target", rect(1, 1, 3, 3))])
    assert ReasonSegDataset(tmp_path, "val").errors == []


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from tests.contract_samples import image_samples

    return image_samples(rng)


def test_an_instances_sidecar_that_is_a_fifo_fails_its_sample(tmp_path):
    # it was taken as absent (is_file); a non-regular file at its name is refused (issue 41 kit)
    write_sample(tmp_path / "val", "d", [shape("target", rect(1, 1, 3, 3))])
    write_sample(tmp_path / "val", "e", [shape("target", rect(1, 1, 3, 3))])
    (tmp_path / "val" / "instances").mkdir()
    os.mkfifo(tmp_path / "val" / "instances" / "d.json")
    ds = ReasonSegDataset(tmp_path, "val")
    assert [s.id for s in ds] == ["e"]
    assert [e["sample_id"] for e in ds.errors] == ["d"] and "not a regular file (a FIFO)" in ds.errors[0]["message"]
