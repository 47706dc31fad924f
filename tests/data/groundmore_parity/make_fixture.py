"""Write the GroundMoRe-format fixture (the layout evaluate_groundmore.py reads) and predictions in
rvt-bench's declared GroundMoRe layout.

    write_fixture(out_dir) -> (dataset_root, prediction_root)

    <out>/GroundMoRe/groundmore_test.json
    <out>/GroundMoRe/groundmore_videos/<video>/images/frame_<i:06d>.jpg
    <out>/GroundMoRe/groundmore_videos/<video>/masks/frame_<i:06d>.png     indexed PNG, object ids as indices
    <out>/pred/<video>/<exp_id>/<frame stem>.png                           one 0/255 PNG per sampled frame

Chosen so that every rule of the reference shows: videos longer and shorter than the 20 sampled
frames (linspace repeats indices), action windows inside the clip (GT zeroed outside; the window
starts at the clip's MM:SS from the video name), a mask PNG missing inside the window (zero GT),
two objects per video (GT = mask == obj_id), every question type, a question whose video has no
frames folder (skipped), predictions exact / shifted / spilling outside the window / empty.
Deterministic (numpy default_rng(SEED)).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

SEED = 20261205
FPS = 6
# video name (ends _MMSS_MMSS), (H, W), frame count, frame indices without a mask PNG
VIDEOS = [
    ("family_clip_0010_0015", (24, 32), 30, {12}),
    ("ball-game_0100_0103", (20, 28), 12, set()),
    ("animal_x_0002_0006", (18, 18), 24, set()),
    ("gone_0000_0002", (16, 16), 0, set()),
]
# video -> questions: (exp_id, obj_id, q_type, start "MM:SS", end "MM:SS", prediction style)
QUESTIONS = {
    "family_clip_0010_0015": [("0", 1, "Causal", "00:11", "00:13", "exact"), ("1", 2, "Sequential", "00:10", "00:12", "shift"),
                              ("2", 1, "Counterfactual", "00:12", "00:15", "spill"), ("3", 2, "Descriptive", "00:13", "00:14", "empty")],
    "ball-game_0100_0103": [("0", 1, "Descriptive", "01:00", "01:02", "shift"), ("1", 2, "Causal", "01:01", "01:03", "exact")],
    "animal_x_0002_0006": [("5", 1, "Sequential", "0:03", "0:05", "spill"), ("7", 2, "Counterfactual", "00:02", "00:06", "shift")],
    "gone_0000_0002": [("0", 1, "Causal", "00:00", "00:01", "exact")],
}


def _blob(rng, h, w):
    y, x = np.mgrid[:h, :w]
    cy, cx = h * (0.3 + 0.4 * rng.random()), w * (0.3 + 0.4 * rng.random())
    ry, rx = h * (0.15 + 0.15 * rng.random()), w * (0.15 + 0.15 * rng.random())
    return ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1


def write_fixture(out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    root, pred = out / "GroundMoRe", out / "pred"
    rng = np.random.default_rng(SEED)
    meta: dict = {"videos": {}}
    for video, (h, w), n, no_mask in VIDEOS:
        vdir = root / "groundmore_videos" / video
        labels = []
        if n:
            (vdir / "images").mkdir(parents=True, exist_ok=True)
            (vdir / "masks").mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(vdir / "images" / f"frame_{i:06d}.jpg", quality=90)
            lab = np.zeros((h, w), np.uint8)
            lab[_blob(rng, h, w)] = 1
            lab[_blob(rng, h, w)] = 2  # object 2 drawn over object 1
            labels.append(lab)
            if i not in no_mask:
                img = Image.fromarray(lab, mode="P")
                img.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * (256 * 3 - 9))
                img.save(vdir / "masks" / f"frame_{i:06d}.png")
        meta["videos"][video] = {"questions": {
            exp_id: {"question": f"which object {exp_id} in {video}?", "answer": f"object {obj}", "obj_id": str(obj),
                     "q_type": q_type, "action_start": start, "action_end": end}
            for exp_id, obj, q_type, start, end, _ in QUESTIONS[video]}}
        if not n:
            continue
        indices = [int(i) for i in np.linspace(0, n - 1, num=20, dtype=int)]
        for exp_id, obj, _, _, _, style in QUESTIONS[video]:
            folder = pred / video / exp_id
            folder.mkdir(parents=True, exist_ok=True)
            for k in indices:
                m = labels[k] == obj
                if style == "shift":
                    m = np.roll(m, 1, 1)
                elif style == "spill":
                    m = m | (labels[k] > 0)
                elif style == "empty":
                    m = np.zeros_like(m)
                Image.fromarray(m.astype(np.uint8) * 255).save(folder / f"frame_{k:06d}.png")
    root.mkdir(parents=True, exist_ok=True)
    (root / "groundmore_test.json").write_text(json.dumps(meta, indent=1))
    return root, pred


if __name__ == "__main__":
    import sys

    print(*write_fixture(sys.argv[1]))
