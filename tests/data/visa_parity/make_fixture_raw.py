"""Write the ReVOS-format fixture for VISA's raw-pixel A / R and its scoring of broken submissions.

    write_fixture(out_dir) -> (dataset_root, prediction_root)

Same layout as make_fixture.py (read its docstring), different content, chosen so that every
behaviour of VISA tools/eval_revos.py that a published number depends on shows:
- objects of a video may overlap, so an expression's GT (VISA: the uint8 *sum* of its anno masks)
  is 2 where two of its annos overlap;
- prediction PNGs hold 0/1, 0/255, 0/128, several values (1, 2, 255 in one frame) or are RGB
  (VISA reads IMREAD_GRAYSCALE: the gray value counts);
- broken submissions, each scored 0 for J, F, A, R by VISA's bare `except`: a missing middle frame,
  a missing first frame, a missing expression folder, a whole video folder missing, one frame of
  the wrong size, one unreadable (not a PNG) frame;
- an expression whose GT is empty in every frame (its anno is absent throughout);
- type_id 0, 1 and 2.
Deterministic (numpy default_rng(SEED)); tests regenerate it into tmp_path and compare with the
numbers VISA printed on it (expected_visa_raw.json, made by `run_visa.py <visa> <work> raw`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixture import _ellipse, _rle  # noqa: E402

SEED = 20261201
VIDEOS = [
    ("UVO/all/raw0", (24, 32), ["00000", "00001", "00002", "00003"]),
    ("raw_flat", (30, 40), ["00007", "00008", "00009"]),
    ("TAO/raw/cat-2", (36, 28), ["0001", "0002", "0003", "0004", "0005"]),
    ("gone_video", (20, 20), ["a", "b"]),
]
# (type_id, object indices, prediction style, PNG encoding, breakage)
EXPRESSIONS = [
    [(0, [0, 1], "shift", "v1", None), (1, [0, 1], "spill", "v255", None), (0, [0], "exact", "v128", None),
     (1, [1], "partial", "mixed", None), (2, [], "spill", "v255", None), (0, [3], "background", "v1", None)],
    [(0, [0], "shift", "v1", "missing_middle"), (1, [0, 1], "exact", "v1", "missing_first"),
     (0, [1], "shift", "v255", "missing_exp_dir"), (1, [0], "spill", "rgb", None), (1, [1], "shift", "v1", None)],
    [(1, [0, 1], "shift", "v1", "wrong_size"), (0, [0], "exact", "v1", "unreadable"),
     (0, [0, 1], "spill", "v1", None), (1, [1], "partial", "v255", None), (2, [], "background", "v1", None)],
    [(0, [0], "exact", "v1", "missing_video"), (1, [1], "exact", "v1", "missing_video")],
]
NUM_OBJECTS = 4  # objects 0, 1 (may overlap), 2 = distractor, 3 = absent in every frame


def _prediction(rng, style, gt, distractor):
    h, w = gt.shape
    if style == "exact":
        return gt.copy()
    if style == "shift":
        return np.roll(np.roll(gt, int(rng.integers(-2, 3)), 0), int(rng.integers(-2, 3)), 1)
    if style == "partial":
        return gt & (rng.random((h, w)) < 0.7)
    if style == "spill":
        return gt | distractor | _ellipse(rng, h, w)
    if style == "background":
        return np.zeros((h, w), dtype=bool)
    raise ValueError(style)


def _encode(rng, encoding, mask):
    if encoding == "v1":
        return mask.astype(np.uint8)
    if encoding == "v255":
        return mask.astype(np.uint8) * 255
    if encoding == "v128":
        return mask.astype(np.uint8) * 128
    if encoding == "mixed":
        return (mask * rng.choice(np.array([1, 2, 255], dtype=np.uint8), size=mask.shape)).astype(np.uint8)
    if encoding == "rgb":
        out = np.zeros((*mask.shape, 3), dtype=np.uint8)
        out[mask] = (0, 200, 0)
        return out
    raise ValueError(encoding)


def write_fixture(out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    root, pred_root = out / "ReVOS", out / "pred"
    rng = np.random.default_rng(SEED)
    videos, mask_dict, foreground = {}, {}, {}
    anno = 500
    for (video, (h, w), frames), exps in zip(VIDEOS, EXPRESSIONS):
        n = len(frames)
        frame_dir = root / "JPEGImages" / video
        frame_dir.mkdir(parents=True, exist_ok=True)
        for f in frames:
            Image.fromarray(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)).save(frame_dir / f"{f}.jpg", quality=80)
        tracks = [[_ellipse(rng, h, w) if rng.random() > 0.15 else None for _ in range(n)] for _ in range(NUM_OBJECTS - 1)]
        tracks.append([None] * n)
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
        for e, (type_id, objs, style, encoding, broken) in enumerate(exps):
            expressions[str(e)] = {"exp": f"expression {e} of {video}", "obj_id": list(objs),
                                   "anno_id": [anno_ids[o] for o in objs], "type_id": type_id}
            if broken in ("missing_exp_dir", "missing_video"):
                continue
            exp_dir = pred_root / video / str(e)
            exp_dir.mkdir(parents=True, exist_ok=True)
            for k, f in enumerate(frames):
                gt = np.zeros((h, w), dtype=bool)
                for o in objs:
                    if tracks[o][k] is not None:
                        gt |= tracks[o][k]
                distractor = tracks[2][k] if tracks[2][k] is not None else np.zeros((h, w), dtype=bool)
                pixels = _encode(rng, encoding, _prediction(rng, style, gt, distractor))
                path = exp_dir / f"{f}.png"
                if (broken == "missing_middle" and k == n // 2) or (broken == "missing_first" and k == 0):
                    continue
                if broken == "wrong_size" and k == 1:
                    pixels = np.zeros((h + 1, w), dtype=np.uint8)
                if broken == "unreadable" and k == n - 1:
                    path.write_bytes(b"not a png")
                    continue
                Image.fromarray(pixels).save(path)
        videos[video] = {"vid_id": len(videos), "height": h, "width": w, "frames": frames, "expressions": expressions}
    (root / "meta_expressions_valid_.json").write_text(json.dumps({"videos": videos}))
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    (root / "mask_dict_foreground.json").write_text(json.dumps(foreground))
    return root, pred_root


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.data.visa_parity.make_fixture_raw", description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", default="visa_raw_fixture", help="where the fixture is written (created)")
    print(write_fixture(ap.parse_args().out_dir))
