"""Deterministic Ref-DAVIS17 fixture in ReferFormer's layout (wjn922/ReferFormer docs/data.md after
tools/data/convert_davis_to_ytvos.py), the DAVIS folder davis2017-evaluation reads, and a
prediction folder written as ReferFormer's inference_davis.py writes it.

write_fixture(dir) -> (root, pred):
  root/meta_expressions/valid/meta_expressions.json  {"videos": {video: {"frames", "expressions"}}},
    4 expressions per object in ReferFormer's order (annot1 first-frame, annot1 full-video,
    annot2 first-frame, annot2 full-video), exp ids "0", "1", ...
  root/valid/JPEGImages/<video>/<frame>.jpg, root/valid/Annotations/<video>/<frame>.png (palette
    PNGs: DAVIS 2017 Annotations_unsupervised, object ids 1..n, void 255)
  root/DAVIS/{JPEGImages,Annotations_unsupervised}/480p/<video>/..., root/DAVIS/ImageSets/2017/val.txt:
    the same files where davis2017-evaluation's `--davis_path` looks
  pred/valid/anno_<k>/<video>/<frame index:05d>.png: label maps made from per-object probability
    maps by ReferFormer's rule (scores < 0.5 set to 0, background 0.1, argmax; so overlapping
    objects go to the higher score), saved with the GT's palette.
Cases (CASES): a video with fewer expression objects than GT objects, one with more, a GT object
absent from the first frame (still an object) and one whose id exceeds the first frame's maximum
(ignored by davis2017), void pixels, an object ReferFormer never predicts (so the label map's
maximum is below the object count), a video left empty, overlapping objects.
numpy default_rng(20261206).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

SEED = 20261206
# video -> (frames, H, W, GT object ids in the first frame, expression objects)
VIDEOS = {"bike-packing": (5, 24, 32, 2, 2), "cows": (4, 20, 28, 3, 2), "dogs-jump": (3, 22, 30, 2, 3)}
CASES = {"object_never_predicted": ("anno_1", "bike-packing", 2), "empty_video": ("anno_2", "cows"),
         "top_label_never_wins": ("anno_3", "dogs-jump", 3), "gt_late_object": ("cows", 4),
         "gt_object_absent_from_first_frame": ("cows", 2)}


def davis_palette() -> list[int]:
    """The DAVIS (PASCAL VOC) palette, 256 RGB entries flattened: entry k's bits spread over R, G, B."""
    out = []
    for k in range(256):
        r = g = b = 0
        c = k
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        out += [r, g, b]
    return out


def _blob(rng, h, w):
    yy, xx = np.mgrid[:h, :w]
    cy, cx = rng.uniform(0, h), rng.uniform(0, w)
    ry, rx = rng.uniform(3, h / 2), rng.uniform(3, w / 2)
    return ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1


def _save_palette(array: np.ndarray, path: Path, palette: list[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.fromarray(array.astype(np.uint8), mode="P")
    img.putpalette(palette)
    img.save(path)


def referformer_label_map(scores: np.ndarray) -> np.ndarray:
    """inference_davis.py's label map: scores [num_obj, T, H, W] in [0, 1] -> [T, H, W] uint8,
    value = 1 + the object of highest score >= 0.5, 0 where none reaches it (background 0.1)."""
    scores = scores.copy()
    scores[scores < 0.5] = 0.0
    background = 0.1 * np.ones((1, *scores.shape[1:]))
    return np.argmax(np.concatenate([background, scores], axis=0), axis=0).astype(np.uint8)


def write_fixture(base: str | Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(SEED)
    base = Path(base)
    root, pred = base / "ref_davis", base / "pred"
    palette = davis_palette()
    videos = {}
    for video, (n_frames, h, w, n_gt, n_obj) in VIDEOS.items():
        frames = [f"{k:05d}" for k in range(n_frames)]
        gt = np.zeros((n_frames, h, w), np.uint8)
        for t in range(n_frames):
            for obj in range(1, n_gt + 1):
                if video == "cows" and obj == 2 and t == 0:
                    continue  # absent from the first frame: still object 2 (the first frame holds 3)
                gt[t][_blob(rng, h, w) & (gt[t] == 0)] = obj
            if video == "cows" and t > 0:
                gt[t][_blob(rng, h, w) & (gt[t] == 0)] = 4  # above the first frame's maximum: ignored
            if t % 2 == 1:
                gt[t, :2, :] = 255  # void band
        for t, f in enumerate(frames):
            for sub in (root / "valid" / "JPEGImages" / video, root / "DAVIS" / "JPEGImages" / "480p" / video):
                sub.mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(sub / f"{f}.jpg")
            for sub in (root / "valid" / "Annotations" / video, root / "DAVIS" / "Annotations_unsupervised" / "480p" / video):
                _save_palette(gt[t], sub / f"{f}.png", palette)
        expressions, exp_id = {}, 0
        for obj in range(1, n_obj + 1):
            for kind in ("annot1 first", "annot1 full", "annot2 first", "annot2 full"):
                expressions[str(exp_id)] = {"exp": f"{kind}: object {obj} of {video}", "obj_id": str(obj)}
                exp_id += 1
        videos[video] = {"expressions": expressions, "frames": frames}
        for anno in range(4):
            scores = np.zeros((n_obj, n_frames, h, w))
            for obj in range(n_obj):
                for t in range(n_frames):
                    base_mask = (gt[t] == obj + 1) if obj < n_gt else _blob(rng, h, w)
                    noisy = base_mask ^ (rng.random((h, w)) < 0.08)
                    scores[obj, t] = np.where(noisy, rng.uniform(0.5, 1.0, (h, w)), rng.uniform(0.0, 0.5, (h, w)))
            if (f"anno_{anno}", video) == CASES["empty_video"]:
                scores[:] = 0.0
            for case in ("object_never_predicted", "top_label_never_wins"):
                if CASES[case][:2] == (f"anno_{anno}", video):
                    scores[CASES[case][2] - 1] = np.minimum(scores[CASES[case][2] - 1], 0.49)
            labels = referformer_label_map(scores)
            for t in range(n_frames):
                _save_palette(labels[t], pred / "valid" / f"anno_{anno}" / video / f"{t:05d}.png", palette)
    meta = root / "meta_expressions" / "valid"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "meta_expressions.json").write_text(json.dumps({"videos": videos}))
    sets = root / "DAVIS" / "ImageSets" / "2017"
    sets.mkdir(parents=True, exist_ok=True)
    (sets / "val.txt").write_text("".join(f"{v}\n" for v in VIDEOS))
    return root, pred
