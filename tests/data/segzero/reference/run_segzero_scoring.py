"""Write the ReasonSeg fixture of tests/data/segzero/reasonseg/ and score it with Seg-Zero's own
scoring code, for tests/data/segzero/segzero_scoring.json.

Seg-Zero's functions are taken from a copy of dvlab-research/Seg-Zero at
42a33455283ba041a3099cf154a708116f300cec OUTSIDE this repository (SEGZERO_DIR, e.g.
`git -C <mirror> archive 42a3345 evaluation_scripts | tar -x -C /tmp/segzero-42a3345`), read by name
from their files and run unchanged (their modules import transformers, sam2, datasets at the top, so
only the function definitions are executed):
- create_reasonseg_hf.py ``get_mask_from_json``: the GT of their hub copy Ricky06662/ReasonSeg_*;
- evaluation.py ``compute_iou``: the per-sample counts;
- calculate_iou.py ``calculate_metrics``: reads output_*.json, prints gIoU (np.mean recorded at full
  precision as well as the printed line).
The per-sample block of evaluation.py / evaluation_visionreasoner.py is mirrored around them, with
the prediction PNG in place of SAM2's mask: a missing PNG is their "Reasoning error" branch
(intersection 0, union = np.array(gt).sum(), kept); else ``intersection, union = compute_iou(pred,
gt)`` whose failure is their ``continue``.

The same fixture is scored by LISA's rule too (the default protocol), from a copy of
dvlab-research/LISA at 3cb2d4301f1af4691bd4f3938335ef06e76f155a (LISA_DIR): utils/data_processing.py
``get_mask_from_json``, utils/utils.py ``intersectionAndUnionGPU`` and ``AverageMeter`` (its
all_reduce with torch.distributed replaced by the one-process identity), and train_ds.py validate's
per-sample lines mirrored; LISA has no failed sample, so a missing PNG is an empty prediction there
(how the harness scores a failure under LISA's rule).

usage: python run_segzero_scoring.py SEGZERO_DIR LISA_DIR   (writes beside tests/data/segzero)
"""
import ast
import glob
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent.parent  # tests/data/segzero
H, W = 40, 48


def their(path, name, namespace):
    """Execute the definition of function `name` from `path` into `namespace`."""
    tree = ast.parse(Path(path).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
    return namespace[name]


def shape(label, points):
    return {"label": label, "labels": [label], "shape_type": "polygon", "image_name": "x.jpg", "points": points,
            "group_id": None, "group_ids": [None], "flags": {}}


def box(x0, y0, x1, y1):
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


# name -> (shapes, predicted box (x0, y0, x1, y1) or None for an empty PNG, "missing" for no PNG)
CASES = {
    "a_ignore_overlaps": ([shape("target", box(4, 4, 24, 30)), shape("ignore", box(18, 10, 40, 36))], (10, 8, 34, 30)),
    "b_empty_union": ([shape("flag", box(2, 2, 10, 10))], None),
    "c_triangle": ([shape("target", [[5, 35], [40, 35], [22, 5]])], (8, 12, 36, 34)),
    "d_ignore_only": ([shape("ignore", box(20, 20, 44, 38))], (24, 14, 46, 30)),
    "e_failed_empty_gt": ([], "missing"),
    "f_failed": ([shape("target", box(1, 1, 15, 20))], "missing"),
    "g_ignore_inside": ([shape("target", box(3, 3, 40, 36)), shape("ignore", box(10, 10, 20, 20))], (3, 3, 30, 36)),
}


def write_fixture(root: Path, pred_dir: Path) -> None:
    (root / "val").mkdir(parents=True, exist_ok=True)
    pred_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, (shapes, pred) in CASES.items():
        # PNG bytes under a .jpg name (cv2 and PIL decode the same pixels), as tests/data/lisa/reasonseg
        ok, png = cv2.imencode(".png", rng.integers(0, 256, (H, W, 3), dtype=np.uint8))
        (root / "val" / f"{name}.jpg").write_bytes(png.tobytes())
        (root / "val" / f"{name}.json").write_text(json.dumps({"text": [name.replace("_", " ")], "is_sentence": False,
                                                               "shapes": shapes}))
        if pred == "missing":
            continue
        mask = np.zeros((H, W), np.uint8)
        if pred is not None:
            x0, y0, x1, y1 = pred
            mask[y0:y1, x0:x1] = 255
        cv2.imwrite(str(pred_dir / f"{name}.png"), mask)


def lisa_numbers(lisa_dir: str, root: Path, pred_dir: Path) -> dict:
    """giou, ciou as LISA's train_ds.py validate prints them (full precision)."""
    import enum
    import types

    import torch

    dist = types.SimpleNamespace(all_reduce=lambda *a, **k: None, ReduceOp=types.SimpleNamespace(SUM=None))
    ns = {"np": np, "cv2": cv2, "json": json, "torch": torch, "dist": dist, "Enum": enum.Enum}
    utils = Path(lisa_dir) / "utils"
    tree = ast.parse((utils / "utils.py").read_text())
    for node in tree.body:
        if getattr(node, "name", None) in ("Summary", "AverageMeter", "intersectionAndUnionGPU"):
            exec(compile(ast.Module([node], []), str(utils / "utils.py"), "exec"), ns)
    get_mask_from_json = their(utils / "data_processing.py", "get_mask_from_json", ns)
    meters = [ns["AverageMeter"](k, ":6.3f", ns["Summary"].SUM) for k in ("Intersec", "Union", "gIoU")]
    intersection_meter, union_meter, acc_iou_meter = meters
    for json_path in sorted(glob.glob(str(root / "val" / "*.json"))):
        img = cv2.imread(json_path.replace(".json", ".jpg"))
        mask, _, _ = get_mask_from_json(json_path, img)
        png = pred_dir / f"{Path(json_path).stem}.png"
        pred = cv2.imread(str(png), cv2.IMREAD_UNCHANGED) > 0 if png.exists() else np.zeros(mask.shape, bool)
        # validate's .int() masks as float32: CPU torch.histc has no int kernel (CUDA's has); same counts
        masks_list = torch.from_numpy(mask)[None].float()
        output_list = torch.from_numpy(pred)[None].float()
        intersection, union, acc_iou = 0.0, 0.0, 0.0
        for mask_i, output_i in zip(masks_list, output_list):
            intersection_i, union_i, _ = ns["intersectionAndUnionGPU"](
                output_i.contiguous().clone(), mask_i.contiguous(), 2, ignore_index=255)
            intersection += intersection_i
            union += union_i
            acc_iou += intersection_i / (union_i + 1e-5)
            acc_iou[union_i == 0] += 1.0  # no-object target
        intersection, union = intersection.cpu().numpy(), union.cpu().numpy()
        acc_iou = acc_iou.cpu().numpy() / masks_list.shape[0]
        intersection_meter.update(intersection), union_meter.update(union), acc_iou_meter.update(acc_iou, n=masks_list.shape[0])
    for m in meters:
        m.all_reduce()
    iou_class = intersection_meter.sum / (union_meter.sum + 1e-10)
    return {"gIoU": float(acc_iou_meter.avg[1]), "cIoU": float(iou_class[1]),
            "source": "dvlab-research/LISA@3cb2d4301f1af4691bd4f3938335ef06e76f155a utils/data_processing.py "
                      "get_mask_from_json, utils/utils.py intersectionAndUnionGPU + AverageMeter, train_ds.py validate"}


def main(segzero_dir: str, lisa_dir: str) -> None:
    scripts = Path(segzero_dir) / "evaluation_scripts"
    ns = {"np": np, "cv2": cv2, "json": json, "os": os, "glob": glob}
    get_mask_from_json = their(scripts / "create_reasonseg_hf.py", "get_mask_from_json", ns)
    compute_iou = their(scripts / "evaluation.py", "compute_iou", ns)
    means = []

    class RecordingNumpy:  # np with its mean recorded: calculate_metrics prints only 4 decimals
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def mean(values):
            means.append(float(np.mean(values)))
            return np.mean(values)

    calc_ns = {"np": RecordingNumpy(), "os": os, "json": json, "glob": glob}
    calculate_metrics = their(scripts / "calculate_iou.py", "calculate_metrics", calc_ns)

    root, pred_dir = HERE / "reasonseg", HERE / "predictions"
    write_fixture(root, pred_dir)
    all_outputs, per_sample = [], {}
    for json_path in sorted(glob.glob(str(root / "val" / "*.json"))):
        image_id = Path(json_path).stem
        gt_mask = get_mask_from_json(json_path, H, W)  # the hub copy's item["mask"]
        png = pred_dir / f"{image_id}.png"
        if not png.exists():  # "Reasoning error": add penalty
            union = np.array(gt_mask).sum()
            all_outputs.append({"image_id": image_id, "intersection": 0, "union": int(union)})
            per_sample[image_id] = {"kept": True, "failed": True, "intersection": 0, "union": int(union)}
            continue
        mask_all = cv2.imread(str(png), cv2.IMREAD_UNCHANGED) > 0
        try:
            intersection, union = compute_iou(mask_all, gt_mask)
        except Exception:  # skip this because the image or mask is not correct
            per_sample[image_id] = {"kept": False, "failed": False}
            continue
        all_outputs.append({"image_id": image_id, "intersection": int(intersection), "union": int(union)})
        per_sample[image_id] = {"kept": True, "failed": False, "intersection": int(intersection), "union": int(union)}
    with tempfile.TemporaryDirectory() as out_dir:
        Path(out_dir, "output_0.json").write_text(json.dumps(all_outputs))
        printed = io.StringIO()
        with redirect_stdout(printed):
            calculate_metrics(out_dir)
    result = {
        "source": "dvlab-research/Seg-Zero@42a33455283ba041a3099cf154a708116f300cec evaluation_scripts/"
                  "create_reasonseg_hf.py get_mask_from_json, evaluation.py compute_iou, calculate_iou.py calculate_metrics",
        "printed": printed.getvalue().strip(),
        "gIoU": means[0],
        "per_sample": per_sample,
        "lisa": lisa_numbers(lisa_dir, root, pred_dir),
    }
    (HERE / "segzero_scoring.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(result["printed"], result["gIoU"], result["lisa"])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
