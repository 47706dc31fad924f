"""A tiny Ref-YouTube-VOS release in its real layout (meta_expressions/valid/meta_expressions.json,
valid/JPEGImages/<video>/<frame>.jpg): three videos of two or three 12 x 16 frames, one or two
expressions each, no GT (the valid split's is not public). Used by tests/hostile_kit.py."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

VIDEOS = {"0a1b2c3d4e": ["00000", "00005", "00010"], "1f2e3d4c5b": ["00000", "00005"], "2a3b4c5d6e": ["00000", "00005"]}


def write(root: Path, split: str = "valid") -> Path:
    """Write the release into `root` and return it."""
    meta = {"videos": {}}
    for k, (video, frames) in enumerate(VIDEOS.items()):
        folder = root / split / "JPEGImages" / video
        folder.mkdir(parents=True)
        for n, frame in enumerate(frames):
            pixels = (np.arange(12 * 16 * 3).reshape(12, 16, 3) * (k + n + 1) % 251).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{frame}.jpg")
        expressions = {str(e): {"exp": f"the object {e} of video {k}"} for e in range(1 + k % 2)}
        meta["videos"][video] = {"expressions": expressions, "frames": frames}
    (root / "meta_expressions" / split).mkdir(parents=True)
    (root / "meta_expressions" / split / "meta_expressions.json").write_text(json.dumps(meta))
    return root
