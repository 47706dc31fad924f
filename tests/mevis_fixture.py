"""A tiny MeViS valid_u release and a submission of prediction PNGs, in the exact on-disk formats
(henghuiding/MeViS README "File Structure"; predictions as tools/eval_mevis.py reads them), for the
parity test (tests/test_mevis.py) and for running the reference on it:

    python tests/mevis_fixture.py OUT      # writes OUT/mevis/valid_u/... and OUT/pred/...

then, in a checkout of henghuiding/MeViS (7c0620b), with numpy, opencv-python, pycocotools and
scikit-image installed:

    cd tools && python eval_mevis.py --mevis_exp_path OUT/mevis/valid_u/meta_expressions.json \
        --mevis_mask_path OUT/mevis/valid_u/mask_dict.json --mevis_pred_path OUT/pred --save_name OUT/per_exp.json

Its printed J, F, J&F are in tests/data/mevis_eval_printed.json. What the fixture holds (every
case that moves the reference's numbers): overlapping objects summed in one expression's GT (vidA/1,
vidB/2), objects absent in some frames (null RLEs), an all-empty prediction (vidA/2), a frame where
GT and prediction are both empty, predictions as 0/255, 0/1 and other gray values, a missing
expression folder (vidA/3) and a missing middle frame (vidB/1): dropped by the reference; a video
without a prediction folder (vidC): both expressions score 0; a video of another frame size (vidD).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

SEED = 35


def _box(h: int, w: int, y0: int, y1: int, x0: int, x1: int) -> np.ndarray:
    m = np.zeros((h, w), dtype=np.uint8)
    m[y0:y1, x0:x1] = 1
    return m


def _ellipse(h: int, w: int, cy: float, cx: float, ry: float, rx: float) -> np.ndarray:
    yy, xx = np.mgrid[:h, :w]
    return (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1).astype(np.uint8)


def _rle(mask: np.ndarray | None) -> dict | None:
    if mask is None:
        return None
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def _videos() -> dict:
    """{video: (H, W, frame names, {anno_id: per frame mask or None}, {exp_id: (text, obj ids, anno ids)})}."""
    h, w = 24, 32
    a = {  # anno 10 and 11 overlap in frames 0-2; anno 12 is absent from frames 0 and 3
        "10": [_ellipse(h, w, 10, 10 + 2 * t, 6, 8) for t in range(4)],
        "11": [_box(h, w, 6, 18, 12 + t, 24 + t) for t in range(3)] + [None],
        "12": [None, _box(h, w, 18, 23, 2, 9), _box(h, w, 17, 23, 3, 10), None],
    }
    b = {
        "20": [_box(h, w, 2, 12, 2, 12), _box(h, w, 3, 13, 3, 13), _box(h, w, 4, 14, 4, 14)],
        "21": [_box(h, w, 8, 20, 8, 28), None, _box(h, w, 9, 21, 10, 30)],
    }
    c = {"30": [_box(h, w, 0, 10, 0, 10)] * 3}
    hd, wd = 20, 28
    d = {"40": [_ellipse(hd, wd, 10, 14, 7, 9), _ellipse(hd, wd, 11, 13, 7, 9)]}
    frames = [f"{i:05d}" for i in range(5)]
    return {
        "vidA": (h, w, frames[:4], a, {"0": ("the round one moving right", [0], [10]),
                                       "1": ("the two that touch", [0, 1], [10, 11]),
                                       "2": ("the box at the bottom", [2], [12]),
                                       "3": ("the box and the round one", [1, 2], [11, 12])}),
        "vidB": (h, w, frames[:3], b, {"0": ("the square drifting", [0], [20]),
                                       "1": ("the bar that disappears", [1], [21]),
                                       "2": ("both objects", [0, 1], [20, 21])}),
        "vidC": (h, w, frames[:3], c, {"0": ("the corner block", [0], [30]),
                                       "1": ("the block that does not move", [0], [30])}),
        "vidD": (hd, wd, frames[:2], d, {"0": ("the ball", [0], [40])}),
    }


def _gt(video: tuple, anno_ids: list[int], t: int) -> np.ndarray:
    h, w, _, annos, _ = video
    out = np.zeros((h, w), dtype=np.uint8)
    for a in anno_ids:
        if annos[str(a)][t] is not None:
            out += annos[str(a)][t]
    return out


def _predictions(videos: dict, rng: np.random.Generator) -> dict:
    """{(video, exp_id): per frame uint8 PNG content, None = file left out}; an expression absent
    from the dict has no folder; vidC has no folder at all."""
    out = {}
    for name in ("vidA", "vidB", "vidD"):
        video = videos[name]
        h, w, frames, _, expressions = video
        for exp_id, (_, _, anno_ids) in expressions.items():
            pngs = []
            for t in range(len(frames)):
                gt = _gt(video, anno_ids, t) > 0
                pred = np.roll(gt, shift=(t % 3) - 1, axis=1)
                noise = rng.random((h, w)) < 0.04
                pngs.append((pred ^ noise).astype(np.uint8) * 255)
            out[(name, exp_id)] = pngs
    out[("vidA", "2")] = [np.zeros_like(p) for p in out[("vidA", "2")]]  # an empty prediction
    out[("vidA", "0")][3] = np.zeros_like(out[("vidA", "0")][3])
    del out[("vidA", "3")]  # no expression folder: the reference drops the expression
    out[("vidB", "1")][1] = None  # a missing middle frame: dropped as well
    out[("vidB", "2")] = [(p > 0).astype(np.uint8) for p in out[("vidB", "2")]]  # 0/1 PNGs
    out[("vidD", "0")] = [(p > 0).astype(np.uint8) * 128 for p in out[("vidD", "0")]]  # another gray value
    return out


def write(out: Path) -> tuple[Path, Path]:
    """Write the release (out/mevis/valid_u) and the submission (out/pred); returns (mevis root, pred root)."""
    rng = np.random.default_rng(SEED)
    videos = _videos()
    split = out / "mevis" / "valid_u"
    meta, mask_dict = {"videos": {}}, {}
    for name, (h, w, frames, annos, expressions) in videos.items():
        folder = split / "JPEGImages" / name
        folder.mkdir(parents=True)
        for f in frames:
            Image.fromarray(np.full((h, w, 3), 90, dtype=np.uint8)).save(folder / f"{f}.jpg")
        meta["videos"][name] = {"expressions": {e: {"exp": text, "obj_id": objs, "anno_id": ids}
                                                for e, (text, objs, ids) in expressions.items()}, "frames": frames}
        mask_dict.update({a: [_rle(m) for m in track] for a, track in annos.items()})
    (split / "meta_expressions.json").write_text(json.dumps(meta))
    (split / "mask_dict.json").write_text(json.dumps(mask_dict))
    pred = out / "pred"
    for (name, exp_id), pngs in _predictions(videos, rng).items():
        folder = pred / name / exp_id
        folder.mkdir(parents=True)
        for f, png in zip(videos[name][2], pngs):
            if png is not None:
                Image.fromarray(png, mode="L").save(folder / f"{f}.png")
    return out / "mevis", pred


if __name__ == "__main__":
    root, pred = write(Path(sys.argv[1]))
    print(root, pred)
