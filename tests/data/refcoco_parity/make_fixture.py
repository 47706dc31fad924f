"""Deterministic RefCOCO/+/g fixture in the exact REFER layout LISA reads, and 0/1 prediction PNGs.

write_fixture(dir) -> (root, pred):
  root/refcoco/refs(unc).p, root/refcoco/refs(google).p, root/refcoco/instances.json,
  root/refcoco+/refs(unc).p + instances.json, root/refcocog/refs(umd).p, refs(google).p + instances.json,
  root/images/mscoco/images/train2014/COCO_train2014_<id:012d>.jpg
  pred/<sent_id>.png: a 0/1 PNG at the image size for every sentence (empty, full, the union of
  the annotation's polygons, or a noisy copy of it).
The refs pickles hold plain lists and dicts (pickle protocol 2, as REFER's files). Annotations:
one or several polygons (some overlapping: LISA's summed GT gives 2 there), a compressed-RLE
annotation, an empty segmentation, and images without refs. numpy default_rng(20261204).
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
from PIL import Image

SEED = 20261204
IMAGE_DIR = ("images", "mscoco", "images", "train2014")
# dataset -> splitBy -> the ref splits its refs take
SPLITS = {
    "refcoco": {"unc": ["train", "val", "testA", "testB"], "google": ["train", "val", "test"]},
    "refcoco+": {"unc": ["train", "val", "testA", "testB"]},
    "refcocog": {"umd": ["train", "val", "test"], "google": ["train", "val"]},
}


def _polygon(rng, h, w):
    cx, cy = rng.uniform(2, w - 2), rng.uniform(2, h - 2)
    n = int(rng.integers(3, 8))
    ang = np.sort(rng.uniform(0, 2 * np.pi, n))
    rad = rng.uniform(2, max(3.0, min(h, w) / 2), n)
    xs = np.clip(cx + rad * np.cos(ang), 0, w)
    ys = np.clip(cy + rad * np.sin(ang), 0, h)
    return [round(float(v), 2) for xy in zip(xs, ys) for v in xy]


def _rle(rng, h, w):
    from pycocotools import mask as coco_mask

    m = np.zeros((h, w), np.uint8, order="F")
    y0, x0 = int(rng.integers(0, h // 2)), int(rng.integers(0, w // 2))
    m[y0:y0 + int(rng.integers(2, h // 2)), x0:x0 + int(rng.integers(2, w // 2))] = 1
    r = coco_mask.encode(np.asfortranarray(m))
    return {"size": [h, w], "counts": r["counts"].decode("ascii")}


def write_fixture(base: str | Path) -> tuple[Path, Path]:
    from pycocotools import mask as coco_mask

    rng = np.random.default_rng(SEED)
    base = Path(base)
    root, pred = base / "refer_seg", base / "pred"
    image_dir = root.joinpath(*IMAGE_DIR)
    image_dir.mkdir(parents=True, exist_ok=True)
    pred.mkdir(parents=True, exist_ok=True)
    images, sizes = [], {}
    for k in range(12):
        image_id = 100 + 7 * k
        h, w = int(rng.integers(14, 40)), int(rng.integers(14, 48))
        name = f"COCO_train2014_{image_id:012d}.jpg"
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(image_dir / name, quality=90)
        images.append({"id": image_id, "file_name": name, "height": h, "width": w})
        sizes[image_id] = (h, w)
    ann_id, sent_id, ref_id = 5000, 1, 1
    for ds, by_split in SPLITS.items():
        anns = []
        for im in images[:10]:  # images 10 and 11 have no annotation and no ref
            h, w = sizes[im["id"]]
            for j in range(int(rng.integers(1, 4))):
                kind = rng.random()
                if kind < 0.1:
                    seg = []
                elif kind < 0.2:
                    seg = [_rle(rng, h, w)]
                else:
                    seg = [_polygon(rng, h, w) for _ in range(int(rng.integers(1, 4)))]  # several may overlap
                anns.append({"id": ann_id, "image_id": im["id"], "category_id": int(rng.integers(1, 5)),
                             "segmentation": seg, "area": 1.0, "bbox": [0, 0, 1, 1], "iscrowd": 0})
                ann_id += 1
        (root / ds).mkdir(parents=True, exist_ok=True)
        (root / ds / "instances.json").write_text(json.dumps(
            {"images": images, "annotations": anns, "categories": [{"id": c, "name": f"c{c}"} for c in range(1, 5)]}))
        for split_by, splits in by_split.items():
            refs = []
            for ann in anns:
                if rng.random() < 0.25:
                    continue
                sents = []
                for _ in range(int(rng.integers(1, 4))):
                    words = [str(w) for w in rng.choice(["Left", "man", "red", "car ", "the", "Dog", "far"], 3)]
                    sents.append({"tokens": words, "raw": " ".join(words), "sent_id": sent_id,
                                  "sent": " " + " ".join(words) + " "})
                    sent_id += 1
                refs.append({"image_id": ann["image_id"], "split": str(rng.choice(splits)), "sentences": sents,
                             "file_name": f"x_{ann['id']}.jpg", "category_id": ann["category_id"],
                             "ann_id": ann["id"], "sent_ids": [s["sent_id"] for s in sents], "ref_id": ref_id})
                ref_id += 1
                for s in sents:
                    _write_prediction(rng, pred / f"{s['sent_id']}.png", ann, *sizes[ann["image_id"]], coco_mask)
            with open(root / ds / f"refs({split_by}).p", "wb") as f:
                pickle.dump(refs, f, protocol=2)
    return root, pred


def _write_prediction(rng, path, ann, h, w, coco_mask):
    kind = rng.random()
    if kind < 0.1:
        m = np.zeros((h, w), np.uint8)
    elif kind < 0.15:
        m = np.ones((h, w), np.uint8)
    else:
        seg = ann["segmentation"]
        if seg and isinstance(seg[0], list):
            m = coco_mask.decode(coco_mask.frPyObjects(seg, h, w)).any(axis=2).astype(np.uint8)
        else:
            m = np.zeros((h, w), np.uint8)
        if kind > 0.5:  # a noisy copy
            m = m ^ (rng.random((h, w)) < 0.15).astype(np.uint8)
    Image.fromarray(m).save(path)


if __name__ == "__main__":
    import sys

    print(*write_fixture(sys.argv[1]))
