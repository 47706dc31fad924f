"""Scale benchmark of report.html: a run of --n image samples (one small shared frame, a GT and a
prediction mask each, scored by ReasonSeg's protocol) and the time, memory and page size of
`build_report` with at most --samples pictures (default report.MAX_PICTURED). Not a test: it prints
figures (tests/test_report_scale.py builds a 40-sample run with make_run).

Usage:
    python perf/bench_report_scale.py --n 100000 [--samples 500] [--work /tmp/report_scale]

Printed: seconds to make the run (not timed against the report), seconds to build the report,
peak RSS of this process, the page's size, the pictures written and the lines of samples.csv.

Measured 2026-12-04 on the 2-core dev machine, with a test run beside it:
`python perf/bench_report_scale.py --n 100000`: report built in 98.3 s, peak RSS 0.52 GB, page
0.38 MB, 500 pictures, samples.csv 100,000 lines (the run itself made in 128 s). --n 5000: 12.7 s.
"""
from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from rvt_bench.core import masks
from rvt_bench.core.types import Prediction, Sample, Target
from rvt_bench.metrics.protocols.reasonseg import ReasonSegProtocol


def make_run(work: Path, n: int, seed: int = 0) -> tuple[Path, list[Sample], dict[str, Prediction]]:
    """A scored run directory of `n` image samples under `work`: (run_dir, samples, predictions by
    id); every 50th sample a parse failure. The files the report reads: metrics.json, scores.jsonl,
    manifest.json."""
    rng = np.random.default_rng(seed)
    run_dir = work / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    frame = work / "frame.png"
    cv2.imwrite(str(frame), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    protocol = ReasonSegProtocol()
    samples, preds, records = [], {}, []
    for k in range(n):
        gt = np.zeros((48, 64), bool)
        x, y = int(rng.integers(0, 40)), int(rng.integers(0, 30))
        gt[y:y + 16, x:x + 20] = True
        sid = f"img{k:06d}"
        sample = Sample(sid, "synthetic", "val", "image", [str(frame)], [sid], f"query {k}", "segmentation",
                        Target(masks=[masks.encode(gt)]), meta={"name": sid, "is_sentence": bool(k % 2)})
        if k % 50 == 0:
            pred = Prediction.failure(sid, "parse", "no mask in the answer")
        else:
            pred = Prediction(sid, task="segmentation", masks=[masks.encode(np.roll(gt, int(rng.integers(0, 8)), axis=1))])
        samples.append(sample)
        preds[sid] = pred
        records.append(protocol.score(sample, pred))
    aggregate = protocol.aggregate(records)
    failures = sum(r.failed for r in records)
    body = {"dataset": "synthetic", "split": "val", "model": "synthetic", "run_name": "scale", "fingerprint": "0" * 10,
            "protocol": "reasonseg", "schema_version": 3, "headline": list(protocol.headline), **aggregate, "n": n,
            "failures": failures, "failures_by_kind": {"parse": failures} if failures else {}, "parse_rate": 1 - failures / n,
            "failed_samples": [], "tasks": {"segmentation": n}, "data_errors": 0, "data_error_samples": []}
    (run_dir / "metrics.json").write_text(json.dumps(body))
    (run_dir / "manifest.json").write_text(json.dumps({"fingerprint": "0" * 10, "git_sha": "synthetic",
                                                       "started_utc": "2026-01-01T00:00:00+00:00"}))
    with open(run_dir / "scores.jsonl", "w") as fh:
        for r in records:
            fh.write(json.dumps(r.to_json()) + "\n")
    return run_dir, samples, preds


def main() -> None:
    from rvt_bench.harness.report import MAX_PICTURED, build_report

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=MAX_PICTURED)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="report_scale."))
    t0 = time.perf_counter()
    run_dir, samples, preds = make_run(work, args.n)
    made = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = build_report(run_dir, samples=samples, preds=preds, max_samples=args.samples)
    built = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    pictures = len(list((run_dir / "report_images").glob("*.png")))
    lines = sum(1 for _ in open(run_dir / "report_images" / "samples.csv")) - 1
    print(f"n={args.n} samples={args.samples}: run made in {made:.1f} s; report built in {built:.1f} s; "
          f"peak RSS {peak:.2f} GB; page {page.stat().st_size / 1e6:.2f} MB; {pictures} pictures; "
          f"samples.csv {lines} lines ({work})")


if __name__ == "__main__":
    main()
