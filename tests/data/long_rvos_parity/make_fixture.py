"""Write the Long-RVOS parity fixture: the release's <split>/ layout and prediction PNG folders
(README.md beside this file).

    python make_fixture.py <fixture root> <predictions dir>
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np

VIDEOS = {"vid_a": (24, 32, 6), "vid_b": (20, 20, 5), "vid_c": (16, 24, 4), "vid_d": (16, 16, 3)}  # (H, W, frames)
KINDS = ["static", "dynamic", "static+dynamic", "static", "dynamic"]


def _blob(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    m = np.zeros((h, w), np.uint8)
    y0, x0 = int(rng.integers(0, h - 4)), int(rng.integers(0, w - 4))
    m[y0:y0 + int(rng.integers(3, h - y0 + 1)), x0:x0 + int(rng.integers(3, w - x0 + 1))] = 1
    return m


def write_fixture(root: Path, split: str = "valid") -> None:
    rng = np.random.default_rng(20261207)
    base = Path(root) / split
    videos = {}
    k = 0
    for video, (h, w, n) in VIDEOS.items():
        frames = [f"{t:05d}" for t in range(n)]
        (base / "JPEGImages" / video).mkdir(parents=True, exist_ok=True)
        for f in frames:
            cv2.imwrite(str(base / "JPEGImages" / video / f"{f}.jpg"), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
        expressions = {}
        for obj in range(2):
            folder = base / "Annotations" / video / str(obj)
            folder.mkdir(parents=True, exist_ok=True)
            for t, f in enumerate(frames):
                if rng.random() < 0.3:
                    continue  # no PNG: the object is absent there
                value = 255 if obj == 0 else 1  # 0/255 and 0/1 PNGs
                cv2.imwrite(str(folder / f"{f}.png"), _blob(rng, h, w) * value)
            for e in range(2):
                expressions[str(len(expressions))] = {"exp": f"object {obj} description {e}", "obj_id": obj,
                                                      "type": KINDS[k % len(KINDS)]}
                k += 1
        videos[video] = {"frames": frames, "expressions": expressions}
    (base / "meta_expressions.json").write_text(json.dumps({"videos": videos}))


def write_predictions(root: Path, out: Path, split: str = "valid") -> None:
    """out/<video>/<exp_id>/<frame>.png (0/255): the GT redrawn, shifted, emptied or a random box;
    some frame PNGs absent (empty frames), vid_c/1's first frame absent (dropped), vid_b/3 absent
    (its video's folder exists: dropped), vid_d without a folder (every expression scores 0)."""
    rng = np.random.default_rng(20261208)
    base = Path(root) / split
    meta = json.loads((base / "meta_expressions.json").read_text())["videos"]
    k = 0
    for video, info in meta.items():
        h, w, _ = VIDEOS[video]
        if video == "vid_d":
            continue
        for exp_id, exp in info["expressions"].items():
            k += 1
            if (video, exp_id) == ("vid_b", "3"):
                continue
            folder = Path(out) / video / exp_id
            folder.mkdir(parents=True, exist_ok=True)
            for t, f in enumerate(info["frames"]):
                if (video, exp_id) == ("vid_c", "1") and t == 0:
                    continue
                gt_path = base / "Annotations" / video / str(exp["obj_id"]) / f"{f}.png"
                gt = (cv2.imread(str(gt_path), cv2.IMREAD_GRAYSCALE) > 0).astype(np.uint8) if gt_path.exists() \
                    else np.zeros((h, w), np.uint8)
                kind = (k + t) % 5
                if kind == 4 and t > 0:
                    continue  # absent PNG: an empty frame
                m = gt if kind == 0 else np.roll(gt, 2, axis=1) if kind == 1 else np.zeros_like(gt) if kind == 2 \
                    else _blob(rng, h, w)
                cv2.imwrite(str(folder / f"{f}.png"), m * 255)


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]))
    write_predictions(Path(sys.argv[1]), Path(sys.argv[2]))
