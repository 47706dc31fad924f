"""Scale benchmark: score a ReVOS-sized submission of PNGs (default 1,000 expressions x 50 frames at
720p) with this harness and with VISA's own `tools/eval_revos.py`, side by side on the same files and
machine, and check that both give the same J, F, A, R.

Usage:
    python perf/bench_score_scale.py --work /tmp/score_scale --workers 2 \
        --visa /path/to/VISA [--expressions 1000 --frames 50]

--visa: a checkout of github.com/cilinyan/VISA (tested at ec158fde); its tools/eval_revos.py and
tools/metrics.py are copied to <work>/visa_tools and run unchanged except NUM_WOEKERS (hard-coded 128
there) set to --workers; it needs pandas and termcolor (a stub `colored = lambda s, *a, **k: s` is
written when termcolor is missing). Without --visa only this harness is timed.

Steps:
1. generate (skipped when --work already holds a complete fixture): a ReVOS-format root
   (JPEGImages as hard links to one JPEG per video, meta_expressions_valid_.json, mask_dict.json,
   mask_dict_foreground.json) with moving elliptical objects, and a submission of 0/255 PNGs
   <pred>/<video>/<exp_id>/<frame>.png (each expression's prediction: its GT shifted, or with a
   spurious blob). Not timed.
2. ours: rvt_bench.loaders.revos.ReVOSDataset, then in a pool of --workers forked processes per expression
   rvt_bench.adapters.precomputed.PrecomputedAdapter(layout="revos").predict (each PNG decoded once by
   rvt_bench.core.png: zlib-ng inflate and unfiltering on the content only, into the content's box, exactly
   OpenCV's pixels; the RLE written from that box) and ReVOSProtocol.score (J, F, A, R in one pass
   per frame on the objects' box), then aggregate: what `+model=precomputed` runs, minus writing
   files.
3. VISA: eval_revos.py on the same submission (a subprocess), its revos_valid.json / .csv read back.
4. values: VISA's per-expression CSV (J, F, A, R rounded to 2 decimals) against ours rounded the
   same way, and its per-type / overall numbers against ours (|diff| <= 1e-9, fractions vs percent).
Printed: wall and CPU seconds of each, the ratio VISA / ours, peak RSS (this process and its
largest worker; VISA's largest process).

Figures (2026-12-01, 2 vCPUs shared with five other engineers' jobs, load average 6-10; a REDUCED
size, --expressions 50 --frames 20 at 720x1280, --workers 2, because VISA's full 1,000 x 50 run takes
~13 min uncontended and several times that here; two runs back to back):
    ours 11.1 s wall / 5.5 s CPU, VISA eval_revos.py 96.8 s wall / 49.1 s CPU: 8.71x wall, 8.95x CPU
    ours  9.3 s wall / 4.4 s CPU, VISA eval_revos.py 82.3 s wall / 48.3 s CPU: 8.85x wall, 10.90x CPU
    J, F, A, R per expression and per type identical (0 of 200 differ; max |diff| 2.2e-16); peak RSS
    ours 56 MB main + 52 MB per worker, VISA 271 MB per process.
  --expressions 200 --frames 50 (10,000 frames; load average ~7):
    ours 82.1 s wall / 54.7 s CPU, VISA eval_revos.py 688.5 s wall / 458.8 s CPU: 8.39x wall, 8.39x CPU;
    0 of 800 per-expression values differ (max |diff| 3.3e-16); peak RSS ours 88 MB main + 227 MB
    largest worker (forked from the main process, whose dataset pages it counts; one process scoring
    120 expressions in a row stays at 100 MB), VISA 481 MB per process.
Per 720p frame (one process, warm): reading the PNG ~1.1 ms (inflate 0.13 ms, where OpenCV's
decoder took ~6 ms), scoring ~2.1 ms (J and F ~1.2 ms of it). Earlier: 3.8x / 4.0x with
cv2.imdecode, PNG decoding then ~70% of our time.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from rvt_bench.adapters.precomputed import PrecomputedAdapter  # noqa: E402
from rvt_bench.core import masks  # noqa: E402
from rvt_bench.loaders.revos import ReVOSDataset  # noqa: E402
from rvt_bench.core.types import AdapterError, Prediction  # noqa: E402
from rvt_bench.core.records import ScoreRecord  # noqa: E402
from rvt_bench.metrics.protocols.revos import ReVOSProtocol, ReVOSValues  # noqa: E402

cv2.setNumThreads(1)  # one thread per worker process: the pools are the parallelism, not OpenCV's threads
EXPRESSIONS_PER_VIDEO = 5
OBJECTS_PER_VIDEO = 3


def _ellipses(h: int, w: int, n: int, rng: np.random.Generator) -> list[list[tuple[float, float, float, float]]]:
    """Per object, per frame (cy, cx, ry, rx): objects drifting across the frame."""
    out = []
    for _ in range(OBJECTS_PER_VIDEO):
        cy, cx = rng.uniform(0.2 * h, 0.8 * h), rng.uniform(0.2 * w, 0.8 * w)
        vy, vx = rng.uniform(-3, 3), rng.uniform(-6, 6)
        ry, rx = rng.uniform(0.05 * h, 0.2 * h), rng.uniform(0.05 * w, 0.2 * w)
        out.append([(cy + vy * t, cx + vx * t, ry, rx) for t in range(n)])
    return out


def _draw(h: int, w: int, e: tuple[float, float, float, float]) -> np.ndarray:
    import cv2

    m = np.zeros((h, w), dtype=np.uint8)
    cy, cx, ry, rx = e
    cv2.ellipse(m, (int(cx), int(cy)), (int(rx), int(ry)), 0, 0, 360, 1, -1)
    return m.astype(bool)


def _make_video(args: tuple) -> tuple[str, dict, dict, dict]:
    """Write one video's frames and prediction PNGs; return its meta, mask_dict and foreground."""
    import cv2

    work, v, h, w, n, seed = args
    rng = np.random.default_rng(seed)
    video = f"SYN/all/v{v:04d}" if v % 4 == 0 else f"v{v:04d}"  # some nested, as ReVOS's UVO videos
    frames = [f"{k:05d}" for k in range(n)]
    frame_dir = work / "ReVOS" / "JPEGImages" / video
    frame_dir.mkdir(parents=True, exist_ok=True)
    first = frame_dir / f"{frames[0]}.jpg"
    cv2.imwrite(str(first), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    for f in frames[1:]:
        if not (frame_dir / f"{f}.jpg").exists():
            os.link(first, frame_dir / f"{f}.jpg")
    tracks = _ellipses(h, w, n, rng)
    objs = [[_draw(h, w, e) for e in track] for track in tracks]
    anno_ids = [v * OBJECTS_PER_VIDEO + o for o in range(OBJECTS_PER_VIDEO)]
    mask_dict = {str(a): [masks.encode(m) if m.any() else None for m in objs[o]] for o, a in enumerate(anno_ids)}
    fg = [np.logical_or.reduce([objs[o][k] for o in range(OBJECTS_PER_VIDEO)]) for k in range(n)]
    foreground = {video: {"masks_rle": [masks.encode(m) for m in fg], "foreground_ratio": [float(m.mean()) for m in fg]}}
    expressions = {}
    for e in range(EXPRESSIONS_PER_VIDEO):
        chosen = [e % OBJECTS_PER_VIDEO] if e < 3 else [0, 1 + e % 2]
        expressions[str(e)] = {"exp": f"expression {e}", "obj_id": chosen, "anno_id": [anno_ids[o] for o in chosen],
                               "type_id": e % 2}
        exp_dir = work / "pred" / video / str(e)
        exp_dir.mkdir(parents=True, exist_ok=True)
        dy, dx = int(rng.integers(-6, 7)), int(rng.integers(-10, 11))
        for k, f in enumerate(frames):
            gt = np.logical_or.reduce([objs[o][k] for o in chosen])
            pred = np.roll(np.roll(gt, dy, 0), dx, 1)
            if e == 4:
                pred |= _draw(h, w, (h / 3, w / 4, h / 12, w / 14))  # a spurious blob: false positives for R
            cv2.imwrite(str(exp_dir / f"{f}.png"), pred.astype(np.uint8) * 255)
    meta = {"vid_id": v, "height": h, "width": w, "frames": frames, "expressions": expressions}
    return video, meta, mask_dict, foreground


def generate(work: Path, n_exp: int, n_frames: int, h: int, w: int, workers: int) -> None:
    done = work / "ReVOS" / "meta_expressions_valid_.json"
    if done.is_file():
        meta = json.loads(done.read_text())
        got = sum(len(v["expressions"]) for v in meta["videos"].values())
        first = next(iter(meta["videos"].values()))
        if got == n_exp and len(first["frames"]) == n_frames and (first["height"], first["width"]) == (h, w):
            print(f"generate: reusing {work}")
            return
    n_videos = -(-n_exp // EXPRESSIONS_PER_VIDEO)
    start = time.perf_counter()
    videos, mask_dict, foreground = {}, {}, {}
    with Pool(workers) as pool:
        for video, meta, md, fg in pool.imap(_make_video, [(work, v, h, w, n_frames, 1000 + v) for v in range(n_videos)]):
            videos[video] = meta
            mask_dict.update(md)
            foreground.update(fg)
    (work / "ReVOS" / "mask_dict.json").write_text(json.dumps(mask_dict))
    (work / "ReVOS" / "mask_dict_foreground.json").write_text(json.dumps(foreground))
    done.write_text(json.dumps({"videos": videos}))  # written last: marks the fixture complete
    print(f"generate: {n_videos} videos, {n_videos * EXPRESSIONS_PER_VIDEO} expressions, {n_frames} frames at "
          f"{h}x{w} in {time.perf_counter() - start:.1f} s")


_WORKER: tuple | None = None


def _init(pred_root: str) -> None:
    global _WORKER
    cv2.setNumThreads(1)
    _WORKER = (PrecomputedAdapter(pred_root, layout="revos", workers=1), ReVOSProtocol())


def _score_one(sample) -> ScoreRecord:
    """Predict (read the PNGs) and score one expression in a worker; a broken submission is a
    failure scored as VISA scores it (0)."""
    adapter, protocol = _WORKER
    try:
        pred = adapter.predict(sample)
    except AdapterError as exc:
        pred = Prediction.failure(sample.id, "adapter", str(exc))
    return protocol.score_or_fail(sample, pred)[0]


def _usage() -> tuple[float, float, float]:
    """(CPU seconds of this process + reaped children, peak RSS MB of this process, of the largest child)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, own.ru_maxrss / 1024, kids.ru_maxrss / 1024)


def run_ours(work: Path, workers: int) -> tuple[dict, list[ScoreRecord], float, float]:
    c0, t0 = _usage()[0], time.perf_counter()
    samples = list(ReVOSDataset(work / "ReVOS", split="valid"))
    with Pool(workers, initializer=_init, initargs=(str(work / "pred"),)) as pool:
        records = pool.map(_score_one, samples, chunksize=2)
    result = ReVOSProtocol().aggregate(records)
    return result, records, time.perf_counter() - t0, _usage()[0] - c0


def run_visa(work: Path, visa: Path, workers: int) -> tuple[dict, dict, float, float, float]:
    tools = work / "visa_tools"
    tools.mkdir(exist_ok=True)
    source = (visa / "tools" / "eval_revos.py").read_text()
    if "NUM_WOEKERS = 128" not in source:
        raise SystemExit(f"{visa}/tools/eval_revos.py has no 'NUM_WOEKERS = 128' line (expected VISA @ ec158fde)")
    (tools / "eval_revos.py").write_text(source.replace("NUM_WOEKERS = 128", f"NUM_WOEKERS = {workers}"))
    shutil.copy(visa / "tools" / "metrics.py", tools / "metrics.py")
    try:
        import termcolor  # noqa: F401
    except ImportError:
        (tools / "termcolor.py").write_text("def colored(s, *a, **k):\n    return s\n")
    root = work / "ReVOS"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "eval_revos.py", str(work / "pred"),
                    "--visa_exp_path", str(root / "meta_expressions_valid_.json"),
                    "--visa_mask_path", str(root / "mask_dict.json"),
                    "--visa_foreground_mask_path", str(root / "mask_dict_foreground.json")],
                   cwd=tools, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    results = json.loads((work / "revos_valid.json").read_text())
    import csv

    with open(work / "revos_valid.csv", newline="") as fh:
        rows = {f"{r['video_name']}/{r['exp_id']}": r for r in csv.DictReader(fh)}
    return results, rows, wall, cpu, after.ru_maxrss / 1024


def compare(result: dict, records: list[ScoreRecord], visa_results: dict, visa_rows: dict) -> str:
    by_id = {r.sample_id: r.of(ReVOSValues) for r in records}
    if sorted(by_id) != sorted(visa_rows):
        return f"DIFFERENT expression sets: {len(by_id)} ours, {len(visa_rows)} VISA"
    differ = [(sid, k) for sid, row in visa_rows.items() for k in ("J", "F", "A", "R")
              if round(100 * np.float64(getattr(by_id[sid], k)), 2) != float(row[k])]
    worst = 0.0
    for ours, theirs in (("", "overall"), ("referring/", "referring"), ("reasoning/", "reason")):
        for key, visa_key in (("J", "J"), ("F", "F"), ("A", "A"), ("R", "R"), ("J&F", "JF")):
            worst = max(worst, abs(result["metrics"][ours + key] - visa_results[theirs][visa_key] / 100))
    return (f"per-expression J, F, A, R (rounded as VISA): {len(differ)} of {4 * len(visa_rows)} differ"
            + (f" (first {differ[:3]})" if differ else "") + f"; per type / overall max |diff| {worst:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/rvt_score_scale"))
    parser.add_argument("--expressions", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--visa", type=Path, default=None, help="a checkout of cilinyan/VISA (tools/eval_revos.py)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    generate(args.work, args.expressions, args.frames, args.height, args.width, args.workers)
    load = os.getloadavg()[0]
    result, records, wall, cpu = run_ours(args.work, args.workers)
    _, rss_self, rss_child = _usage()
    n_frames = sum(len(r.of(ReVOSValues).frames.get("J", [])) for r in records)
    print(f"{len(records)} expressions, {args.frames} frames each, {args.height}x{args.width}, {args.workers} workers, "
          f"{os.cpu_count()} CPUs visible, load average before: {load:.1f} (others' work competes)")
    print(f"ours: {wall:.1f} s wall, {cpu:.1f} s CPU ({1000 * wall / max(n_frames, 1):.2f} ms wall per frame); "
          f"peak RSS main {rss_self:.0f} MB, largest worker {rss_child:.0f} MB")
    print("ours: " + ", ".join(f"{k}={v:.4f}" for k, v in result["metrics"].items() if "/" not in k))
    if args.visa is not None:
        visa_results, visa_rows, vwall, vcpu, vrss = run_visa(args.work, args.visa, args.workers)
        print(f"VISA eval_revos.py: {vwall:.1f} s wall, {vcpu:.1f} s CPU; largest process peak RSS {vrss:.0f} MB")
        print(f"ratio VISA / ours: {vwall / wall:.2f}x wall, {vcpu / cpu:.2f}x CPU")
        print(compare(result, records, visa_results, visa_rows))


if __name__ == "__main__":
    main()
