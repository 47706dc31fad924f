"""Per-frame cost of J and F: rvt_bench.metrics.masks against davis2017-evaluation's own functions.

Usage: python perf/bench_jf.py --davis-metrics /path/to/davis2017/metrics.py [--repeat 20]
(the reference file is loaded from a checkout of davisvideochallenge/davis2017-evaluation
@ ac7c43f; it is not part of this repository). Prints milliseconds per frame for each frame size and
case: ours = `rvt_bench.metrics.masks.jf_counts` (J and F of a frame in one pass, what the protocols call),
davis = `db_eval_iou` + `f_measure`; the ratio davis / ours; and checks that both give the same J
and F. Single process (one core); run it on an idle machine for stable figures.

Figures (2026-12-01, 2 shared vCPUs; the davis2017 file at ac7c43f; --repeat 20 / 30):
    load average ~4:  480p large 1.21 vs 8.99 ms (7.4x), 720p large 1.78 vs 16.65 ms (9.4x),
                      1080p large 7.67 vs 122.97 ms (16.0x); small objects 22.9-126.8x, empty
                      predictions 25.0-80.2x
    load average ~15: every row >= 7.3x (480p large 3.01 vs 22.04 ms; absolute times ~3x inflated)
    load average ~10, after the 4-pass boundary map (--repeat 20): every row >= 6.6x (480p large
                      4.69 vs 31.05 ms, 720p large 9.41 vs 98.12 ms: 10.4x, 1080p large 21.9x)
Values identical on every row (and on all 256 parity pairs: tests/test_metrics_masks.py).
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from rvt_bench.metrics.masks import f_measure, jaccard, jf_counts

SIZES = [(480, 854), (720, 1280), (1080, 1920)]


def _load(path: str):
    spec = importlib.util.spec_from_file_location("davis2017_metrics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(h: int, w: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    yy, xx = np.mgrid[:h, :w]

    def disk(cy, cx, r):
        return (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r

    big = min(h, w) / 3
    return {
        "large object": (disk(h / 2, w / 2, big), disk(h / 2 + 5, w / 2 + 9, big * 0.95)),
        "small object": (disk(h / 5, w / 5, 20), disk(h / 5 + 4, w / 5 - 2, 22)),
        "empty prediction": (disk(h / 2, w / 3, big / 2), np.zeros((h, w), bool)),
    }


def _ms(fn, repeat: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--davis-metrics", required=True, help="path to davis2017/metrics.py")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    ref = _load(args.davis_metrics)
    print(f"{'frame':>10} {'case':>17} {'J&F ours':>9} {'J&F davis':>10} {'ratio':>6}  (ms/frame)")
    worst = float("inf")
    for h, w in SIZES:
        for name, (gt, pred) in _cases(h, w).items():
            inter, union, f = jf_counts(gt, pred)
            assert (1.0 if union == 0 else inter / union) == jaccard(gt, pred) == float(ref.db_eval_iou(gt, pred))
            assert f == f_measure(gt, pred) == float(ref.f_measure(pred, gt))
            ours = _ms(lambda: jf_counts(gt, pred), args.repeat)
            davis = _ms(lambda: (ref.db_eval_iou(gt, pred), ref.f_measure(pred, gt)), args.repeat)
            worst = min(worst, davis / ours)
            print(f"{h}x{w:<5} {name:>17} {ours:9.2f} {davis:10.2f} {davis / ours:5.1f}x")
    print(f"smallest ratio: {worst:.1f}x (values identical on every row)")


if __name__ == "__main__":
    main()
