"""Write the GroundingSuite-Eval parity fixture: the release's GroundingSuite-Eval.jsonl with its
images, and a prediction JSONL for both modes (README.md beside this file).

    python make_fixture.py <fixture root> <predictions dir>
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np
from pycocotools import mask as cocomask

SIZES = [(30, 40), (24, 24), (36, 20)]  # (H, W) of the three images


def _rle(mask: np.ndarray) -> dict:
    rle = cocomask.encode(np.asfortranarray(mask.astype(np.uint8)))
    rle["counts"] = rle["counts"].decode()
    return rle


def _box_of(mask: np.ndarray) -> list[float]:
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return [0.0, 0.0, 0.0, 0.0]
    return [float(xs.min()) + 0.25, float(ys.min()) - 0.5, float(xs.max()) + 1.0, float(ys.max()) + 0.75]


def write_fixture(root: Path) -> list[dict]:
    """root/GroundingSuite-Eval.jsonl and root/unlabeled2017/<n>.jpg; returns the lines with their masks."""
    rng = np.random.default_rng(20261207)
    root = Path(root)
    (root / "unlabeled2017").mkdir(parents=True, exist_ok=True)
    images = []
    for k, (h, w) in enumerate(SIZES):
        name = f"unlabeled2017/{k:012d}.jpg"
        cv2.imwrite(str(root / name), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
        images.append((name, h, w))
    lines, out = [], []
    for idx in range(14):
        name, h, w = images[idx % 3]
        m = np.zeros((h, w), np.uint8)
        if idx != 9:  # idx 9: an empty GT mask
            y0, x0 = int(rng.integers(0, h - 6)), int(rng.integers(0, w - 6))
            m[y0:y0 + int(rng.integers(3, h - y0)), x0:x0 + int(rng.integers(3, w - x0))] = 1
        line = {"idx": idx, "image_path": name, "class_id": 1 + idx % 4, "label": f"thing {idx}",
                "caption": f"A caption about thing {idx}.", "box": _box_of(m), "segmentation": _rle(m)}
        lines.append(line)
        out.append({**line, "mask": m})
    (root / "GroundingSuite-Eval.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    return out


def write_predictions(root: Path, out: Path) -> None:
    """out/model_predictions.jsonl: per GT line a box and a segmentation (the GT's shifted, grown, a random
    box, empty), keyed "box" / "segmentation" or "predicted_box" / "predicted_segmentation"; idx 5
    missing, idx 6 with an empty box and no segmentation, idx 7 twice (the last wins), idx 8 given as
    8.0, idx 10 a box with x2 < x1."""
    root, out = Path(root), Path(out)
    rng = np.random.default_rng(20261208)
    gt = [json.loads(l) for l in (root / "GroundingSuite-Eval.jsonl").read_text().splitlines()]
    preds = []
    for line in gt:
        idx = line["idx"]
        m = cocomask.decode(line["segmentation"])
        h, w = m.shape
        kind = idx % 4
        if kind == 0:
            pm = np.roll(m, 1, axis=0)
        elif kind == 1:
            pm = cv2.dilate(m, np.ones((3, 3), np.uint8))
        elif kind == 2:
            pm = np.zeros_like(m)
            pm[2:h // 2, 3:w // 2] = 1
        else:
            pm = np.zeros_like(m)
        box = [v + float(rng.uniform(-3, 3)) for v in line["box"]]
        if idx == 5:
            continue
        if idx == 6:
            preds.append({"idx": idx, "box": [], "segmentation": None})
            continue
        if idx == 7:
            preds.append({"idx": idx, "box": [0.0, 0.0, 1.0, 1.0], "segmentation": _rle(np.zeros_like(m))})
        if idx == 10:
            box = [box[2], box[1], box[0], box[3]]
        keys = ("box", "segmentation") if idx % 2 == 0 else ("predicted_box", "predicted_segmentation")
        preds.append({"idx": float(idx) if idx == 8 else idx, keys[0]: box, keys[1]: _rle(pm)})
    out.mkdir(parents=True, exist_ok=True)
    (out / "model_predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]))
    write_predictions(Path(sys.argv[1]), Path(sys.argv[2]))
