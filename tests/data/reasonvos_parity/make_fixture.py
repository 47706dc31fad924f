"""Write the ReasonVOS-format fixture (VideoLISA's release layout, benchmark_check.py) and a
prediction folder in the layout VideoLISA's inference_reason_vos.py writes.

    write_fixture(out_dir) -> (dataset_root, prediction_root)

    <out>/ReasonVOS/meta_expressions.json            {"videos": {<video>: {"source", "frames", "expressions": [...]}}}
    <out>/ReasonVOS/JPEGImages/<video>/<frame>.jpg   every frame of the video
    <out>/ReasonVOS/Annotations/<source>_<video>_<obj_id>/<frame>.png   the frames the evaluator scores
    <out>/pred/<source>_<video>_<obj_id>/<exp_id>/<frame>.png            one PNG per JPEG frame, 0/255

Chosen so that every behaviour of eval_reason_vos.py that moves its printed numbers shows:
- annotations on a subset of the frames (only the sorted GT PNGs are scored; the prediction's
  other frames are ignored), an empty GT frame, two expressions sharing one object's GT folder;
- GT PNGs as 0/255 gray, as an indexed PNG with a colour whose gray value is 0 (that object part
  vanishes under IMREAD_GRAYSCALE) and as RGB;
- predictions as 0/255 gray, as RGB, an empty frame, one exactly right, one shifted;
- an expression whose prediction folder is missing (skipped, printed "not found"), one whose
  folder lacks one frame's PNG (its worker raises: silently left out), one with a PNG of another
  size (likewise), and one whose GT folder is missing (skipped, printed "not found").
Deterministic (numpy default_rng(SEED)); tests regenerate it into tmp_path and compare with the
numbers VideoLISA's evaluator printed on it (expected.json, made by run_reference.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

SEED = 20261204
# video, source, (H, W), frames (all JPEGs), annotated frames (GT PNGs), objects: obj_id -> GT style
VIDEOS = [
    ("vid_a", "mevis", (24, 32), ["00000", "00001", "00002", "00003", "00004"], ["00000", "00002", "00004"],
     {"0": "gray255", "1": "palette"}),
    ("b-video", "mose", (30, 20), ["0010", "0011", "0012"], ["0010", "0011", "0012"], {"3": "rgb"}),
    ("c_vid_x", "burst", (16, 16), ["a", "b"], ["a", "b"], {"7": "gray255", "8": "missing"}),
]
# video -> expressions: (obj_id, exp_id, is_sent, prediction style, breakage)
EXPRESSIONS = {
    "vid_a": [("0", 0, False, "exact", None), ("0", 1, True, "shift", None), ("1", 2, True, "spill", None),
              ("1", 3, False, "shift", "no_folder")],
    "b-video": [("3", 0, True, "shift_rgb", None), ("3", 1, False, "empty", None), ("3", 2, True, "spill", "missing_frame")],
    "c_vid_x": [("7", 0, False, "shift", None), ("7", 1, True, "exact", "wrong_size"), ("8", 0, False, "exact", None)],
}


def _ellipse(h: int, w: int, cy: float, cx: float, ry: float, rx: float) -> np.ndarray:
    y, x = np.mgrid[:h, :w]
    return ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1


def _gt(rng: np.random.Generator, h: int, w: int, k: int, n: int) -> np.ndarray:
    if k == n - 1 and n > 2:  # the last annotated frame of a long track: empty
        return np.zeros((h, w), bool)
    return _ellipse(h, w, h * (0.3 + 0.4 * rng.random()), w * (0.3 + 0.4 * rng.random()),
                    h * (0.15 + 0.15 * rng.random()), w * (0.15 + 0.15 * rng.random()))


def _write_gt(path: Path, mask: np.ndarray, style: str) -> None:
    if style == "gray255":
        Image.fromarray(mask.astype(np.uint8) * 255).save(path)
    elif style == "palette":  # index 1 = (200, 30, 30), index 2 = (0, 0, 2): gray 0 under IMREAD_GRAYSCALE
        idx = mask.astype(np.uint8)
        idx[: mask.shape[0] // 2][mask[: mask.shape[0] // 2]] = 2
        img = Image.fromarray(idx, mode="P")
        img.putpalette([0, 0, 0, 200, 30, 30, 0, 0, 2] + [0] * (256 * 3 - 9))
        img.save(path)
    else:  # rgb
        rgb = np.zeros((*mask.shape, 3), np.uint8)
        rgb[mask] = (40, 220, 90)
        Image.fromarray(rgb).save(path)


def _pred(gt: np.ndarray, style: str) -> np.ndarray:
    if style in ("exact",):
        return gt
    if style in ("shift", "shift_rgb"):
        return np.roll(np.roll(gt, 2, 0), 1, 1)
    if style == "spill":
        out = gt.copy()
        out[:, : gt.shape[1] // 3] = True
        return out
    return np.zeros_like(gt)


def write_fixture(out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    root, pred = out / "ReasonVOS", out / "pred"
    rng = np.random.default_rng(SEED)
    meta: dict = {"videos": {}}
    gts: dict[str, dict[str, np.ndarray]] = {}
    for video, source, (h, w), frames, annotated, objects in VIDEOS:
        (root / "JPEGImages" / video).mkdir(parents=True, exist_ok=True)
        for f in frames:
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / "JPEGImages" / video / f"{f}.jpg", quality=90)
        for obj, style in objects.items():
            vid_key = f"{source}_{video}_{obj}"
            gts[vid_key] = {}
            for k, f in enumerate(annotated):
                gts[vid_key][f] = _gt(rng, h, w, k, len(annotated))
            if style == "missing":
                continue
            (root / "Annotations" / vid_key).mkdir(parents=True, exist_ok=True)
            for f, mask in gts[vid_key].items():
                _write_gt(root / "Annotations" / vid_key / f"{f}.png", mask, style)
        meta["videos"][video] = {"source": source, "frames": frames, "expressions": [
            {"obj_id": obj, "exp_id": exp_id, "exp_text": f"the {'thing that ' if sent else ''}object {obj}", "is_sent": sent}
            for obj, exp_id, sent, _, _ in EXPRESSIONS[video]]}
        for obj, exp_id, _, style, broken in EXPRESSIONS[video]:
            vid_key = f"{source}_{video}_{obj}"
            if broken == "no_folder":
                continue
            folder = pred / vid_key / str(exp_id)
            folder.mkdir(parents=True, exist_ok=True)
            for f in frames:  # inference writes every frame; the evaluator reads the annotated ones
                if broken == "missing_frame" and f == annotated[1]:
                    continue
                gt = gts[vid_key].get(f)
                mask = _pred(gt if gt is not None else np.zeros((h, w), bool), style)
                if broken == "wrong_size" and f == annotated[0]:
                    mask = np.zeros((h + 2, w), bool)
                if style == "shift_rgb":
                    rgb = np.zeros((*mask.shape, 3), np.uint8)
                    rgb[mask] = (255, 255, 255)
                    Image.fromarray(rgb).save(folder / f"{f}.png")
                else:
                    Image.fromarray(mask.astype(np.uint8) * 255).save(folder / f"{f}.png")
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta_expressions.json").write_text(json.dumps(meta, indent=1))
    return root, pred


if __name__ == "__main__":
    import sys

    print(*write_fixture(sys.argv[1]))
