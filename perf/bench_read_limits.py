"""What the bounded reading of issue 24 costs and saves, side by side with what it replaced, in one run.

Rows:
- fill: LabelMe polygon fill (`rvt_bench.core.masks.fill_poly_cv48`, rows at once) against the
  line-by-line port of OpenCV 4.8.0's FillEdgeCollection it replaced (tests/cv48_reference.py), on
  a 1080 x 1920 image: a hand-drawn-like convex polygon, and random self-intersecting ones (the
  quadratic case). The reference is skipped above --reference-max points (minutes).
- json: a ReVOS-scale mask_dict.json (--annos anno ids x --frames per-frame RLEs): plain
  `json.loads` of the bytes against `rvt_bench.core.files.read_json` (regular-file check, repeated
  keys, integer digits, depth walk).
- png: one 720p prediction mask, `rvt_bench.core.png.read_gray` (file read, header pixel check,
  decode) against a plain read + decode.
Seconds are the best of --repeats. Not a test.

    python perf/bench_read_limits.py [--points 1000,10000] [--annos 2000] [--frames 60] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/cv48_reference.py


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def fill_rows(points: list[int], repeats: int, reference_max: int) -> None:
    from rvt_bench.core import masks
    from tests.cv48_reference import fill_poly_reference

    h, w = 1080, 1920
    rng = np.random.default_rng(0)
    angle = np.linspace(0, 2 * np.pi, 120, endpoint=False)
    cases = [("convex, 120 points", np.stack([w / 2 + 400 * np.cos(angle), h / 2 + 300 * np.sin(angle)], 1).astype(np.int64))]
    cases += [(f"self-intersecting, {n} points", rng.integers(0, [w, h], size=(n, 2))) for n in points]
    print(f"fill (1080 x 1920)            {'rows at once':>14} {'OpenCV port':>14}")
    for name, pts in cases:
        ours = best(lambda: masks.fill_poly_cv48(np.zeros((h, w), np.uint8), pts, 1), repeats)
        if len(pts) <= reference_max:
            ref = best(lambda: fill_poly_reference(np.zeros((h, w), np.uint8), pts, 1), 1)
            ref_text = f"{ref:13.3f}s"
        else:
            ref_text = f"{'(skipped)':>14}"
        print(f"  {name:28s} {ours:13.3f}s {ref_text}")


def json_rows(annos: int, frames: int, repeats: int) -> None:
    from rvt_bench.core import files

    counts = "abcdefghijklmnopqrstuvwxyz0123456789" * 6
    mask_dict = {str(a): [{"size": [720, 1280], "counts": counts} if t % 3 else None for t in range(frames)]
                 for a in range(annos)}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mask_dict.json"
        path.write_text(json.dumps(mask_dict))
        mb = path.stat().st_size / 2**20
        plain = best(lambda: json.loads(path.read_bytes()), repeats)
        checked = best(lambda: files.read_json(path), repeats)
    print(f"json (mask_dict.json, {mb:.0f} MB)  json.loads {plain:.2f}s   files.read_json {checked:.2f}s "
          f"({checked / plain:.1f}x)")


def png_rows(repeats: int) -> None:
    import cv2

    from rvt_bench.core import png

    mask = np.zeros((720, 1280), np.uint8)
    mask[200:500, 300:900] = 255
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.png"
        cv2.imwrite(str(path), mask)
        n = 200
        plain = best(lambda: [png.decode_gray8_box(path.read_bytes()) for _ in range(n)], repeats) / n
        checked = best(lambda: [png.read_gray(path) for _ in range(n)], repeats) / n
    print(f"png (720p mask)               read + decode {1000 * plain:.2f} ms   png.read_gray {1000 * checked:.2f} ms")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", default="1000,10000")
    ap.add_argument("--reference-max", type=int, default=10000)
    ap.add_argument("--annos", type=int, default=2000)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    fill_rows([int(v) for v in args.points.split(",")], args.repeats, args.reference_max)
    json_rows(args.annos, args.frames, args.repeats)
    png_rows(args.repeats)


if __name__ == "__main__":
    main()
