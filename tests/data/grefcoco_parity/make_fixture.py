"""A tiny gRefCOCO fixture in the release layout, and a model's predictions in the precomputed layout.

write_fixture(root): ReLA's ``datasets`` layout (docs/benchmarks/grefcoco.md)::

    root/grefcoco/grefs(unc).json   refs: one, several and no target ([-1], no_target true); splits val, testA, testB, train
    root/grefcoco/instances.json    5 images of different sizes; polygons with float and integer coordinates,
                                    invalid polygons (4 and 7 coordinates) beside valid ones, a crowd RLE annotation
    root/images/train2014/COCO_train2014_<id>.jpg

write_predictions(root, out): out/predictions.json + out/masks/<sent_id>.png at 480 x 480 (ReLA's
size): per sentence a mask (the GT redrawn, shifted, grown, empty, a box, another object) and
[s_target, s_no_target] scores covering every case (TP, FN with and without a mask, FP with a mask,
a tie). Deterministic (numpy default_rng(20261207)); nothing binary is committed.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SIZE = 480
IMAGES = {1: (640, 427), 2: (500, 375), 3: (333, 500), 4: (480, 480), 5: (300, 200)}  # id: (W, H)


def _polygon(rng, cx, cy, r, n=8, integer=False):
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    radii = r * rng.uniform(0.6, 1.0, n)
    pts = np.stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)], 1).reshape(-1)
    return [int(v) for v in np.round(pts)] if integer else [round(float(v), 2) for v in pts]


def _annotations(rng):
    anns, next_id = [], 100
    plan = {1: 3, 2: 3, 3: 4, 4: 2, 5: 2}
    for image_id, count in plan.items():
        w, h = IMAGES[image_id]
        for k in range(count):
            cx, cy = rng.uniform(0.25, 0.75) * w, rng.uniform(0.25, 0.75) * h
            r = rng.uniform(0.1, 0.25) * min(w, h)
            segm = [_polygon(rng, cx, cy, r, integer=(image_id == 3 and k == 0))]
            if k == 1:
                segm.append(_polygon(rng, cx + r, cy - r / 2, r / 2, n=5))
            if image_id == 4 and k == 0:  # dropped by ReLA's loader: < 6 coordinates, odd length
                segm = [[10.0, 10.0, 60.0, 10.0], segm[0], [5.0, 5.0, 90.0, 5.0, 90.0, 70.0, 5.0]]
            anns.append({"id": next_id, "image_id": image_id, "category_id": 1 + k, "iscrowd": 0,
                         "segmentation": segm, "area": 0.0, "bbox": [cx - r, cy - r, 2 * r, 2 * r]})
            next_id += 1
    # a crowd annotation (RLE, uncompressed counts) on image 2: ReLA's loader drops it
    w, h = IMAGES[2]
    m = np.zeros((h, w), np.uint8)
    m[20:80, 30:200] = 1
    from pycocotools import mask as coco_mask

    runs, last, count = [], 0, 0
    for v in m.flatten(order="F"):
        if v != last:
            runs.append(count)
            last, count = v, 0
        count += 1
    runs.append(count)
    assert coco_mask.decode(coco_mask.frPyObjects({"size": [h, w], "counts": runs}, h, w)).sum() == m.sum()
    anns.append({"id": 999, "image_id": 2, "category_id": 9, "iscrowd": 1, "segmentation": {"size": [h, w], "counts": runs},
                 "area": float(m.sum()), "bbox": [30, 20, 170, 60]})
    return anns


# (image_id, ann ids by position in that image, split, sentences); [] = no target
REFS = [
    (1, [0], "val", 2), (1, [1, 2], "val", 1), (1, [], "val", 2),
    (2, [0, "crowd"], "val", 1), (2, [], "val", 1),
    (3, [0], "val", 2), (3, [1, 2, 3], "val", 1),
    (4, [0], "val", 1),
    (5, [], "val", 1), (5, [1], "val", 2),
    (2, [2], "testA", 1), (4, [], "testA", 1), (3, [1, 3], "testB", 1), (1, [], "testB", 1), (5, [0], "train", 1),
]


def write_fixture(root: str | Path) -> Path:
    from PIL import Image

    root = Path(root)
    rng = np.random.default_rng(20261207)
    (root / "grefcoco").mkdir(parents=True, exist_ok=True)
    (root / "images" / "train2014").mkdir(parents=True, exist_ok=True)
    images = []
    for image_id, (w, h) in IMAGES.items():
        name = f"COCO_train2014_{image_id:012d}.jpg"
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(root / "images" / "train2014" / name)
        images.append({"id": image_id, "file_name": name, "height": h, "width": w})
    anns = _annotations(rng)
    by_image = {i: [a for a in anns if a["image_id"] == i and not a["iscrowd"]] for i in IMAGES}
    refs, sent_id = [], 5000
    for ref_id, (image_id, picks, split, n_sents) in enumerate(REFS):
        ids = [999 if p == "crowd" else by_image[image_id][p]["id"] for p in picks] or [-1]
        sents = []
        for j in range(n_sents):
            raw = f"The thing {ref_id}.{j} On the Left " if j % 2 else f"object number {ref_id} sentence {j}"
            sents.append({"sent_id": sent_id, "sent": raw.strip().lower(), "raw": raw, "tokens": raw.split()})
            sent_id += 1
        refs.append({"ref_id": 700 + ref_id, "image_id": image_id, "ann_id": ids, "split": split,
                     "category_id": [1] if ids != [-1] else [-1], "sent_ids": [s["sent_id"] for s in sents],
                     "sentences": sents, "no_target": ids == [-1]})
    (root / "grefcoco" / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": anns, "categories": [{"id": i, "name": f"c{i}"} for i in range(1, 10)]}))
    (root / "grefcoco" / "grefs(unc).json").write_text(json.dumps(refs))
    return root


def _draw(polys, w, h):
    from pycocotools import mask as coco_mask

    scaled = [np.asarray(p, float).reshape(-1, 2) * [SIZE / w, SIZE / h] for p in polys if len(p) >= 6 and len(p) % 2 == 0]
    return coco_mask.decode(coco_mask.frPyObjects([s.reshape(-1) for s in scaled], SIZE, SIZE)).any(axis=2)


def write_predictions(root: str | Path, out: str | Path) -> Path:
    """A precomputed folder for every sentence of the fixture at `root` (module docstring)."""
    import cv2

    root, out = Path(root), Path(out)
    (out / "masks").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261208)
    anns = {a["id"]: a for a in json.loads((root / "grefcoco" / "instances.json").read_text())["annotations"]}
    sizes = {i: wh for i, wh in IMAGES.items()}
    entries, k = [], 0
    for ref in json.loads((root / "grefcoco" / "grefs(unc).json").read_text()):
        w, h = sizes[ref["image_id"]]
        objs = [anns[a] for a in ref["ann_id"] if a != -1 and not anns[a]["iscrowd"]]
        gt = np.zeros((SIZE, SIZE), bool)
        for a in objs:
            gt |= _draw(a["segmentation"], w, h)
        other = [a for a in anns.values() if a["image_id"] == ref["image_id"] and not a["iscrowd"] and a not in objs]
        for sent in ref["sentences"]:
            mode = k % 7
            if mode == 0:
                mask = gt.copy()
            elif mode == 1:
                mask = np.roll(gt, int(rng.integers(2, 8)), axis=1)
            elif mode == 2:
                mask = cv2.dilate(gt.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
            elif mode == 3:
                mask = np.zeros_like(gt)
            elif mode == 4:
                mask = np.zeros_like(gt)
                mask[100:300, 50:250] = True
            elif mode == 5:
                mask = _draw(other[0]["segmentation"], w, h) if other else np.roll(gt, 40, axis=0)
            else:
                mask = np.roll(gt, int(rng.integers(1, 3)), axis=0)
            if ref["ann_id"] == [-1]:
                nt = [[0.2, 0.8], [0.7, 0.3], [-1.0, 3.0], [0.6, 0.1]][k % 4]  # TP, FN, TP, FN (modes vary the mask)
            else:
                nt = [[2.0, -1.0], [0.1, 0.9], [0.5, 0.5], [1.5, 0.2], [0.3, 0.2]][k % 5]  # TN, FP, tie (TN), TN, TN
            cv2.imwrite(str(out / "masks" / f"{sent['sent_id']}.png"), mask.astype(np.uint8) * 255)
            entries.append({"sent_id": sent["sent_id"], "nt_label": nt, "mask": f"masks/{sent['sent_id']}.png"})
            k += 1
    (out / "predictions.json").write_text(json.dumps(entries))
    return out


if __name__ == "__main__":
    import sys

    write_predictions(write_fixture(sys.argv[1]), sys.argv[2])
