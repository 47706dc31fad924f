"""Corrupt inputs, one at a time, through a whole run (rvt_bench.harness.runner.run with the real loaders and
protocols): every loader and the precomputed adapter, each fixture written in its dataset's real
on-disk format with three or four good samples and exactly one corrupted.

The rule under test (docs/failures.md): a sample whose data is bad, whether its loader finds it
or the run finds it before prediction (a frame that does not decode, frames of different sizes),
is a data error: listed in metrics.json `data_error_samples` with a message naming the file and
the field, counted in `data_errors`, and not in `n` nor in `failures`. Unusual but valid inputs
(16-bit, CMYK, RGBA, grayscale, EXIF-rotated, non-ASCII names, a BOM, cp1252) load and score.
A prediction that is missing, truncated or of the wrong size (precomputed) fails that sample only.
"""
from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from omegaconf import OmegaConf
from PIL import Image

from rvt_bench.adapters.base import Adapter
from rvt_bench.core import masks
from rvt_bench.core.frames import read_frame
from rvt_bench.harness.runner import run
from rvt_bench.core.types import Prediction, Sample

H, W = 12, 16


# --- the model: reads every frame, answers the ground truth ---------------------------------------


class ReadingAdapter(Adapter):
    """Reads every frame (rvt_bench.core.frames.read_frame, as real adapters do) and answers the sample's
    ground truth, so a good sample scores perfectly and only bad data can fail."""

    name = "reader"

    def __init__(self, name: str = "reader") -> None:
        self.name = name

    def predict(self, sample: Sample) -> Prediction:
        for path in sample.frames:
            read_frame(path)
        t = sample.target
        return Prediction(sample.id, task=sample.task, masks=list(t.masks) if t.masks else None,
                          boxes=t.boxes, text=(t.answers or [None])[0])

    def fingerprint(self) -> dict:
        return {"reader": 1}


def dataset_yaml(name: str) -> dict:
    """conf/dataset/<name>.yaml's dataset node without its protocol (a canonical benchmark is that file alone)."""
    node = OmegaConf.to_container(OmegaConf.load(Path(__file__).resolve().parent.parent / "conf" / "dataset" / f"{name}.yaml"))
    node.pop("protocol")
    return node


def run_on(tmp: Path, dataset: dict, protocol: str, model: dict | None = None) -> dict:
    cfg = OmegaConf.create({
        "dataset": {**dataset, "protocol": {"_target_": protocol}},
        "model": model or {"name": "reader", "_target_": "tests.test_corrupt_inputs.ReadingAdapter"},
        "run": {"root": str(tmp / "runs"), "name": None, "shard": 0, "num_shards": 1, "merge": False, "limit": None,
                "fail_fast": False, "batch_size": 1, "verify_frames": True, "score_workers": 1},
        "leaderboard": {"dir": str(tmp / "boards"), "publish": False},
    })
    result = run(cfg)
    assert result.metrics is not None  # the run completed and scored
    return result.metrics


def check(m: dict, total: int, bad: str | None, *needles: str, n: int | None = None) -> None:
    """`bad` (a sample id, or None for a valid unusual input) is the one data error, with every
    needle in its message; n = total - 1 (or `n`); no other failure."""
    listed = [e["sample_id"] for e in m["data_error_samples"]]
    if bad is None:
        assert listed == [] and m["data_errors"] == 0
        assert m["n"] == total and m["failures"] == 0, m["failed_samples"]
        return
    assert listed == [bad], m["data_error_samples"]
    assert m["data_errors"] == 1 and m["failures"] == 0, m["failed_samples"]
    assert m["n"] == (total - 1 if n is None else n)
    message = m["data_error_samples"][0]["message"]
    for needle in needles:
        assert needle in message, message
    assert m["data_error_samples"][0]["kind"] == "data"


# --- image files -----------------------------------------------------------------------------------


def save_image(path: Path, size=(H, W), mode="RGB", fmt=None, **kw) -> None:
    h, w = size
    arr = (np.arange(h * w * 3, dtype=np.uint16).reshape(h, w, 3) * 7 % 251).astype(np.uint8)
    im = Image.fromarray(arr, "RGB")
    if mode == "I;16":
        im = Image.fromarray(arr[..., 0].astype(np.uint16) * 257)  # uint16 -> mode I;16
    elif mode != "RGB":
        im = im.convert(mode)
    im.save(path, format=fmt, **kw)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def png_bomb(path: Path, width: int = 13500, height: int = 13500) -> None:
    """A PNG whose header declares 13500 x 13500 pixels (PIL's decompression-bomb limit is
    2 * Image.MAX_IMAGE_PIXELS = 178,956,970), with no pixel data."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def exif_rotated_jpeg(path: Path) -> None:
    """A W x H-stored JPEG with EXIF Orientation 6 (rotate 90): oriented, it is H' x W' = W x H."""
    im = Image.new("RGB", (H, W), (10, 200, 30))  # stored W=H, H=W: oriented back to (H, W)
    exif = Image.Exif()
    exif[0x0112] = 6
    im.save(path, exif=exif.tobytes())


def symlink_loop(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.symlink(path.name, path)


# --- RLE corruptions ---------------------------------------------------------------------------------


def rle(mask: np.ndarray) -> dict:
    return masks.encode(mask)


def box_mask(y0=2, y1=6, x0=3, x1=9, size=(H, W)) -> np.ndarray:
    m = np.zeros(size, dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def overrun(r: dict) -> dict:
    """The same counts with a last run so long that the runs sum past H*W (pycocotools' area
    stays plausible: the extra run is background)."""
    runs = masks.compressed_runs(r["counts"])
    h, w = r["size"]
    runs = runs + [0, 5] if len(runs) % 2 == 0 else runs + [5]
    return {"size": r["size"], "counts": _encode_runs(runs)}


def _encode_runs(runs: list[int]) -> str:
    """pycocotools rleToString, for building corrupt strings: runs from the fourth on as deltas."""
    out = []
    for i, x in enumerate(runs):
        x = x - runs[i - 2] if i > 2 else x
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = (x != -1) if c & 0x10 else (x != 0)
            if more:
                c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)


def truncated_rle(r: dict) -> dict:
    return {"size": r["size"], "counts": r["counts"][: max(1, len(r["counts"]) // 2)]}


def test_the_rle_helpers_build_what_pycocotools_writes():
    r = rle(box_mask())
    assert _encode_runs(masks.compressed_runs(r["counts"])) == r["counts"]
    assert sum(masks.compressed_runs(r["counts"])) == H * W


# === ReasonSeg (LISA: <split>/<name>.jpg + LabelMe <name>.json) ======================================

RS_NAMES = ["a", "b", "c"]


def rs_json(text=("the thing",), is_sentence=False, shapes=None) -> dict:
    shapes = [{"label": "target", "points": [[3, 2], [9, 2], [9, 6], [3, 6]], "shape_type": "polygon"}] if shapes is None else shapes
    return {"text": list(text) if isinstance(text, (list, tuple)) else text, "is_sentence": is_sentence, "shapes": shapes}


def write_reasonseg(root: Path) -> Path:
    split = root / "val"
    split.mkdir(parents=True)
    for name in RS_NAMES:
        save_image(split / f"{name}.jpg")
        (split / f"{name}.json").write_text(json.dumps(rs_json()))
    return root


def rs_set(field: str, value) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "val" / "b.json"
        record = json.loads(path.read_text())
        record[field] = value
        path.write_text(json.dumps(record))
    return corrupt


def rs_image(action: Callable[[Path], None], suffix: str = ".jpg") -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        (root / "val" / "b.jpg").unlink()
        action(root / "val" / f"b{suffix}")
    return corrupt


def rs_rename(new_stem: str) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        for suffix in (".jpg", ".json"):
            (root / "val" / f"b{suffix}").rename(root / "val" / f"{new_stem}{suffix}")
    return corrupt


REASONSEG_CASES = {
    # images
    "truncated jpeg": (lambda r: truncate(r / "val" / "b.jpg"), "b", ["b.jpg"]),
    "zero-byte jpeg": (lambda r: (r / "val" / "b.jpg").write_bytes(b""), "b", ["b.jpg"]),
    "text file named .jpg": (lambda r: (r / "val" / "b.jpg").write_text("not an image"), "b", ["b.jpg"]),
    "png bytes named .jpg": (rs_image(lambda p: save_image(p, fmt="PNG")), None, []),
    "16-bit png": (rs_image(lambda p: save_image(p, mode="I;16"), ".png"), None, []),
    "cmyk jpeg": (rs_image(lambda p: save_image(p, mode="CMYK")), None, []),
    "rgba png": (rs_image(lambda p: save_image(p, mode="RGBA"), ".png"), None, []),
    "grayscale jpeg": (rs_image(lambda p: save_image(p, mode="L")), None, []),
    "palette png": (rs_image(lambda p: save_image(p, mode="P"), ".png"), None, []),
    "decompression bomb": (rs_image(png_bomb, ".png"), "b", ["b.png", "exceeds"]),
    "exif-rotated jpeg": (rs_image(exif_rotated_jpeg), None, []),
    "non-ascii file name": (rs_rename("bé_日本"), None, []),
    "image symlink loop": (rs_image(symlink_loop), "b", ["b.json", "no image"]),
    "image missing": (lambda r: (r / "val" / "b.jpg").unlink(), "b", ["b.json", "no image"]),
    # annotation fields
    "text is a number": (rs_set("text", 5), "b", ["b.json", "'text'"]),
    "text is an empty list": (rs_set("text", []), "b", ["b.json", "'text'"]),
    "text holds a number": (rs_set("text", ["ok", 3]), "b", ["b.json", "'text'"]),
    "is_sentence is a string": (rs_set("is_sentence", "no"), "b", ["b.json", "'is_sentence'"]),
    "shapes is an object": (rs_set("shapes", {"a": 1}), "b", ["b.json", "'shapes'"]),
    "shapes key missing": (lambda r: _drop_key(r / "val" / "b.json", "shapes"), "b", ["b.json", "shapes"]),
    "shape label is a number": (rs_set("shapes", [{"label": 7, "points": [[1, 1], [5, 1], [5, 5]]}]), "b", ["b.json", "'label'"]),
    "shape points hold NaN": (rs_set("shapes", [{"label": "t", "points": [[float("nan"), 1], [5, 1], [5, 5]]}]), "b", ["b.json", "points"]),
    "shape points are strings": (rs_set("shapes", [{"label": "t", "points": [["a", "b"]]}]), "b", ["b.json", "points"]),
    "shape without points": (rs_set("shapes", [{"label": "t", "points": []}]), "b", ["b.json", "points"]),
    "polygon with 2 points (LISA draws a line)": (rs_set("shapes", [{"label": "t", "points": [[1, 1], [8, 5]]}]), None, []),
    "shape is a string": (rs_set("shapes", ["polygon"]), "b", ["b.json", "shape 0"]),
    "invalid json": (lambda r: (r / "val" / "b.json").write_text('{"text": ["x"], '), "b", ["b.json", "not valid JSON"]),
    "utf-8 BOM json": (lambda r: (r / "val" / "b.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(rs_json()).encode()), None, []),
    "cp1252 json": (lambda r: (r / "val" / "b.json").write_bytes(json.dumps(rs_json(["caf\u00e9 table"]), ensure_ascii=False).encode("cp1252")), None, []),
    "json is a list": (lambda r: (r / "val" / "b.json").write_text("[1, 2]"), "b", ["b.json", "keys"]),
}


def _drop_key(path: Path, key: str) -> None:
    record = json.loads(path.read_text())
    record.pop(key, None)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("case", sorted(REASONSEG_CASES))
def test_reasonseg(tmp_path, case):
    corrupt, bad, needles = REASONSEG_CASES[case]
    root = write_reasonseg(tmp_path / "ReasonSeg")
    corrupt(root)
    m = run_on(tmp_path, {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                          "root": str(root), "split": "val"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol")
    check(m, len(RS_NAMES), bad, *needles)
    if bad is None:
        assert m["metrics"]["gIoU"] == pytest.approx(1.0, abs=1e-4)  # LISA's I / (U + 1e-5)


def test_a_data_error_is_logged_once(tmp_path, caplog):
    """The loader logs the sample it leaves out; the harness does not log it again."""
    root = write_reasonseg(tmp_path / "ReasonSeg")
    REASONSEG_CASES["invalid json"][0](root)
    with caplog.at_level("WARNING"):
        run_on(tmp_path, {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                          "root": str(root), "split": "val"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol")
    said = [r.getMessage() for r in caplog.records if "b.json is not valid JSON" in r.getMessage()]
    assert len(said) == 1, said


# === ReVOS (VISA: JPEGImages/, meta_expressions_valid_.json, mask_dict.json) ===========================

REVOS_FRAMES = ["00000", "00001", "00002"]


def write_revos(root: Path) -> Path:
    videos = {
        "vidA": {"vid_id": 0, "height": H, "width": W, "frames": REVOS_FRAMES, "expressions": {
            "0": {"exp": "the ball", "obj_id": [0], "anno_id": [1], "type_id": 0},
            "1": {"exp": "what rolls", "obj_id": [1], "anno_id": [2], "type_id": 1},
        }},
        "vidB": {"vid_id": 1, "height": H, "width": W, "frames": REVOS_FRAMES, "expressions": {
            "0": {"exp": "the pole", "obj_id": [0], "anno_id": [3], "type_id": 0},
        }},
        "vidC": {"vid_id": 2, "height": H, "width": W, "frames": REVOS_FRAMES, "expressions": {
            "0": {"exp": "the cup", "obj_id": [0], "anno_id": [4], "type_id": 1},
        }},
    }
    for video in videos:
        d = root / "JPEGImages" / video
        d.mkdir(parents=True)
        for f in REVOS_FRAMES:
            save_image(d / f"{f}.jpg")
    (root / "meta_expressions_valid_.json").write_text(json.dumps({"videos": videos}))
    mask_dict = {str(a): [rle(box_mask(a, a + 3, a, a + 4)), None, rle(box_mask(0, 2, 0, 2))] for a in (1, 2, 3, 4)}
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    return root


def revos_exp(video: str, exp_id: str, **fields) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "meta_expressions_valid_.json"
        meta = json.loads(path.read_text())
        meta["videos"][video]["expressions"][exp_id].update(fields)
        path.write_text(json.dumps(meta))
    return corrupt


def revos_track(anno: str, edit: Callable[[list], object]) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "mask_dict.json"
        mask_dict = json.loads(path.read_text())
        mask_dict[anno] = edit(mask_dict[anno])
        path.write_text(json.dumps(mask_dict))
    return corrupt


def first_frame(edit: Callable[[dict], object]) -> Callable[[list], list]:
    return lambda track: [edit(track[0])] + track[1:]


def revos_frame(video: str, frame: str, action: Callable[[Path], None]) -> Callable[[Path], None]:
    return lambda root: action(root / "JPEGImages" / video / f"{frame}.jpg")


def _drop_exp_key(key: str) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "meta_expressions_valid_.json"
        meta = json.loads(path.read_text())
        meta["videos"]["vidA"]["expressions"]["1"].pop(key)
        path.write_text(json.dumps(meta))
    return corrupt


def _remove_video_dir(root: Path) -> None:
    d = root / "JPEGImages" / "vidC"
    for f in d.iterdir():
        f.unlink()
    d.rmdir()


REVOS_CASES = {
    "type_id is a string": (revos_exp("vidA", "1", type_id="reasoning"), "vidA/1", ["vidA", "'type_id'"]),
    "type_id is NaN": (revos_exp("vidA", "1", type_id=float("nan")), "vidA/1", ["vidA", "'type_id'"]),
    "type_id is 7": (revos_exp("vidA", "1", type_id=7), "vidA/1", ["'type_id'"]),
    "type_id is a bool": (revos_exp("vidA", "1", type_id=True), "vidA/1", ["'type_id'"]),
    "exp is a number": (revos_exp("vidA", "1", exp=12), "vidA/1", ["'exp'"]),
    "anno_id is a string": (revos_exp("vidA", "1", anno_id="2"), "vidA/1", ["'anno_id'"]),
    "anno_id holds a float": (revos_exp("vidA", "1", anno_id=[2.5]), "vidA/1", ["'anno_id'"]),
    "obj_id holds a string": (revos_exp("vidA", "1", obj_id=["x"]), "vidA/1", ["'obj_id'"]),
    "anno_id missing from mask_dict": (revos_exp("vidA", "1", anno_id=[99]), "vidA/1", ["anno_id 99", "mask_dict.json"]),
    "expression without type_id": (_drop_exp_key("type_id"), "vidA/1", ["type_id"]),
    "rle of the wrong size": (revos_track("2", first_frame(lambda r: rle(box_mask(size=(H + 1, W))))), "vidA/1", ["mask_dict.json", "anno_id 2", "size"]),
    "rle runs overrun H x W": (revos_track("2", first_frame(overrun)), "vidA/1", ["mask_dict.json", "anno_id 2", "overrun"]),
    "rle counts truncated": (revos_track("2", first_frame(truncated_rle)), "vidA/1", ["mask_dict.json", "anno_id 2"]),
    "rle with a bad character": (revos_track("2", first_frame(lambda r: {**r, "counts": r["counts"] + " "})), "vidA/1", ["mask_dict.json", "anno_id 2"]),
    "uncompressed counts negative": (revos_track("2", first_frame(lambda r: {"size": [H, W], "counts": [-1, H * W + 1]})), "vidA/1", ["anno_id 2", "non-negative"]),
    "uncompressed counts short": (revos_track("2", first_frame(lambda r: {"size": [H, W], "counts": [5, 5]})), "vidA/1", ["anno_id 2", "sum to 10"]),
    "rle is a string": (revos_track("2", first_frame(lambda r: "abc")), "vidA/1", ["anno_id 2"]),
    "track is not a list": (revos_track("2", lambda t: {"0": t[0]}), "vidA/1", ["anno_id 2", "list"]),
    "video frame directory missing": (_remove_video_dir, "vidC/0", ["vidC", "does not exist"]),
    "a frame file missing": (revos_frame("vidC", "00001", lambda p: p.unlink()), "vidC/0", ["vidC", "00001.jpg"]),
    "a frame truncated": (revos_frame("vidC", "00002", truncate), "vidC/0", ["00002.jpg"]),
    "a frame of another size": (revos_frame("vidC", "00001", lambda p: save_image(p, size=(H + 4, W))), "vidC/0", ["00001.jpg", "frame 1"]),
    "a frame is a symlink loop": (revos_frame("vidC", "00002", symlink_loop), "vidC/0", ["00002.jpg"]),
    "first frame unreadable": (revos_frame("vidC", "00000", lambda p: p.write_bytes(b"")), "vidC/0", ["00000.jpg"]),
}


@pytest.mark.parametrize("case", sorted(REVOS_CASES))
def test_revos(tmp_path, case):
    corrupt, bad, needles = REVOS_CASES[case]
    root = write_revos(tmp_path / "ReVOS")
    corrupt(root)
    m = run_on(tmp_path, {"name": "revos", "_target_": "rvt_bench.loaders.revos.ReVOSDataset", "root": str(root),
                          "split": "valid"}, "rvt_bench.metrics.protocols.revos.ReVOSProtocol")
    check(m, 4, bad, *needles)


# === LLM-Seg40K (split/<split>.json, COCO / EgoObjects image roots) ===================================

LS_IMAGES = ["img1.jpg", "img2.jpg", "img3.jpg"]


def write_llmseg(base: Path, variant: str = "rle") -> Path:
    root = base / "LLMSeg-40K"
    (root / "split").mkdir(parents=True)
    images = base / "coco" / "train2017"
    images.mkdir(parents=True)
    data = {}
    for name in LS_IMAGES:
        save_image(images / name)
        qa = {"question": f"where is the thing in {name}?", "answer": "there"}
        if variant == "rle":
            qa["rle_seg"] = rle(box_mask())
        else:
            png = base / "masks" / f"{Path(name).stem}_0.png"
            png.parent.mkdir(exist_ok=True)
            masks.write_png_mask(png, box_mask())
            qa["segmentation_path"] = str(png)
        data[name] = {"from_dataset": "coco", "qa_pairs": [qa]}
    (root / "split" / "validation.json").write_text(json.dumps(data))
    return root


def ls_qa(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "split" / "validation.json"
        data = json.loads(path.read_text())
        data["img2.jpg"]["qa_pairs"][0] = edit(data["img2.jpg"]["qa_pairs"][0])
        path.write_text(json.dumps(data))
    return corrupt


def ls_record(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "split" / "validation.json"
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
    return corrupt


def ls_image(action: Callable[[Path], None]) -> Callable[[Path], None]:
    return lambda root: action(root.parent / "coco" / "train2017" / "img2.jpg")


def _dup_stem(data: dict) -> None:
    data["img2.png"] = json.loads(json.dumps(data["img2.jpg"]))


def _dup_image(root: Path) -> None:
    save_image(root.parent / "coco" / "train2017" / "img2.png", fmt="PNG")
    ls_record(_dup_stem)(root)


LLMSEG_CASES = {
    "rle of the wrong size": (ls_qa(lambda q: {**q, "rle_seg": rle(box_mask(size=(H, W + 2)))}), "img2_0", ["img2.jpg", "size"]),
    "rle runs overrun H x W": (ls_qa(lambda q: {**q, "rle_seg": overrun(q["rle_seg"])}), "img2_0", ["img2.jpg", "'rle_seg'", "overrun"]),
    "rle counts truncated": (ls_qa(lambda q: {**q, "rle_seg": truncated_rle(q["rle_seg"])}), "img2_0", ["img2.jpg", "'rle_seg'"]),
    "rle size holds a string": (ls_qa(lambda q: {**q, "rle_seg": {**q["rle_seg"], "size": ["12", W]}}), "img2_0", ["'rle_seg'", "size"]),
    "rle_seg is a list": (ls_qa(lambda q: {**q, "rle_seg": [1, 2]}), "img2_0", ["img2.jpg", "rle_seg"]),
    "question is a number": (ls_qa(lambda q: {**q, "question": 3}), "img2_0", ["img2.jpg", "'question'"]),
    "qa pair without answer": (ls_qa(lambda q: {k: v for k, v in q.items() if k != "answer"}), "img2_0", ["img2.jpg", "answer"]),
    "qa pair is a string": (ls_qa(lambda q: "what?"), "img2_0", ["img2.jpg"]),
    "qa_pairs is not a list": (ls_record(lambda d: d["img2.jpg"].update(qa_pairs={"q": 1})), "img2.jpg", ["img2.jpg", "'qa_pairs'"]),
    "from_dataset unknown": (ls_record(lambda d: d["img2.jpg"].update(from_dataset="flickr")), "img2.jpg", ["img2.jpg", "from_dataset"]),
    "image missing": (ls_image(lambda p: p.unlink()), "img2_0", ["img2.jpg", "does not exist"]),
    "image truncated": (ls_image(truncate), "img2_0", ["img2.jpg"]),
    "image zero bytes": (ls_image(lambda p: p.write_bytes(b"")), "img2_0", ["img2.jpg"]),
    "image decompression bomb": (ls_image(png_bomb), "img2_0", ["img2.jpg", "exceeds"]),
    "duplicate id (img2.jpg and img2.png)": (_dup_image, "img2_0", ["img2_0", "repeats"]),
}


@pytest.mark.parametrize("case", sorted(LLMSEG_CASES))
def test_llmseg40k(tmp_path, case):
    corrupt, bad, needles = LLMSEG_CASES[case]
    root = write_llmseg(tmp_path)
    corrupt(root)
    m = run_on(tmp_path, {"name": "llmseg40k", "_target_": "rvt_bench.loaders.llmseg40k.LLMSeg40KDataset", "root": str(root),
                          "split": "validation"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol")
    check(m, 3, bad, *needles, n=3 if "duplicate" in case else None)


LLMSEG_PNG_CASES = {
    "mask png missing": (lambda base: (base / "masks" / "img2_0.png").unlink(), ["img2_0.png", "does not exist"]),
    "mask png truncated": (lambda base: truncate(base / "masks" / "img2_0.png"), ["img2_0.png"]),
    "mask png zero bytes": (lambda base: (base / "masks" / "img2_0.png").write_bytes(b""), ["img2_0.png"]),
    "mask png of the wrong size": (lambda base: masks.write_png_mask(base / "masks" / "img2_0.png", np.ones((H + 3, W), bool)), ["img2.jpg", "size"]),
}


@pytest.mark.parametrize("case", sorted(LLMSEG_PNG_CASES))
def test_llmseg40k_png_variant(tmp_path, case):
    corrupt, needles = LLMSEG_PNG_CASES[case]
    root = write_llmseg(tmp_path, variant="png")
    corrupt(tmp_path)
    m = run_on(tmp_path, {"name": "llmseg40k", "_target_": "rvt_bench.loaders.llmseg40k.LLMSeg40KDataset", "root": str(root),
                          "split": "validation"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol")
    check(m, 3, "img2_0", *needles)


# === JiTBench / RVTBench (canonical records: <split>.jsonl + frames/<video>/<frame>.jpg) ===============

CANON_FRAMES = ["f0.jpg", "f1.jpg"]


def canon_record(k: int, task: str = "segmentation") -> dict:
    record = {"id": f"q{k}", "video": f"v{k}", "frames": CANON_FRAMES, "query": f"query {k}", "task": task,
              "level": 1, "category": "spatial"}
    if task == "segmentation":
        record["masks"] = [rle(box_mask()), None]
    else:
        record["boxes"] = [[[1.0, 2.0, 8.0, 9.0]], []]
    return record


def write_canonical(root: Path, task: str = "segmentation", n: int = 3) -> Path:
    root.mkdir(parents=True)
    for k in range(n):
        d = root / "frames" / f"v{k}"
        d.mkdir(parents=True)
        for f in CANON_FRAMES:
            save_image(d / f)
    lines = [json.dumps(canon_record(k, task)) for k in range(n)]
    (root / "test.jsonl").write_text("\n".join(lines) + "\n")
    return root


def canon_edit(edit: Callable[[dict], object], k: int = 1) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "test.jsonl"
        lines = path.read_text().splitlines()
        record = json.loads(lines[k])
        edit(record)  # in place
        lines[k] = json.dumps(record)
        path.write_text("\n".join(lines) + "\n")
    return corrupt


def canon_line(text: str | bytes, k: int = 1) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "test.jsonl"
        lines = path.read_bytes().split(b"\n")
        lines[k] = text if isinstance(text, bytes) else text.encode()
        path.write_bytes(b"\n".join(lines))
    return corrupt


def canon_mask(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    return canon_edit(lambda r: r.update(masks=[edit(r["masks"][0]), None]))


def canon_frame(action: Callable[[Path], None], frame: str = "f1.jpg") -> Callable[[Path], None]:
    return lambda root: action(root / "frames" / "v1" / frame)


def _bom(root: Path) -> None:
    path = root / "test.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


def _png_mask_missing(root: Path) -> None:
    canon_edit(lambda r: r.update(masks=["masks/q1_f0.png", None]))(root)


JITBENCH_CASES = {
    "invalid jsonl line": (canon_line('{"id": "q1", "video": '), "test.jsonl line 2", ["test.jsonl line 2", "not a JSON record"]),
    "cp1252 bytes in a jsonl line": (canon_line(json.dumps(canon_record(1), ensure_ascii=False).replace("query 1", "caf\u00e9").encode("cp1252")), "test.jsonl line 2", ["line 2"]),
    "utf-8 BOM at the start": (_bom, None, []),
    "duplicate id": (canon_edit(lambda r: r.update(id="q0")), "q0", ["duplicate id 'q0'"]),
    "level is a word": (canon_edit(lambda r: r.update(level="hard")), "q1", ["record 1", "level"]),
    "level out of range": (canon_edit(lambda r: r.update(level=7)), "q1", ["level 7"]),
    "category unknown": (canon_edit(lambda r: r.update(category="causal")), "q1", ["category"]),
    "query missing": (canon_edit(lambda r: r.pop("query")), "q1", ["'query'"]),
    "id is a list": (canon_edit(lambda r: r.update(id=["q1"])), "test.jsonl record 1", ["'id'"]),
    "unknown key": (canon_edit(lambda r: r.update(extra=1)), "q1", ["unknown keys ['extra']"]),
    "masks of the wrong length": (canon_edit(lambda r: r.update(masks=[None])), "q1", ["masks", "length 1"]),
    "rle of the wrong size": (canon_mask(lambda m: rle(box_mask(size=(H, W + 1)))), "q1", ["'masks' frame 0", "size"]),
    "rle runs overrun H x W": (canon_mask(overrun), "q1", ["'masks' frame 0", "overrun"]),
    "rle counts truncated": (canon_mask(truncated_rle), "q1", ["'masks' frame 0"]),
    "mask png missing": (_png_mask_missing, "q1", ["q1_f0.png"]),
    "video directory missing": (canon_edit(lambda r: r.update(video="nope")), "q1", ["frames/nope"]),
    "a frame file missing": (canon_edit(lambda r: r.update(frames=["f0.jpg", "f9.jpg"])), "q1", ["f9.jpg"]),
    "a frame truncated": (canon_frame(truncate), "q1", ["f1.jpg"]),
    "a frame of another size": (canon_frame(lambda p: save_image(p, size=(H, W + 4))), "q1", ["f1.jpg", "frame 1"]),
    "a frame is a symlink loop": (canon_frame(symlink_loop), "q1", ["f1.jpg"]),
    "record is a list": (canon_line("[1, 2]"), "test.jsonl record 1", ["JSON object"]),
}


@pytest.mark.parametrize("case", sorted(JITBENCH_CASES))
def test_jitbench(tmp_path, case):
    corrupt, bad, needles = JITBENCH_CASES[case]
    root = write_canonical(tmp_path / "JiTBench")
    corrupt(root)
    m = run_on(tmp_path, {**dataset_yaml("jitbench"), "root": str(root), "split": "test"},
               "rvt_bench.metrics.protocols.rvtbench.RVTBenchProtocol")
    if bad is not None and bad.startswith("test.jsonl "):  # a record without a usable id: named by file and position
        bad = str(root / bad)
    check(m, 3, bad, *needles)


def canon_box(box) -> Callable[[Path], None]:
    return canon_edit(lambda r: r.update(boxes=[[box], []]))


RVTBENCH_CASES = {
    "box holds NaN": (canon_box([float("nan"), 2, 8, 9]), "q1", ["'boxes' frame 0"]),
    "box inverted": (canon_box([8, 2, 1, 9]), "q1", ["'boxes' frame 0", "x1 <= x2"]),
    "box negative": (canon_box([-5, -5, 4, 4]), "q1", ["'boxes' frame 0", "outside"]),
    "box beyond the frame": (canon_box([1, 2, W + 10, 9]), "q1", ["'boxes' frame 0", "outside"]),
    "box with 3 numbers": (canon_box([1, 2, 3]), "q1", ["frame 0", "boxes"]),
    "box of strings": (canon_box(["a", "b", "c", "d"]), "q1", ["frame 0", "boxes"]),
    "task unknown": (canon_edit(lambda r: r.update(task="counting")), "q1", ["task 'counting'"]),
    "grounding without boxes": (canon_edit(lambda r: r.pop("boxes")), "q1", ["needs 'boxes'"]),
    "vqa without answers": (canon_edit(lambda r: r.update(task="vqa")), "q1", ["needs 'answers'"]),
    "answers of numbers": (canon_edit(lambda r: r.update(answers=[1, 2])), "q1", ["answers"]),
}


@pytest.mark.parametrize("case", sorted(RVTBENCH_CASES))
def test_rvtbench(tmp_path, case):
    corrupt, bad, needles = RVTBENCH_CASES[case]
    root = write_canonical(tmp_path / "RVTBench", task="grounding")
    corrupt(root)
    m = run_on(tmp_path, {**dataset_yaml("rvtbench"), "root": str(root), "split": "test"},
               "rvt_bench.metrics.protocols.rvtbench.RVTBenchProtocol")
    check(m, 3, bad, *needles)


# === precomputed predictions (reasonseg PNG layout; jsonl) ===========================================
# What a broken prediction scores is the protocol's business (VISA's rule: the expression scores 0);
# here: the run completes and exactly that sample is listed, its reason naming the file.


def write_pngs(root: Path, pred_dir: Path) -> None:
    pred_dir.mkdir()
    for name in RS_NAMES:
        masks.write_png_mask(pred_dir / f"{name}.png", box_mask(2, 7, 3, 10))


PRECOMPUTED_CASES = {
    "prediction png missing": lambda d: (d / "b.png").unlink(),
    "prediction png truncated": lambda d: truncate(d / "b.png"),
    "prediction png zero bytes": lambda d: (d / "b.png").write_bytes(b""),
    "prediction png of the wrong size": lambda d: masks.write_png_mask(d / "b.png", np.ones((H + 2, W), bool)),
    "prediction png is text": lambda d: (d / "b.png").write_text("mask"),
    "prediction png is a symlink loop": lambda d: symlink_loop(d / "b.png"),
}


@pytest.mark.parametrize("case", sorted(PRECOMPUTED_CASES))
def test_precomputed_png(tmp_path, case):
    root = write_reasonseg(tmp_path / "ReasonSeg")
    preds = tmp_path / "preds"
    write_pngs(root, preds)
    PRECOMPUTED_CASES[case](preds)
    m = run_on(tmp_path, {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                          "root": str(root), "split": "val"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol",
               model={"name": "precomputed", "_target_": "rvt_bench.adapters.precomputed.PrecomputedAdapter", "root": str(preds),
                      "layout": "reasonseg", "workers": 1})
    listed = m["failed_samples"] + m["data_error_samples"]
    assert [f["sample_id"] for f in listed] == ["b"], listed
    assert "b.png" in listed[0]["message"]
    assert m["n"] + m["data_errors"] == len(RS_NAMES)


def test_precomputed_jsonl_without_a_sample_lists_it(tmp_path):
    root = write_reasonseg(tmp_path / "ReasonSeg")
    records = [Prediction(name, task="segmentation", masks=[rle(box_mask())]).to_dict() for name in ("a", "c")]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    m = run_on(tmp_path, {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                          "root": str(root), "split": "val"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol",
               model={"name": "precomputed", "_target_": "rvt_bench.adapters.precomputed.PrecomputedAdapter",
                      "root": str(tmp_path / "preds.jsonl"), "layout": "jsonl"})
    assert [f["sample_id"] for f in m["failed_samples"]] == ["b"] and "preds.jsonl" in m["failed_samples"][0]["message"]
    assert m["n"] == 3 and m["data_errors"] == 0


# === round two: files that are not files, limits, repeated keys, names from data ====================
# Every file is read through rvt_bench.core.files (docs/failures.md "Limits"): a violation fails the
# sample the file belongs to, or stops the run in one line naming the file when it serves the whole
# dataset. The pathological inputs must be refused (or handled) fast: none of these cases takes long.

DEEP = 30_000  # levels: past the recursion limit of Python's JSON parser


def deep(levels: int = DEEP) -> str:
    return "[" * levels + "]" * levels


def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def dev_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.symlink("/dev/zero", path)


def rs_text(text: str) -> Callable[[Path], None]:
    return lambda root: (root / "val" / "b.json").write_text(text)


def rs_points(points) -> Callable[[Path], None]:
    return rs_set("shapes", [{"label": "target", "points": points, "shape_type": "polygon"}])


def _bowtie(n: int) -> list[list[int]]:
    """A self-intersecting polygon of n points zigzagging across the image (the quadratic case of
    OpenCV's active-edge list)."""
    rng = np.random.default_rng(n)
    return rng.integers(0, [W, H], size=(n, 2)).tolist()


REASONSEG_LIMIT_CASES = {
    "annotation nested 30k levels": (rs_text('{"text": ["x"], "is_sentence": false, "shapes": ' + deep() + "}"),
                                     "b", ["b.json", "nested deeper"]),
    "annotation nested 70 levels": (rs_text('{"text": ["x"], "is_sentence": false, "shapes": ' + deep(70) + "}"),
                                    "b", ["b.json", "nested more than 64 levels", "max_json_depth"]),
    "a 5000-digit number in a polygon": (rs_text('{"text": ["x"], "is_sentence": false, "shapes": [{"label": "t", '
                                                 '"points": [[' + "9" * 5000 + ', 1], [5, 1], [5, 5]]}]}'),
                                         "b", ["b.json", "5000 digits", "at most 4300"]),
    "annotation is a FIFO": (lambda r: fifo(r / "val" / "b.json"), "b", ["b.json", "not a regular file", "FIFO"]),
    "annotation is a symlink to /dev/zero": (lambda r: dev_zero(r / "val" / "b.json"), "b",
                                             ["b.json", "not a regular file", "character device"]),
    "a key repeated in the annotation": (rs_text('{"text": ["x"], "text": ["y"], "is_sentence": false, "shapes": []}'),
                                         "b", ["b.json", "'text' appears twice"]),
    "polygons over the point limit": (rs_points([[1, 1]] * 10_001), "b", ["b.json", "10,001 points", "max_polygon_points"]),
    "image is a FIFO": (rs_image(fifo), "b", ["b.jpg", "not a regular file"]),
    "image header over the pixel limit": (rs_image(lambda p: png_bomb(p, 10_000, 10_000), ".png"), "b",
                                          ["b.png", "10000 x 10000", "exceeds", "max_image_pixels"]),
    # valid, and fast now: OpenCV's fill is quadratic in crossing edges, its row loop starts at the top vertex
    "self-intersecting polygon of 5000 points": (rs_points(_bowtie(5000)), None, []),
    "a vertex at y = -2**31": (rs_points([[3, 2], [9, -2**31], [9, 6], [3, 6]]), None, []),
}


@pytest.mark.parametrize("case", sorted(REASONSEG_LIMIT_CASES))
def test_reasonseg_limits(tmp_path, case):
    corrupt, bad, needles = REASONSEG_LIMIT_CASES[case]
    root = write_reasonseg(tmp_path / "ReasonSeg")
    corrupt(root)
    m = run_on(tmp_path, {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                          "root": str(root), "split": "val"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol")
    check(m, len(RS_NAMES), bad, *needles)


def revos_text(name: str, edit: Callable[[str], str]) -> Callable[[Path], None]:
    """Edit a ReVOS file as text (a repeated key cannot be written through a dict)."""
    def corrupt(root: Path) -> None:
        path = root / name
        text = path.read_text()
        changed = edit(text)
        assert changed != text
        path.write_text(changed)
    return corrupt


def _repeat_expression(text: str) -> str:
    return text.replace('"1": {"exp": "what rolls"', '"1": {"exp": "an earlier one", "obj_id": [1], "anno_id": [2], '
                                                     '"type_id": 1}, "1": {"exp": "what rolls"', 1)


def _repeat_video(text: str) -> str:
    meta = json.loads(text)
    earlier = json.dumps({"vidC": meta["videos"]["vidC"]})[1:-1]
    return text.replace('"videos": {', '"videos": {' + earlier + ", ", 1)


def _repeat_anno(text: str) -> str:
    track = json.dumps(json.loads(text)["4"])
    return text[:-1] + ', "4": ' + track + "}"


def revos_exp_frames(video: str, frames: list[str]) -> Callable[[Path], None]:
    def corrupt(root: Path) -> None:
        path = root / "meta_expressions_valid_.json"
        meta = json.loads(path.read_text())
        meta["videos"][video]["frames"] = frames
        path.write_text(json.dumps(meta))
    return corrupt


def _outside_video(root: Path) -> None:
    """vidC renamed to ../outside in the meta file, with frames there (outside JPEGImages)."""
    (root / "JPEGImages" / "vidC").rename(root / "outside")
    revos_text("meta_expressions_valid_.json", lambda t: t.replace('"vidC"', '"../outside"'))(root)


REVOS_ROUND_TWO = {
    "an expression id repeated in the meta file": (revos_text("meta_expressions_valid_.json", _repeat_expression), 5,
                                                   "vidA/1", ["expression id '1' appears twice", "earlier one is left out"]),
    "a video repeated in the meta file": (revos_text("meta_expressions_valid_.json", _repeat_video), 5, "vidC/0",
                                          ["video 'vidC' appears twice"]),
    "an anno_id repeated in mask_dict.json": (revos_text("mask_dict.json", _repeat_anno), 4, "vidC/0",
                                              ["mask_dict.json", "anno_id 4 appears twice"]),
    "a video name leading out of the root": (_outside_video, 4, "../outside/0", ["'../outside'", "leaves"]),
    "a frame name leading out of its video": (revos_exp_frames("vidC", ["00000", "../vidA/00001", "00002"]), 4, "vidC/0",
                                              ["frame name", "leaves"]),
    "a frame is a FIFO": (revos_frame("vidC", "00001", fifo), 4, "vidC/0", ["00001.jpg", "not a regular file"]),
}


@pytest.mark.parametrize("case", sorted(REVOS_ROUND_TWO))
def test_revos_round_two(tmp_path, case):
    """n + data_errors is what the meta file declares, a repeated key included."""
    corrupt, declared, bad, needles = REVOS_ROUND_TWO[case]
    root = write_revos(tmp_path / "ReVOS")
    corrupt(root)
    m = run_on(tmp_path, {"name": "revos", "_target_": "rvt_bench.loaders.revos.ReVOSDataset", "root": str(root),
                          "split": "valid"}, "rvt_bench.metrics.protocols.revos.ReVOSProtocol")
    check(m, declared, bad, *needles)


WHOLE_FILE_CASES = {
    # the file serves the whole dataset: the run stops before any work, in one line naming the file
    "revos mask_dict.json nested 30k levels": ("revos", lambda r: (r / "mask_dict.json").write_text('{"1": ' + deep() + "}"),
                                               ["mask_dict.json", "nested deeper"]),
    "revos meta file is a FIFO": ("revos", lambda r: fifo(r / "meta_expressions_valid_.json"),
                                  ["meta_expressions_valid_.json", "not a regular file"]),
    "revos mask_dict.json is /dev/zero": ("revos", lambda r: dev_zero(r / "mask_dict.json"),
                                          ["mask_dict.json", "not a regular file"]),
    "llmseg40k annotation nested 30k levels": ("llmseg40k", lambda r: (r / "split" / "validation.json").write_text(deep()),
                                               ["validation.json", "nested deeper"]),
    "llmseg40k image key repeated": ("llmseg40k", lambda r: (r / "split" / "validation.json").write_text(
        (r / "split" / "validation.json").read_text().replace('"img1.jpg"', '"img3.jpg"', 1)),
        ["validation.json", "'img3.jpg' appears twice in the top-level object"]),
}


@pytest.mark.parametrize("case", sorted(WHOLE_FILE_CASES))
def test_a_whole_dataset_file_breaking_a_limit_stops_in_one_line(tmp_path, case):
    from rvt_bench.core.types import DatasetFormatError
    from rvt_bench.harness.cli import our_error

    fmt, corrupt, needles = WHOLE_FILE_CASES[case]
    if fmt == "revos":
        root = write_revos(tmp_path / "ReVOS")
        dataset = {"name": "revos", "_target_": "rvt_bench.loaders.revos.ReVOSDataset", "root": str(root), "split": "valid"}
        protocol = "rvt_bench.metrics.protocols.revos.ReVOSProtocol"
    else:
        root = write_llmseg(tmp_path)
        dataset = {"name": "llmseg40k", "_target_": "rvt_bench.loaders.llmseg40k.LLMSeg40KDataset", "root": str(root),
                   "split": "validation"}
        protocol = "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol"
    corrupt(root)
    with pytest.raises(Exception) as info:  # Hydra's instantiate wraps it; the command line prints ours
        run_on(tmp_path, dataset, protocol)
    error = our_error(info.value)
    assert isinstance(error, DatasetFormatError), info.value
    message = str(error)
    assert "\n" not in message and all(n in message for n in needles), message
    assert not list((tmp_path / "runs").rglob("predictions*.jsonl"))  # stopped before any work


def canon_path(field: str, value) -> Callable[[Path], None]:
    return canon_edit(lambda r: r.update({field: value}))


JITBENCH_ROUND_TWO = {
    "a jsonl line nested 30k levels": (canon_line('{"id": "q1", "video": "v1", "level": ' + deep() + "}"),
                                       "test.jsonl line 2", ["test.jsonl line 2", "nested deeper"]),
    "a jsonl line with a 5000-digit level": (canon_line(json.dumps(canon_record(1))[:-1] .replace('"level": 1', '"level": ' + "7" * 5000) + "}"),
                                             "test.jsonl line 2", ["test.jsonl line 2", "5000 digits"]),
    "a key repeated in a jsonl record": (canon_line(json.dumps(canon_record(1))[:-1] + ', "query": "again"}'),
                                         "test.jsonl line 2", ["test.jsonl line 2", "'query' appears twice"]),
    "a video name leading out of the root": (canon_path("video", "../../v1"), "q1", ["'../../v1'", "leaves"]),
    "a frame name leading out of its video": (canon_path("frames", ["f0.jpg", "../v0/f1.jpg"]), "q1", ["'../v0/f1.jpg'", "leaves"]),
    "a mask path leading out of the root": (canon_edit(lambda r: r.update(masks=["../../etc/mask.png", None])), "q1",
                                            ["mask path", "leaves"]),
    "a frame is a FIFO": (canon_frame(fifo), "q1", ["f1.jpg", "not a regular file"]),
}


@pytest.mark.parametrize("case", sorted(JITBENCH_ROUND_TWO))
def test_jitbench_round_two(tmp_path, case):
    corrupt, bad, needles = JITBENCH_ROUND_TWO[case]
    root = write_canonical(tmp_path / "JiTBench")
    corrupt(root)
    m = run_on(tmp_path, {**dataset_yaml("jitbench"), "root": str(root), "split": "test"},
               "rvt_bench.metrics.protocols.rvtbench.RVTBenchProtocol")
    check(m, 3, str(root / bad) if bad.startswith("test.jsonl ") else bad, *needles)


def test_the_dataset_limits_in_the_config_are_the_ones_applied(tmp_path):
    """dataset.limits: a line over max_line_mb fails its record alone; a frame over max_image_pixels
    (12 x 16 = 192 > 100) fails its sample."""
    root = write_canonical(tmp_path / "JiTBench")
    canon_edit(lambda r: r.update(query="x" * 3000))(root)
    m = run_on(tmp_path, {**dataset_yaml("jitbench"), "root": str(root), "split": "test", "limits": {"max_line_mb": 0.002}},
               "rvt_bench.metrics.protocols.rvtbench.RVTBenchProtocol")
    check(m, 3, str(root / "test.jsonl line 2"), "longer than 0.002 MB", "max_line_mb")
    from rvt_bench.core.types import DatasetFormatError
    from rvt_bench.harness.cli import our_error

    rs = write_reasonseg(tmp_path / "ReasonSeg")
    with pytest.raises(Exception) as info:
        run_on(tmp_path / "second", {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                                     "root": str(rs), "split": "val", "limits": {"max_image_pixels": 100}},
               "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol")
    assert isinstance(our_error(info.value), DatasetFormatError)
    assert re.search("(?s)every one of the 3 samples.*exceeds the limit of 100 ", str(our_error(info.value)))


def test_llmseg40k_image_name_leading_out_of_its_directory(tmp_path):
    root = write_llmseg(tmp_path)
    save_image(tmp_path / "secret.jpg")
    ls_record(lambda d: d.update({"../../secret.jpg": d.pop("img2.jpg")}))(root)
    m = run_on(tmp_path, {"name": "llmseg40k", "_target_": "rvt_bench.loaders.llmseg40k.LLMSeg40KDataset", "root": str(root),
                          "split": "validation"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol")
    check(m, 3, "secret_0", "'../../secret.jpg'", "leaves")


def giant_png(path: Path) -> None:
    """An RGBA 16-bit PNG header declaring 32768 x 32768 = 2**30 pixels (decoded: 8 GiB), no pixel data."""
    png_bomb(path, 32768, 32768)
    data = bytearray(path.read_bytes())
    data[24:26] = bytes([16, 6])  # bit depth 16, colour type RGBA
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF)
    path.write_bytes(bytes(data))


PRECOMPUTED_ROUND_TWO = {
    "prediction png declaring 2**30 RGBA16 pixels": (giant_png, ["b.png", "32768 x 32768", "exceeds"]),
    "prediction png is a FIFO": (fifo, ["b.png", "not a regular file"]),
    "prediction png is /dev/zero": (dev_zero, ["b.png", "not a regular file"]),
}


@pytest.mark.parametrize("case", sorted(PRECOMPUTED_ROUND_TWO))
def test_precomputed_png_round_two(tmp_path, case):
    corrupt, needles = PRECOMPUTED_ROUND_TWO[case]
    root = write_reasonseg(tmp_path / "ReasonSeg")
    preds = tmp_path / "preds"
    write_pngs(root, preds)
    corrupt(preds / "b.png")
    m = run_on(tmp_path, {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
                          "root": str(root), "split": "val"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol",
               model={"name": "precomputed", "_target_": "rvt_bench.adapters.precomputed.PrecomputedAdapter", "root": str(preds),
                      "layout": "reasonseg", "workers": 1})
    assert [f["sample_id"] for f in m["failed_samples"]] == ["b"] and m["data_errors"] == 0, m["failed_samples"]
    assert all(n in m["failed_samples"][0]["message"] for n in needles), m["failed_samples"][0]["message"]
    assert m["n"] == len(RS_NAMES) and m["failures"] == 1


def test_a_precomputed_jsonl_line_nested_30k_levels_stops_in_one_line(tmp_path):
    from rvt_bench.core.types import AdapterError

    root = write_reasonseg(tmp_path / "ReasonSeg")
    good = [json.dumps(Prediction(name, task="segmentation", masks=[rle(box_mask())]).to_dict()) for name in RS_NAMES]
    (tmp_path / "preds.jsonl").write_text(good[0] + "\n" + '{"sample_id": "b", "trace": ' + deep() + "}\n" + good[2] + "\n")
    with pytest.raises(AdapterError) as info:
        run_on(tmp_path, {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset", "root": str(root),
                          "split": "val"}, "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol",
               model={"name": "precomputed", "_target_": "rvt_bench.adapters.precomputed.PrecomputedAdapter",
                      "root": str(tmp_path / "preds.jsonl"), "layout": "jsonl"})
    assert "preds.jsonl:2" in str(info.value) and "nested deeper" in str(info.value) and "\n" not in str(info.value)


def _reasonseg_run(tmp: Path) -> dict:
    return {"name": "reasonseg", "_target_": "rvt_bench.loaders.reasonseg.ReasonSegDataset",
            "root": str(write_reasonseg(tmp / "ReasonSeg")), "split": "val"}


def test_the_runs_own_predictions_with_a_deep_line(tmp_path):
    """Mid-file: one line naming the file and line (the run cannot know whose record it was); as the
    torn last line a kill leaves: ignored, its sample redone, the same metrics.json as before."""
    from rvt_bench.core.types import RunStoreError

    def results(m: dict) -> dict:  # what the run measured, not how long the model took
        return {k: v for k, v in m.items() if k != "analytics"} | {"analytics": {
            k: v for k, v in (m.get("analytics") or {}).items() if k != "latency_s"}}

    dataset, protocol = _reasonseg_run(tmp_path), "rvt_bench.metrics.protocols.reasonseg.ReasonSegProtocol"
    first = run_on(tmp_path, dataset, protocol)
    path = next((tmp_path / "runs").rglob("predictions.jsonl"))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + '{"sample_id": "x", "trace": ' + deep() + "}\n" + "".join(lines[1:]))
    with pytest.raises(RunStoreError, match=r"predictions.jsonl:2: not a JSON prediction record .*nested deeper"):
        run_on(tmp_path, dataset, protocol)
    path.write_text(lines[0] + lines[1] + '{"sample_id": "c", "trace": ' + deep())  # c's record torn by a kill
    again = run_on(tmp_path, dataset, protocol)
    assert results(again) == results(first) and again["n"] == 3
