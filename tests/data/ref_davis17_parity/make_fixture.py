"""Deterministic Ref-DAVIS17 fixture in the layout VISA's tools/eval_davis17.py reads, with a
prediction folder holding every case its numbers depend on.

write_fixture(dir) -> (root, pred):
  root/meta_expressions/valid/meta_expressions.json  {"videos": {video: {"frames", "expressions"}}}
    (frames stored unsorted for one video; one video with 12 expressions, so "10" sorts before "2")
  root/valid/mask_dict.pkl   {str(anno_id): [RLE with bytes counts, or None]} in VISA's numbering,
    pickle protocol 2 (bytes through _codecs.encode, as Python 3 writes them)
  root/valid/JPEGImages/<video>/<frame>.jpg
  pred/<video>/<exp_id>/<frame>.png: 0/1 and 0/255 PNGs (noisy copies, empty, full), and the
  broken cases of MISSING: a video folder missing (VISA: 0), an expression folder missing and a
  middle frame missing (VISA: dropped), a wrong-size frame (VISA: dropped).
numpy default_rng(20261205).
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
from PIL import Image

SEED = 20261205
VIDEOS = {"bike-packing": 3, "blackswan": 12, "dogs-jump": 2, "gold-fish": 4, "judo": 2}  # video -> expressions
MISSING = {"video": "dogs-jump", "expression": ("gold-fish", "1"), "frame": ("blackswan", "3"),
           "wrong_size": ("bike-packing", "2")}


def _blob(rng, h, w):
    yy, xx = np.mgrid[:h, :w]
    cy, cx = rng.uniform(0, h), rng.uniform(0, w)
    ry, rx = rng.uniform(2, h / 2), rng.uniform(2, w / 2)
    return (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1).astype(np.uint8)


def write_fixture(base: str | Path) -> tuple[Path, Path]:
    from pycocotools import mask as coco_mask

    rng = np.random.default_rng(SEED)
    base = Path(base)
    root, pred = base / "ref_davis17", base / "pred"
    videos, mask_dict, anno_id = {}, {}, 0
    for video in sorted(VIDEOS):
        n_frames = int(rng.integers(3, 7))
        h, w = int(rng.integers(16, 40)), int(rng.integers(20, 48))
        frames = [f"{k:05d}" for k in range(n_frames)]
        stored = list(frames)
        if video == "gold-fish":
            stored = [frames[0]] + frames[1:][::-1]  # stored unsorted: VISA indexes masks by this order
        (root / "valid" / "JPEGImages" / video).mkdir(parents=True, exist_ok=True)
        for f in frames:
            Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(root / "valid" / "JPEGImages" / video / f"{f}.jpg")
        exp_ids = [str(k) for k in range(VIDEOS[video])]
        videos[video] = {"frames": stored, "expressions": {e: {"exp": f"the thing {e} in {video}", "obj_id": str(int(e) % 3)}
                                                           for e in exp_ids}}
        for exp_id in sorted(exp_ids):  # VISA's numbering
            gts = []
            for f in stored:
                m = _blob(rng, h, w) if rng.random() > 0.2 else None
                if m is None:
                    gts.append(None)
                else:
                    rle = coco_mask.encode(np.asfortranarray(m))
                    gts.append({"size": [h, w], "counts": rle["counts"]})
            mask_dict[str(anno_id)] = gts
            anno_id += 1
            if video == MISSING["video"] or (video, exp_id) == MISSING["expression"]:
                continue
            out = pred / video / exp_id
            out.mkdir(parents=True, exist_ok=True)
            kind = rng.random()
            scale = 255 if rng.random() < 0.3 else 1
            for f, gt in zip(stored, gts):
                if (video, exp_id) == MISSING["frame"] and f == frames[len(frames) // 2]:
                    continue
                truth = coco_mask.decode(gt) if gt else np.zeros((h, w), np.uint8)
                if kind < 0.1:
                    m = np.zeros((h, w), np.uint8)
                elif kind < 0.15:
                    m = np.ones((h, w), np.uint8)
                else:
                    m = truth ^ (rng.random((h, w)) < 0.1).astype(np.uint8) if kind > 0.5 else _blob(rng, h, w) | truth
                if (video, exp_id) == MISSING["wrong_size"] and f == frames[-1]:
                    m = np.zeros((h + 1, w), np.uint8)
                Image.fromarray((m * scale).astype(np.uint8)).save(out / f"{f}.png")
    meta_dir = root / "meta_expressions" / "valid"
    meta_dir.mkdir(parents=True, exist_ok=True)
    (meta_dir / "meta_expressions.json").write_text(json.dumps({"videos": videos}))
    with open(root / "valid" / "mask_dict.pkl", "wb") as f:
        pickle.dump(mask_dict, f, protocol=2)
    return root, pred


if __name__ == "__main__":
    import sys

    print(*write_fixture(sys.argv[1]))
