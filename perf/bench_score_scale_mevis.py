"""Scale benchmark, MeViS: score a MeViS-valid_u-sized submission of PNGs (default 50 videos x 140
frames x 4 expressions at 720p) with this harness and with the official `tools/eval_mevis.py`,
side by side on the same files and machine, and check that both give the same J, F, J&F
(perf/bench_score_scale.py does the same for ReVOS against VISA's eval_revos.py).

Usage:
    python perf/bench_score_scale_mevis.py --work /tmp/mevis_scale --workers 2 \
        --mevis /path/to/MeViS [--videos 50 --frames 140 --expressions 4]

--mevis: a checkout of github.com/henghuiding/MeViS (tested at 7c0620b9); its tools/eval_mevis.py
and tools/metrics.py are copied to <work>/mevis_tools and run unchanged except NUM_WOEKERS
(hard-coded 64 there) set to --workers. It needs numpy, opencv-python, pycocotools, scikit-image.
Without --mevis only this harness is timed (what tests/test_perf_scripts_mevis.py runs, tiny).

Steps:
1. generate (skipped when --work already holds a complete fixture of the same size): a MeViS root
   mevis/valid_u/ (JPEGImages as hard links to one JPEG per video, meta_expressions.json,
   mask_dict.json) with drifting elliptical objects, some expressions naming two overlapping ones,
   and a submission of 0/255 PNGs <pred>/<video>/<exp_id>/<frame>.png (each expression's GT
   shifted). Not timed.
2. ours: rvt_bench.loaders.mevis.MeViSDataset, then in a pool of --workers processes per expression
   PrecomputedAdapter(layout="mevis").predict and MeViSProtocol.score, then aggregate: what
   `rvt-bench +dataset=mevis +model=precomputed` runs, minus writing files.
3. reference: eval_mevis.py on the same files (a subprocess); its printed J, F, J&F and its
   per-expression file read back.
4. values: per expression J and F and the printed means against ours (max |diff|).
Printed: wall and CPU seconds of each, the ratio reference / ours, peak RSS.

Figures, --workers 2, 720x1280, per expression J and F and the printed J, F, J&F identical in every
run (max |diff| 0.0):
    full size, --videos 50 --frames 140 --expressions 4 (200 expressions, 28,000 scored frames;
    2026-12-05, 2 vCPUs shared with four other engineers' jobs, load average 1.5 at the start, 6.6 at
    the end): ours 39.5 s wall / 66.3 s CPU, eval_mevis.py 741.1 s wall / 679.6 s CPU: 18.8x wall,
    10.3x CPU; peak RSS ours 123 MB main + 421 MB largest worker, eval_mevis.py 966 MB largest
    process (its workers read mask_dict through a Manager proxy, which sends an anno's whole track
    for every frame read). Generating the files took 72 s.
    reduced sizes (2026-12-04, load average 16-18):
    --videos 4 --frames 40 --expressions 4: ours 5.5 s wall / 1.1 s CPU, eval_mevis.py 95.5 s wall /
    18.4 s CPU (17.5x wall, 16.7x CPU); --videos 8 --frames 70 --expressions 4: ours 21.3 s / 4.0 s,
    eval_mevis.py 214.6 s / 64.3 s (10.1x wall, 15.9x CPU).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_score_scale import _draw, _ellipses, _usage  # noqa: E402  (ReVOS's generator and counters)

from rvt_bench.adapters.precomputed import PrecomputedAdapter  # noqa: E402
from rvt_bench.core import masks  # noqa: E402
from rvt_bench.core.records import ScoreRecord  # noqa: E402
from rvt_bench.core.types import AdapterError, Prediction  # noqa: E402
from rvt_bench.loaders.mevis import MeViSDataset  # noqa: E402
from rvt_bench.metrics.protocols.mevis import MeViSProtocol, MeViSValues  # noqa: E402

cv2.setNumThreads(1)  # one thread per worker process: the pools are the parallelism
OBJECTS_PER_VIDEO = 3  # as bench_score_scale._ellipses draws them


def _make_video(args: tuple) -> tuple[str, dict, dict]:
    """Write one video's frames and prediction PNGs; return its meta entry and mask_dict part."""
    work, v, h, w, n, n_exp, seed = args
    rng = np.random.default_rng(seed)
    video = f"{v:04x}{seed:08x}"  # MeViS video names are hex ids
    frames = [f"{k:05d}" for k in range(n)]
    frame_dir = work / "mevis" / "valid_u" / "JPEGImages" / video
    frame_dir.mkdir(parents=True, exist_ok=True)
    first = frame_dir / f"{frames[0]}.jpg"
    cv2.imwrite(str(first), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    for f in frames[1:]:
        if not (frame_dir / f"{f}.jpg").exists():
            os.link(first, frame_dir / f"{f}.jpg")
    objs = [[_draw(h, w, e) for e in track] for track in _ellipses(h, w, n, rng)]
    anno_ids = [v * OBJECTS_PER_VIDEO + o for o in range(OBJECTS_PER_VIDEO)]
    mask_dict = {str(a): [masks.encode(m) if m.any() else None for m in objs[o]] for o, a in enumerate(anno_ids)}
    expressions = {}
    for e in range(n_exp):
        chosen = [e % OBJECTS_PER_VIDEO] if e % 2 == 0 else [0, 1 + e % 2]  # odd ones: two objects, summed
        expressions[str(e)] = {"exp": f"expression {e}", "obj_id": chosen, "anno_id": [anno_ids[o] for o in chosen]}
        exp_dir = work / "pred" / video / str(e)
        exp_dir.mkdir(parents=True, exist_ok=True)
        dy, dx = int(rng.integers(-6, 7)), int(rng.integers(-10, 11))
        for k, f in enumerate(frames):
            gt = np.logical_or.reduce([objs[o][k] for o in chosen])
            cv2.imwrite(str(exp_dir / f"{f}.png"), np.roll(np.roll(gt, dy, 0), dx, 1).astype(np.uint8) * 255)
    return video, {"expressions": expressions, "frames": frames}, mask_dict


def generate(work: Path, n_videos: int, n_frames: int, n_exp: int, h: int, w: int, workers: int) -> None:
    done = work / "mevis" / "valid_u" / "meta_expressions.json"
    size = work / "size.json"
    wanted = {"videos": n_videos, "frames": n_frames, "expressions": n_exp, "h": h, "w": w}
    if done.is_file() and size.is_file() and json.loads(size.read_text()) == wanted:
        print(f"generate: reusing {work}")
        return
    shutil.rmtree(work / "mevis", ignore_errors=True)
    shutil.rmtree(work / "pred", ignore_errors=True)
    start = time.perf_counter()
    videos, mask_dict = {}, {}
    jobs = [(work, v, h, w, n_frames, n_exp, 1000 + v) for v in range(n_videos)]
    if workers > 1:
        with Pool(workers) as pool:
            made = pool.map(_make_video, jobs)
    else:
        made = [_make_video(job) for job in jobs]
    for video, meta, md in made:
        videos[video] = meta
        mask_dict.update(md)
    (work / "mevis" / "valid_u" / "mask_dict.json").write_text(json.dumps(mask_dict))
    done.write_text(json.dumps({"videos": videos}))
    size.write_text(json.dumps(wanted))  # written last: marks the fixture complete
    print(f"generate: {n_videos} videos x {n_frames} frames x {n_exp} expressions at {h}x{w} "
          f"in {time.perf_counter() - start:.1f} s")


_WORKER: tuple | None = None


def _init(pred_root: str) -> None:
    global _WORKER
    cv2.setNumThreads(1)
    _WORKER = (PrecomputedAdapter(pred_root, layout="mevis", workers=1), MeViSProtocol())


def _score_one(sample) -> ScoreRecord:
    adapter, protocol = _WORKER
    try:
        pred = adapter.predict(sample)
    except AdapterError as exc:
        pred = Prediction.failure(sample.id, "adapter", str(exc), trace=exc.trace)
    return protocol.score_or_fail(sample, pred)[0]


def run_ours(work: Path, workers: int) -> tuple[dict, list[ScoreRecord], float, float]:
    c0, t0 = _usage()[0], time.perf_counter()
    samples = list(MeViSDataset(work / "mevis", split="valid_u"))
    if workers > 1:
        with Pool(workers, initializer=_init, initargs=(str(work / "pred"),)) as pool:
            records = pool.map(_score_one, samples, chunksize=1)
    else:
        _init(str(work / "pred"))
        records = [_score_one(s) for s in samples]
    result = MeViSProtocol().aggregate(records)
    return result, records, time.perf_counter() - t0, _usage()[0] - c0


def run_reference(work: Path, checkout: Path, workers: int) -> tuple[dict, dict, float, float, float]:
    import resource

    tools = work / "mevis_tools"
    tools.mkdir(exist_ok=True)
    if not (checkout / "tools" / "eval_mevis.py").is_file():
        raise SystemExit(f"--mevis {checkout}: no tools/eval_mevis.py there (a checkout of henghuiding/MeViS expected)")
    source = (checkout / "tools" / "eval_mevis.py").read_text()
    if "NUM_WOEKERS = 64" not in source:
        raise SystemExit(f"{checkout}/tools/eval_mevis.py has no 'NUM_WOEKERS = 64' line (expected MeViS @ 7c0620b9)")
    (tools / "eval_mevis.py").write_text(source.replace("NUM_WOEKERS = 64", f"NUM_WOEKERS = {workers}"))
    shutil.copy(checkout / "tools" / "metrics.py", tools / "metrics.py")
    split = work / "mevis" / "valid_u"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "eval_mevis.py", "--mevis_exp_path", str(split / "meta_expressions.json"),
                           "--mevis_mask_path", str(split / "mask_dict.json"), "--mevis_pred_path", str(work / "pred"),
                           "--save_name", str(work / "mevis_per_expression.json")],
                          cwd=tools, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    printed = {k: float(v) for k, v in re.findall(r"^(J|F|J&F): (\S+)$", done.stdout, flags=re.M)}
    per = json.loads((work / "mevis_per_expression.json").read_text())
    return printed, per, wall, cpu, after.ru_maxrss / 1024


def compare(result: dict, records: list[ScoreRecord], printed: dict, per: dict) -> str:
    ours = {r.sample_id.replace("/", "_", 1): r.of(MeViSValues) for r in records}
    if sorted(ours) != sorted(per):
        return f"DIFFERENT expression sets: {len(ours)} ours, {len(per)} reference"
    worst = max((max(abs(ours[k].J - j), abs(ours[k].F - f)) for k, (j, f) in per.items()), default=0.0)
    means = max(abs(result["metrics"][k] - printed[k]) for k in ("J", "F", "J&F"))
    return f"per expression J, F max |diff| {worst:.2e}; printed J, F, J&F max |diff| {means:.2e}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/rvt_score_scale_mevis"))
    parser.add_argument("--videos", type=int, default=50)
    parser.add_argument("--frames", type=int, default=140)
    parser.add_argument("--expressions", type=int, default=4, help="per video")
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mevis", type=Path, default=None, help="a checkout of henghuiding/MeViS (tools/eval_mevis.py)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    generate(args.work, args.videos, args.frames, args.expressions, args.height, args.width, args.workers)
    load = os.getloadavg()[0]
    result, records, wall, cpu = run_ours(args.work, args.workers)
    _, rss_self, rss_child = _usage()
    n_frames = sum(len(r.of(MeViSValues).frames.get("J", [])) for r in records)
    print(f"{len(records)} expressions, {n_frames} scored frames, {args.height}x{args.width}, {args.workers} workers, "
          f"{os.cpu_count()} CPUs visible, load average before: {load:.1f} (others' work competes)")
    print(f"ours: {wall:.1f} s wall, {cpu:.1f} s CPU ({1000 * wall / max(n_frames, 1):.2f} ms wall per frame); "
          f"peak RSS main {rss_self:.0f} MB, largest worker {rss_child:.0f} MB")
    print("ours: " + ", ".join(f"{k}={v:.6f}" for k, v in result["metrics"].items()))
    out = {"ours": result["metrics"], "n": len(records), "frames": n_frames, "wall": wall, "cpu": cpu}
    if args.mevis is not None:
        printed, per, rwall, rcpu, rrss = run_reference(args.work, args.mevis, args.workers)
        print(f"eval_mevis.py: {rwall:.1f} s wall, {rcpu:.1f} s CPU; largest process peak RSS {rrss:.0f} MB")
        print(f"ratio eval_mevis.py / ours: {rwall / wall:.2f}x wall, {rcpu / cpu:.2f}x CPU")
        print(compare(result, records, printed, per))
        out.update(reference=printed, reference_wall=rwall, reference_cpu=rcpu)
    return out


if __name__ == "__main__":
    main()
