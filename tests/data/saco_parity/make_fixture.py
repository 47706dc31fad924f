"""A tiny SA-Co/Gold subset in the release's exact format, and predictions in SAM 3's dump layout.

Usage::

    python make_fixture.py <gt dir> <predictions dir>

write_fixture(gt_dir): gold_metaclip_merged_{a,b,c}_release_test.json (COCO-style: images = the
(image, noun phrase) pairs with text_input, is_instance_exhaustive, is_pixel_exhaustive;
annotations with compressed RLE, iscrowd, normalized bbox; categories [{"id": 1}]) and the JPEGs
under <gt dir>/images/ (file_name as MetaCLIP's "1/1001/metaclip_....jpeg"). 16 pairs over 5
images: positives with 1-3 instances, negatives, annotators that disagree (positive for one,
negative for another; 1 vs 2 instances), a crowd annotation (ignored), a pair not exhaustive for
annotator a and one not exhaustive for annotator b, an annotation of an unknown category.
write_predictions(pred_dir): <pred>/gold_metaclip_nps/dumps/gold_metaclip_nps/coco_predictions_segm.json
(COCO results: image_id, category_id, bbox, score, segmentation RLE): good, shifted and duplicate
instances, scores below, at and above 0.5, a prediction of another category, one at another size,
one for an image id outside the GT, pairs with no prediction.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

SUBSET_FILES = "gold_metaclip_merged_{}_release_test.json"
DUMP = "gold_metaclip_nps/dumps/gold_metaclip_nps/coco_predictions_segm.json"
IMAGES = [(24, 32), (30, 20), (16, 16), (40, 28), (20, 36)]  # (H, W)


def rle(box, hw):
    from pycocotools import mask as mask_utils

    m = np.zeros(hw, np.uint8)
    y0, y1, x0, x1 = box
    m[y0:y1, x0:x1] = 1
    r = mask_utils.encode(np.asfortranarray(m))
    return {"size": [int(hw[0]), int(hw[1])], "counts": r["counts"].decode("ascii")}


def nbox(box, hw):
    y0, y1, x0, x1 = box
    return [x0 / hw[1], y0 / hw[0], (x1 - x0) / hw[1], (y1 - y0) / hw[0]]


# pair: (image, noun phrase, {annotator: [(box, iscrowd[, category])]}, {annotator: exhaustive})
PAIRS = [
    (0, "dog", {"a": [((2, 10, 2, 12), 0), ((12, 20, 15, 28), 0)], "b": [((2, 11, 2, 12), 0), ((12, 20, 16, 28), 0)],
                "c": [((2, 20, 2, 28), 1)]}, {}),
    (0, "cat", {}, {}),
    (0, "bird", {}, {}),
    (1, "car", {k: [((0, 8, 0, 8), 0), ((10, 18, 2, 12), 0), ((20, 28, 4, 16), 0)] for k in "abc"}, {}),
    (1, "wheel", {"a": [((5, 9, 5, 9), 0)], "c": [((5, 9, 5, 10), 0)]}, {}),
    (1, "tree", {k: [((12, 26, 10, 18), 0)] for k in "abc"}, {}),
    (2, "person", {k: [((2, 10, 2, 10), 0)] for k in "abc"}, {"a": 0}),
    (2, "hat", {k: [((0, 4, 4, 12), 0)] for k in "abc"}, {"b": 0}),
    (2, "shoe", {"a": [((8, 14, 8, 14), 1)], "b": [((8, 14, 8, 14), 0)]}, {}),
    (3, "cup", {k: [((2, 12, 2, 12), 0), ((20, 30, 10, 20), 0)] for k in "abc"}, {}),
    (3, "saucer", {k: [((30, 38, 4, 24), 0)] for k in "abc"}, {}),
    (4, "lamp", {k: [((2, 16, 2, 8), 0)] for k in "abc"}, {}),
    (4, "sofa", {}, {}),
    (4, "rug", {"a": [((10, 18, 2, 14), 0), ((10, 18, 16, 30), 0)], "b": [((10, 18, 2, 30), 0)],
                "c": [((10, 18, 2, 14), 0), ((10, 18, 16, 30), 0)]}, {}),
    (4, "vase", {"a": [((2, 8, 20, 26), 0), ((12, 16, 20, 26), 0, 5)], "b": [((2, 8, 20, 26), 0)],
                 "c": [((2, 8, 20, 27), 0)]}, {}),
    (3, "spoon", {"b": [((14, 18, 2, 24), 0)]}, {}),
]

# predictions: (pair index, box, score[, category, size])
PREDS = [
    (0, (2, 10, 2, 12), 0.93), (0, (12, 20, 14, 27), 0.81), (0, (0, 4, 0, 4), 0.3),
    (2, (4, 10, 4, 10), 0.7), (2, (0, 3, 0, 3), 0.2),
    (3, (0, 8, 0, 8), 0.99), (3, (10, 17, 2, 11), 0.88), (3, (22, 28, 8, 16), 0.61), (3, (0, 8, 1, 8), 0.6),
    (5, (12, 26, 10, 18), 0.5), (5, (0, 5, 0, 5), 0.49999),
    (6, (2, 10, 2, 10), 0.9), (7, (0, 4, 4, 12), 0.9),
    (8, (8, 14, 9, 14), 0.9),
    (9, (2, 12, 2, 12), 0.95), (9, (20, 30, 10, 20), 0.9, 2), (9, (20, 29, 10, 20), 0.55),
    (10, (30, 38, 4, 24), 0.8, 1, (39, 28)),
    (11, (2, 16, 2, 8), 0.4), (11, (2, 15, 2, 8), 0.1),
    (13, (10, 18, 2, 14), 0.9), (13, (10, 18, 16, 30), 0.85),
    (14, (2, 8, 20, 26), 0.77), (14, (12, 16, 20, 26), 0.7),
    (15, (14, 18, 2, 24), 0.65),
]


def write_fixture(gt_dir: Path) -> None:
    import cv2

    gt_dir = Path(gt_dir)
    files = []
    for i, (h, w) in enumerate(IMAGES):
        name = f"1/100{i}/metaclip_1_100{i}_{i:024x}.jpeg"
        files.append(name)
        path = gt_dir / "images" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        img = np.random.default_rng(20261207 + i).integers(0, 255, (h, w, 3), dtype=np.uint8)
        cv2.imwrite(str(path), img)
    for ann in "abc":
        images, annotations = [], []
        for k, (i, text, inst, exh) in enumerate(PAIRS):
            h, w = IMAGES[i]
            images.append({"id": 10000000 + k, "file_name": files[i], "text_input": text, "width": w, "height": h,
                           "queried_category": str(k), "is_instance_exhaustive": exh.get(ann, 1),
                           "is_pixel_exhaustive": 1})
            for item in inst.get(ann, []):
                box, crowd = item[0], item[1]
                annotations.append({"id": len(annotations) + 1, "image_id": 10000000 + k, "source": "manual",
                                    "area": (box[1] - box[0]) * (box[3] - box[2]) / (h * w), "bbox": nbox(box, (h, w)),
                                    "segmentation": rle(box, (h, w)), "category_id": item[2] if len(item) > 2 else 1,
                                    "iscrowd": crowd})
        data = {"info": {}, "images": images, "annotations": annotations,
                "categories": [{"id": 1, "name": "object"}]}
        (gt_dir / SUBSET_FILES.format(ann)).write_text(json.dumps(data))


def write_predictions(pred_dir: Path) -> None:
    out = []
    for item in PREDS:
        k, box, score = item[:3]
        cat = item[3] if len(item) > 3 else 1
        hw = item[4] if len(item) > 4 else IMAGES[PAIRS[k][0]]
        y0, y1, x0, x1 = box
        out.append({"image_id": 10000000 + k, "category_id": cat, "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "score": score, "segmentation": rle(box, hw)})
    out.append({"image_id": 99999, "category_id": 1, "bbox": [0, 0, 2, 2], "score": 0.9,
                "segmentation": rle((0, 2, 0, 2), (8, 8))})
    path = Path(pred_dir) / DUMP
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]))
    write_predictions(Path(sys.argv[2]))
