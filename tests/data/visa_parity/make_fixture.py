"""Write the 20-expression ReVOS-format parity fixture: a dataset root and a submission of PNGs.

    write_fixture(out_dir) -> (dataset_root, prediction_root)

    <out_dir>/ReVOS/JPEGImages/<video>/<frame>.jpg       <video> nested for some ("UVO/all/<id>")
    <out_dir>/ReVOS/meta_expressions_valid_.json         VISA's meta format (bench/loaders/revos.py)
    <out_dir>/ReVOS/mask_dict.json                       {anno_id: [per frame RLE or null]}
    <out_dir>/ReVOS/mask_dict_foreground.json            {video: {"masks_rle": [...], "foreground_ratio": [...]}}
    <out_dir>/pred/<video>/<exp_id>/<frame>.png          the submission VISA tools/eval_revos.py reads

Deterministic (numpy default_rng(seed), OpenCV-free geometry), so tests regenerate it into tmp_path
and only the numbers VISA printed on it are committed (expected_visa.json, made by run_visa.py).

Choices that make VISA's raw-pixel A and R equal to our binarised ones (metrics/protocols/revos.py):
prediction PNGs hold 0/1 (not 0/255), and the objects of a video never overlap (the GT sum is 0/1).
Cases covered: nested and flat video names, frame names out of lexical order, 1-6 frames, type_id
0, 1 and 2, multi-object expressions, frames where the target is absent, a distractor object that
no expression names (it enters the foreground, hence R), predictions that are exact, shifted,
partial, empty, spilling onto the distractor, or all background.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

SEED = 20261130
# (video, (H, W), frame names in temporal order); 20 expressions over 6 videos
VIDEOS = [
    ("UVO/all/0aB3xYz", (24, 32), ["00000", "00005", "00010", "00015"]),
    ("UVO/all/Qx9_77", (30, 40), ["00003", "00001", "00002"]),
    ("ArgoVerse/5c251c22", (48, 64), ["0001", "0002", "0003", "0004", "0005", "0006"]),
    ("vid_flat", (36, 20), ["00000"]),
    ("TAO/LaSOT/cat-1", (40, 52), ["00010", "00020", "00030", "00040", "00050"]),
    ("burst_small", (17, 23), ["a", "b"]),
]
# per video: expressions as (type_id, object indices, prediction style); the last object of each
# video is the distractor that no expression names
EXPRESSIONS = [
    [(0, [0], "exact"), (1, [0, 1], "shift"), (2, [], "spill"), (1, [1], "partial")],
    [(0, [1], "empty"), (1, [0], "spill"), (0, [0, 1], "shift")],
    [(1, [0], "partial"), (0, [1], "exact"), (2, [], "background"), (1, [0, 1], "spill")],
    [(0, [0], "shift"), (1, [0], "exact"), (2, [], "spill")],
    [(1, [1], "shift"), (0, [0], "spill"), (2, [], "empty"), (0, [0, 1], "partial")],
    [(1, [0], "background"), (0, [0], "shift")],
]
NUM_OBJECTS = 3  # two nameable objects + one distractor per video


def _rle(mask: np.ndarray) -> dict:
    r = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(r["size"][0]), int(r["size"][1])], "counts": r["counts"].decode("ascii")}


def _ellipse(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[:h, :w]
    cy, cx = rng.uniform(0, h), rng.uniform(0, w)
    ry, rx = rng.uniform(1.5, h / 2.5), rng.uniform(1.5, w / 2.5)
    return ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1


def _objects(rng: np.random.Generator, h: int, w: int, n: int) -> list[list[np.ndarray | None]]:
    """NUM_OBJECTS disjoint tracks (earlier objects win contested pixels); None = absent in that frame."""
    tracks: list[list[np.ndarray | None]] = [[] for _ in range(NUM_OBJECTS)]
    for _ in range(n):
        taken = np.zeros((h, w), dtype=bool)
        for o in range(NUM_OBJECTS):
            m = _ellipse(rng, h, w) & ~taken
            absent = rng.random() < 0.2 or not m.any()
            tracks[o].append(None if absent else m)
            if not absent:
                taken |= m
    return tracks


def _prediction(rng: np.random.Generator, style: str, gt: np.ndarray, distractor: np.ndarray) -> np.ndarray:
    h, w = gt.shape
    if style == "exact":
        return gt.copy()
    if style == "shift":
        return np.roll(np.roll(gt, int(rng.integers(-2, 3)), 0), int(rng.integers(-2, 3)), 1)
    if style == "partial":
        return gt & (rng.random((h, w)) < 0.7)
    if style == "spill":
        return gt | distractor | _ellipse(rng, h, w)
    if style == "empty":
        return np.zeros((h, w), dtype=bool) if rng.random() < 0.5 else gt.copy()
    if style == "background":
        return np.zeros((h, w), dtype=bool)
    raise ValueError(style)


def write_fixture(out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    root, pred_root = out / "ReVOS", out / "pred"
    rng = np.random.default_rng(SEED)
    videos, mask_dict, foreground = {}, {}, {}
    anno = 100
    for (video, (h, w), frames), exps in zip(VIDEOS, EXPRESSIONS):
        n = len(frames)
        frame_dir = root / "JPEGImages" / video
        frame_dir.mkdir(parents=True, exist_ok=True)
        for f in frames:
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(frame_dir / f"{f}.jpg", quality=80)
        tracks = _objects(rng, h, w, n)
        anno_ids = list(range(anno, anno + NUM_OBJECTS))
        anno += NUM_OBJECTS
        for a, track in zip(anno_ids, tracks):
            mask_dict[str(a)] = [None if m is None else _rle(m) for m in track]
        fg = [np.zeros((h, w), dtype=bool) for _ in range(n)]
        for track in tracks:
            for k, m in enumerate(track):
                if m is not None:
                    fg[k] |= m
        foreground[video] = {"masks_rle": [_rle(m) for m in fg], "foreground_ratio": [float(m.mean()) for m in fg]}
        expressions = {}
        for e, (type_id, objs, style) in enumerate(exps):
            expressions[str(e)] = {"exp": f"expression {e} of {video}", "obj_id": list(objs),
                                   "anno_id": [anno_ids[o] for o in objs], "type_id": type_id}
            exp_dir = pred_root / video / str(e)
            exp_dir.mkdir(parents=True, exist_ok=True)
            for k, f in enumerate(frames):
                gt = np.zeros((h, w), dtype=bool)
                for o in objs:
                    if tracks[o][k] is not None:
                        gt |= tracks[o][k]
                distractor = tracks[-1][k] if tracks[-1][k] is not None else np.zeros((h, w), dtype=bool)
                pred = _prediction(rng, style, gt, distractor)
                Image.fromarray(pred.astype(np.uint8)).save(exp_dir / f"{f}.png")  # values 0/1
        videos[video] = {"vid_id": len(videos), "height": h, "width": w, "frames": frames, "expressions": expressions}
    (root / "meta_expressions_valid_.json").write_text(json.dumps({"videos": videos}))
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    (root / "mask_dict_foreground.json").write_text(json.dumps(foreground))
    return root, pred_root


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.data.visa_parity.make_fixture", description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", default="visa_parity_fixture", help="where the fixture is written (created)")
    print(write_fixture(ap.parse_args().out_dir))
