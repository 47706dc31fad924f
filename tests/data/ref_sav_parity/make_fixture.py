"""Write the Ref-SAV parity fixture: Sa2VA's ref_sav_eval layout and predictions in its results.json
and as PNG folders (README.md beside this file).

    python make_fixture.py <fixture root> <predictions dir>
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np
from pycocotools import mask as cocomask

# video -> (height, width, frame count); SA-V names (one underscore: eval_ref_sav.py splits "<video>_<exp>" at the last)
VIDEOS = {"sav_000001": (24, 32, 4), "sav_000002": (30, 20, 3), "sav_000003": (16, 16, 5)}


def _rle(mask: np.ndarray) -> dict:
    rle = cocomask.encode(np.asfortranarray(mask.astype(np.uint8)))
    rle["counts"] = rle["counts"].decode()
    return rle


def _blob(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    m = np.zeros((h, w), np.uint8)
    y0, x0 = int(rng.integers(0, h - 4)), int(rng.integers(0, w - 4))
    m[y0:y0 + int(rng.integers(3, h - y0 + 1)), x0:x0 + int(rng.integers(3, w - x0 + 1))] = 1
    return m


def write_fixture(root: Path) -> dict:
    """The fixture under root; returns {anno_id: [mask array or None per frame]} for write_predictions."""
    rng = np.random.default_rng(20261207)
    root = Path(root)
    videos, mask_dict, tracks = {}, {}, {}
    anno = 0
    for video, (h, w, n) in VIDEOS.items():
        frames = [f"{k:05d}" for k in range(n)]
        (root / "videos" / video).mkdir(parents=True, exist_ok=True)
        for f in frames:
            cv2.imwrite(str(root / "videos" / video / f"{f}.jpg"), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
        ids = []
        for _ in range(3):  # three objects per video, absent in some frames
            track = [None if rng.random() < 0.25 else _blob(rng, h, w) for _ in frames]
            mask_dict[str(anno)] = [_rle(m) if m is not None else None for m in track]
            tracks[str(anno)] = track
            ids.append(anno)
            anno += 1
        expressions = {
            "0": {"exp": "the object on the left", "anno_id": [ids[0]], "obj_id": [0], "type_id": 0},
            "1": {"exp": "the two objects that move together", "anno_id": [ids[0], ids[1]], "obj_id": [0, 1], "type_id": 0},
            "2": {"exp": "short one", "anno_id": [ids[2]], "obj_id": [2], "type_id": 1},
            "3": {"exp": "all of them", "anno_id": ids, "obj_id": [0, 1, 2], "type_id": 1},
        }
        if video == "sav_000002":
            expressions["4"] = {"exp": "another kind of expression", "anno_id": [ids[1]], "obj_id": [1], "type_id": 2}
        videos[video] = {"frames": frames, "height": h, "width": w, "expressions": expressions}
    (root / "meta_expressions_valid.json").write_text(json.dumps({"videos": videos}))
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    return tracks


def write_predictions(root: Path, out: Path) -> None:
    """out/results.json (Sa2VA's results layout) and out/png/<video>/<exp_id>/<frame>.png (0/255),
    the same masks: per expression the GT redrawn, shifted, grown, emptied or another object; one
    expression missing (the reference drops it), one with an extra frame (never read)."""
    root, out = Path(root), Path(out)
    rng = np.random.default_rng(20261208)
    meta = json.loads((root / "meta_expressions_valid.json").read_text())["videos"]
    mask_dict = json.loads((root / "mask_dict.json").read_text())
    results: dict = {}
    k = 0
    for video, info in meta.items():
        h, w = info["height"], info["width"]
        for exp_id, exp in info["expressions"].items():
            k += 1
            if (video, exp_id) == ("sav_000003", "1"):
                continue  # missing: eval_ref_sav.py's worker dies on the KeyError, the expression is dropped
            preds = []
            for t, _ in enumerate(info["frames"]):
                gt = np.zeros((h, w), np.uint8)
                for a in exp["anno_id"]:
                    if mask_dict[str(a)][t]:
                        gt |= cocomask.decode(mask_dict[str(a)][t])
                kind = (k + t) % 5
                if kind == 0:
                    m = gt
                elif kind == 1:
                    m = np.roll(gt, 2, axis=1)
                elif kind == 2:
                    m = cv2.dilate(gt, np.ones((3, 3), np.uint8))
                elif kind == 3:
                    m = np.zeros_like(gt)
                else:
                    m = _blob(rng, h, w)
                preds.append(m)
            if (video, exp_id) == ("sav_000001", "2"):
                preds.append(np.ones((h, w), np.uint8))  # a frame past the video's last: never read
            results.setdefault(video, {})[exp_id] = {
                "video_id": video, "exp_id": exp_id, "exp": exp["exp"], "frames": info["frames"],
                "prediction_masks": [_rle(m) for m in preds]}
            for t, f in enumerate(info["frames"]):
                d = out / "png" / video / exp_id
                d.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(d / f"{f}.png"), preds[t] * 255)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results))


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]))
    write_predictions(Path(sys.argv[1]), Path(sys.argv[2]))
