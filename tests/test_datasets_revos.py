"""ReVOS loader on a fixture in VISA's on-disk format (see bench/loaders/revos.py for the layout).

Ground truth as VISA tools/eval_revos.py builds it: for frame i, the sum (= union) of
mask_dict[anno_id][i] over the expression's anno_ids, a null entry meaning no mask.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.core import masks
from rvt_bench.loaders.revos import ReVOSDataset
from rvt_bench.core.types import DatasetFormatError

H, W = 6, 8
NESTED = "UVO/all/vid1"  # ReVOS nests some videos (UVO, BURST...) under sub-directories
FRAMES = ["00010", "00000", "00005"]  # deliberately unsorted: the meta's order is the temporal order


def box(y0, y1, x0, x1) -> np.ndarray:
    m = np.zeros((H, W), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


# anno 5: frames 0 and 1; anno 7: frames 1 and 2 (overlapping anno 5 in frame 1); anno 9: vidB
ANNO = {
    "5": [box(0, 2, 0, 3), box(1, 3, 1, 4), None],
    "7": [None, box(2, 5, 3, 6), box(4, 6, 6, 8)],
    "9": [box(0, 6, 0, 1), box(0, 6, 7, 8)],
}


def write_revos(root: Path, *, sidecar: bool = True) -> None:
    videos = {
        NESTED: {"vid_id": 0, "height": H, "width": W, "frames": FRAMES, "expressions": {
            "0": {"exp": "the ball", "obj_id": [0], "anno_id": [5], "type_id": 0},
            "1": {"exp": "the things that touch", "obj_id": [0, 1], "anno_id": [5, 7], "type_id": 1,
                  "level": 2, "category": "spatial"},
            "2": {"exp": "the unicorn", "obj_id": [], "anno_id": [], "type_id": 2},
        }},
        "vidB": {"vid_id": 1, "height": H, "width": W, "frames": ["00000", "00001"], "expressions": {
            "0": {"exp": "the pole", "obj_id": [0], "anno_id": [9], "type_id": 0},
        }},
    }
    for video, info in videos.items():
        d = root / "JPEGImages" / video
        d.mkdir(parents=True)
        for f in info["frames"]:
            Image.fromarray(np.zeros((H, W, 3), dtype=np.uint8)).save(d / f"{f}.jpg")
    (root / "meta_expressions_valid_.json").write_text(json.dumps({"videos": videos}))
    mask_dict = {a: [None if m is None else masks.encode(m) for m in track] for a, track in ANNO.items()}
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    fg = {NESTED: {"masks_rle": [masks.encode(box(0, 1, 0, 1))] * 3, "foreground_ratio": [1 / 48] * 3}}
    (root / "mask_dict_foreground.json").write_text(json.dumps(fg))
    if sidecar:
        side = {NESTED: [{"anno_id": 5, "label": "ball", "depth": [1.5, 2.0, None]},
                         {"anno_id": 7, "label": "hand", "depth": None},
                         {"anno_id": 11, "label": "unused chair", "depth": None}]}
        (root / "instances.json").write_text(json.dumps(side))
        mask_dict["11"] = [None, None, None]
        (root / "mask_dict.json").write_text(json.dumps(mask_dict))


@pytest.fixture
def root(tmp_path) -> Path:
    write_revos(tmp_path)
    return tmp_path


def decoded(sample) -> list:
    return [None if m is None else masks.decode(m) for m in sample.target.masks]


def test_one_sample_per_expression_in_meta_order(root):
    ds = ReVOSDataset(root, split="valid")
    assert [s.id for s in ds] == [f"{NESTED}/0", f"{NESTED}/1", f"{NESTED}/2", "vidB/0"]
    s = ds[0]
    assert (s.dataset, s.split, s.modality, s.task, s.query) == ("revos", "valid", "video", "segmentation", "the ball")


def test_frames_keep_the_meta_order_and_nested_path(root):
    s = ReVOSDataset(root)[0]
    assert s.frame_ids == FRAMES
    assert s.frames == [str(root / "JPEGImages" / "UVO" / "all" / "vid1" / f"{f}.jpg") for f in FRAMES]
    assert all(Path(f).is_file() for f in s.frames)


def test_single_anno_target_with_null_frame(root):
    got = decoded(ReVOSDataset(root)[0])
    np.testing.assert_array_equal(got[0], ANNO["5"][0])
    np.testing.assert_array_equal(got[1], ANNO["5"][1])
    assert got[2] is None


def test_multi_anno_target_is_the_per_frame_union(root):
    got = decoded(ReVOSDataset(root)[1])
    np.testing.assert_array_equal(got[0], ANNO["5"][0])                    # anno 7 null here
    np.testing.assert_array_equal(got[1], ANNO["5"][1] | ANNO["7"][1])
    np.testing.assert_array_equal(got[2], ANNO["7"][2])                    # anno 5 null here
    assert int(got[1].sum()) == 6 + 9 - 1                                  # the boxes share pixel (2, 3)


def test_no_target_expression_has_no_mask_in_any_frame(root):
    s = ReVOSDataset(root)[2]
    assert s.meta["type_id"] == 2 and s.meta["type"] == "no_target"
    assert s.target.masks == [None, None, None]


def test_meta_carries_ids_and_extra_expression_keys(root):
    s = ReVOSDataset(root)[1]
    assert s.meta == {"type_id": 1, "type": "reasoning", "video": NESTED, "exp_id": "1", "obj_id": [0, 1],
                      "anno_id": [5, 7], "level": 2, "category": "spatial"}


def test_annotations_cover_the_video_and_are_shared(root):
    ds = ReVOSDataset(root)
    first, second, third, other = ds
    assert first.annotations is second.annotations is third.annotations
    assert [(a.id, a.label) for a in first.annotations] == [("5", "ball"), ("7", "hand"), ("11", "unused chair")]
    assert first.annotations[0].depth == [1.5, 2.0, None]
    assert first.annotations[1].depth is None
    np.testing.assert_array_equal(masks.decode(first.annotations[1].masks[1]), ANNO["7"][1])
    assert first.annotations[1].masks[0] is None
    assert [(a.id, a.label) for a in other.annotations] == [("9", "")]   # no sidecar entry: empty label


def test_target_carries_the_video_foreground_when_the_file_has_it(root):
    ds = ReVOSDataset(root)
    assert ds[0].target.foreground is ds[1].target.foreground  # one list per video
    assert [masks.area(r) for r in ds[0].target.foreground] == [1, 1, 1]
    assert ds[3].target.foreground is None  # vidB has no entry in mask_dict_foreground.json


def test_foreground_required_names_the_missing_video(root):
    with pytest.raises(DatasetFormatError, match="vidB"):
        ReVOSDataset(root, foreground=True)


def test_foreground_off_or_absent_leaves_it_none(root):
    assert ReVOSDataset(root, foreground=False)[0].target.foreground is None
    (root / "mask_dict_foreground.json").unlink()
    assert ReVOSDataset(root)[0].target.foreground is None
    with pytest.raises(DatasetFormatError, match="mask_dict_foreground.json"):
        ReVOSDataset(root, foreground=True)


def test_foreground_reads_visa_mask_dict_foreground(root):
    fg = ReVOSDataset(root).foreground(NESTED)
    assert len(fg) == 3 and masks.area(fg[0]) == 1
    with pytest.raises(DatasetFormatError, match="vidB"):
        ReVOSDataset(root).foreground("vidB")


def test_missing_root_says_what_was_expected(tmp_path):
    with pytest.raises(DatasetFormatError) as err:
        ReVOSDataset(tmp_path / "ReVOS")
    message = str(err.value)
    assert str(tmp_path / "ReVOS") in message
    assert "JPEGImages/<video>/<frame>.jpg" in message and "mask_dict.json" in message
    assert "cilinyan" in message


def test_missing_meta_for_split_names_the_file(root):
    with pytest.raises(DatasetFormatError, match="meta_expressions_train_.json"):
        ReVOSDataset(root, split="train")


def test_missing_mask_dict_names_the_file(root):
    (root / "mask_dict.json").unlink()
    with pytest.raises(DatasetFormatError, match="mask_dict.json"):
        ReVOSDataset(root)


def shorten_anno(root: Path, anno_id: str, length: int) -> None:
    mask_dict = json.loads((root / "mask_dict.json").read_text())
    mask_dict[anno_id] = mask_dict[anno_id][:length]
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))


def test_anno_track_of_wrong_length_is_an_error_on_request(root):
    shorten_anno(root, "9", 1)
    with pytest.raises(DatasetFormatError, match=r"anno_id 9 \(video 'vidB'\).*2 per-frame.*got 1"):
        ReVOSDataset(root, on_length_mismatch="error")


def test_anno_track_of_wrong_length_warns_and_aligns_by_index(root, caplog):
    shorten_anno(root, "5", 2)  # video NESTED has 3 frames; anno 5 now covers the first two
    with caplog.at_level("WARNING", logger="rvt_bench.loaders.revos"):
        ds = ReVOSDataset(root)  # default: warn
    warned = [r.getMessage() for r in caplog.records if "anno_id 5" in r.getMessage()]
    assert len(warned) == 1 and NESTED in warned[0] and "got 2" in warned[0]
    got = decoded(ds[0])
    np.testing.assert_array_equal(got[0], ANNO["5"][0])
    np.testing.assert_array_equal(got[1], ANNO["5"][1])
    assert got[2] is None  # padded: no object in the frame the list does not reach


def test_long_anno_track_is_truncated_under_warn(root):
    mask_dict = json.loads((root / "mask_dict.json").read_text())
    mask_dict["9"] = mask_dict["9"] + [masks.encode(box(0, 1, 0, 1))]
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    s = ReVOSDataset(root)[3]
    assert s.id == "vidB/0" and len(s.target.masks) == 2
    np.testing.assert_array_equal(masks.decode(s.target.masks[1]), ANNO["9"][1])


def test_skip_leaves_out_the_expressions_using_the_bad_track(root):
    shorten_anno(root, "7", 1)
    ds = ReVOSDataset(root, on_length_mismatch="skip")
    assert [s.id for s in ds] == [f"{NESTED}/0", f"{NESTED}/2", "vidB/0"]
    assert ds.skipped == [f"{NESTED}/1"]
    assert [a.id for a in ds[0].annotations] == ["5", "11"]


def test_unknown_on_length_mismatch_is_rejected(root):
    with pytest.raises(ValueError, match="warn"):
        ReVOSDataset(root, on_length_mismatch="ignore")


def test_anno_id_missing_from_mask_dict_is_a_data_error_of_its_expression(root):
    mask_dict = json.loads((root / "mask_dict.json").read_text())
    del mask_dict["7"]
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    ds = ReVOSDataset(root)
    assert [s.id for s in ds] == [f"{NESTED}/0", f"{NESTED}/2", "vidB/0"]
    assert [(e["sample_id"], e["kind"]) for e in ds.errors] == [(f"{NESTED}/1", "data")]
    assert f"anno_id 7 (expression {NESTED}/1) is missing from {root / 'mask_dict.json'}" in ds.errors[0]["message"]
    assert [a.id for a in ds[0].annotations] == ["5", "11"]  # the object without masks is left out


def test_missing_video_directory_is_an_error(root):
    for f in FRAMES:
        (root / "JPEGImages" / NESTED / f"{f}.jpg").unlink()
    (root / "JPEGImages" / NESTED).rmdir()
    ds = ReVOSDataset(root)
    assert [s.id for s in ds] == ["vidB/0"]
    assert [e["sample_id"] for e in ds.errors] == [f"{NESTED}/0", f"{NESTED}/1", f"{NESTED}/2"]
    assert all("frame directory" in e["message"] and NESTED in e["message"] for e in ds.errors)


def test_expression_without_type_id_names_it(root):
    meta = json.loads((root / "meta_expressions_valid_.json").read_text())
    del meta["videos"]["vidB"]["expressions"]["0"]["type_id"]
    (root / "meta_expressions_valid_.json").write_text(json.dumps(meta))
    ds = ReVOSDataset(root)
    assert [e["sample_id"] for e in ds.errors] == ["vidB/0"] and len(ds) == 3
    assert "vidB" in ds.errors[0]["message"] and "expression '0'" in ds.errors[0]["message"]
    assert "type_id" in ds.errors[0]["message"]


def test_without_sidecar_labels_are_empty(tmp_path):
    write_revos(tmp_path, sidecar=False)
    s = ReVOSDataset(tmp_path)[0]
    assert [(a.id, a.label, a.depth) for a in s.annotations] == [("5", "", None), ("7", "", None)]


def set_anno(root: Path, anno_id: str, track: list) -> None:
    mask_dict = json.loads((root / "mask_dict.json").read_text())
    mask_dict[anno_id] = track
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))


def test_corrupt_and_wrongly_sized_rles_are_all_reported_at_load(root):
    good = masks.encode(box(0, 2, 0, 3))
    set_anno(root, "5", [good, {"size": [H, W], "counts": "!!garbage@@"}, masks.encode(np.ones((H + 1, W), bool))])
    set_anno(root, "9", [{"size": [H, W], "counts": 12}, {"size": [H, W], "counts": [1, 2]}])
    ds = ReVOSDataset(root)
    assert [s.id for s in ds] == [f"{NESTED}/2"]  # the no-target expression uses no anno track
    by_id = {e["sample_id"]: e["message"] for e in ds.errors}
    assert sorted(by_id) == [f"{NESTED}/0", f"{NESTED}/1", "vidB/0"]
    bad5 = by_id[f"{NESTED}/0"]
    assert str(root / "mask_dict.json") in bad5 and "anno_id 5" in bad5 and "2 bad per-frame RLE(s)" in bad5
    assert "frame 1 (00000)" in bad5 and "corrupt" in bad5
    assert f"frame 2 (00005): 'size' [{H + 1}, {W}] differs from the frame size [H, W] = [{H}, {W}]" in bad5
    assert "frame 0" not in bad5
    bad9 = by_id["vidB/0"]
    assert "frame 0 (00000): 'counts' must be a str, bytes or list, got int" in bad9
    assert f"frame 1 (00001): 'counts' runs sum to 3 pixels, expected H*W = {H * W}" in bad9


def test_a_long_list_of_bad_frames_is_capped(tmp_path):
    write_revos(tmp_path)
    meta = json.loads((tmp_path / "meta_expressions_valid_.json").read_text())
    frames = [f"{i:05d}" for i in range(25)]
    meta["videos"]["vidB"]["frames"] = frames
    for f in frames:
        Image.fromarray(np.zeros((H, W, 3), dtype=np.uint8)).save(tmp_path / "JPEGImages" / "vidB" / f"{f}.jpg")
    (tmp_path / "meta_expressions_valid_.json").write_text(json.dumps(meta))
    set_anno(tmp_path, "9", [masks.encode(np.ones((2, 2), bool))] * 25)
    message = ReVOSDataset(tmp_path).errors[0]["message"]
    assert "25 bad per-frame RLE(s)" in message and "frame 19 (00019)" in message
    assert "frame 20 (00020)" not in message and message.endswith("... and 5 more")


def test_valid_uncompressed_rles_pass_validation_and_decode(root):
    # frame 0 all background; frame 1 column-major runs: 6 background, 6 foreground = column 1
    set_anno(root, "9", [{"size": [H, W], "counts": [H * W]}, {"size": [H, W], "counts": [H, H, H * W - 2 * H]}])
    ds = ReVOSDataset(root)
    assert ds.errors == [] and len(ds) == 4
    got = decoded(ds[3])
    assert got[0] is None or not got[0].any()
    np.testing.assert_array_equal(got[1], box(0, H, 1, 2))


def test_every_expression_failing_is_a_dataset_error(root):
    mask_dict = json.loads((root / "mask_dict.json").read_text())
    (root / "mask_dict.json").write_text(json.dumps({a: "oops" for a in mask_dict}))
    meta = json.loads((root / "meta_expressions_valid_.json").read_text())
    del meta["videos"][NESTED]["expressions"]["2"]
    (root / "meta_expressions_valid_.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetFormatError, match=r"every one of the 3 samples.*\n.*anno_id 5.*got str"):
        ReVOSDataset(root)


def test_unknown_split_lists_the_splits_present(root):
    with pytest.raises(DatasetFormatError, match=r"no split 'train'.*splits present: \['valid'\]"):
        ReVOSDataset(root, split="train")


def test_unreadable_first_frame_fails_the_video_expressions(root):
    (root / "JPEGImages" / "vidB" / "00000.jpg").write_text("not a jpeg")
    ds = ReVOSDataset(root)
    assert [e["sample_id"] for e in ds.errors] == ["vidB/0"] and "00000.jpg" in ds.errors[0]["message"]
    assert len(ds) == 3


def contract_samples(rng, node):
    """Synthetic samples of this benchmark's format for tests/test_protocol_contract.py."""
    from tests.contract_samples import revos_samples

    return revos_samples(rng)


@pytest.mark.parametrize("spoil", ["fifo", "truncated", "a list"])
def test_an_unreadable_foreground_file_stops_the_dataset_in_one_line(root, spoil):
    # it was taken as "no entry for the video": R silently left unscored, the file's fault unsaid;
    # a FIFO at its name was taken as no file at all (issue 41, the hostile-dataset kit)
    path = root / "mask_dict_foreground.json"
    if spoil == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif spoil == "truncated":
        path.write_text(path.read_text()[:40])
    else:
        path.write_text("[]")
    with pytest.raises(DatasetFormatError) as info:
        ReVOSDataset(root)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
