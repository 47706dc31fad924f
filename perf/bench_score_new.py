"""Scale benchmark, the five benchmarks of issue 45: score a scaled submission with this harness and
with the official evaluator, side by side on the same files and machine, and check that both give
the same numbers (perf/bench_score_scale.py and bench_score_scale_mevis.py do the same for ReVOS
and MeViS).

Usage (one benchmark a run; --scale N multiplies the fixture's size):
    python perf/bench_score_new.py grefcoco --work W --ref /tmp/ref/grefref
    python perf/bench_score_new.py saco_gold --work W --ref SAM3_CHECKOUT
    python perf/bench_score_new.py ref_sav --work W --ref SA2VA_CHECKOUT --workers 2
    python perf/bench_score_new.py gseval --work W --ref GROUNDINGSUITE_CHECKOUT --pkgs PKGS
    python perf/bench_score_new.py long_rvos --work W --ref LONG_RVOS_CHECKOUT --workers 2
    python perf/bench_score_new.py all --work W --tiny          (this harness only: tests/test_perf_scripts.py)

The references, at the commits tests/data/<benchmark>_parity/reference/ ran them at, run as their
own process, unchanged but for what each section below says:
- grefcoco: tests/data/grefcoco_parity/reference/run_rela.py (ReLA @ 3ca9551's own load_grefcoco_json,
  test RefCOCOMapper at 480 x 480 and ReferEvaluator, detectron2 @ 02b5c4e's pure-Python modules,
  fvcore / iopath from PyPI, the stand-ins its docstring lists); --ref is the folder it takes
  (gres_model/, detectron2/, pkgs/). It scores val, testA and testB; the fixture puts one ref
  in each test split, so the timing is val's.
- saco_gold: facebookresearch/sam3 @ 99d02f2 scripts/eval/standalone_cgf1.py, run by runpy with
  `sam3` and `sam3.eval` as empty namespaces over the checkout's folders (their __init__ imports the
  model), --gt_files a b c (the oracle over the three annotators), subset metaclip_nps.
- ref_sav: bytedance/Sa2VA @ 9832e1a tools/eval/eval_ref_sav.py (copied to <work>, NUM_WOEKERS =
  128 set to --workers; PYTHONPATH = the checkout for third_parts/revos).
- gseval: hustvl/GroundingSuite @ ff3ea30 evaluate_grounding.py, --mode box then --mode mask
  (--pkgs: a folder with colorama on PYTHONPATH); both modes timed together, ours likewise.
- long_rvos: iSEE-Laboratory/Long_RVOS @ 447682a eval/eval_long_rvos/eval_static.py,
  eval_dynamic.py, eval_hybrid.py, eval_overall.py as run_eval.sh runs them (copied to <work>,
  NUM_WOEKERS = 32 set to --workers), timed together.
Without --ref only this harness is timed.

Ours: the loader, PrecomputedAdapter(layout=<benchmark>).predict and the protocol's score and
aggregate, what `rvt-bench +dataset=<benchmark> +model=precomputed` runs minus writing files; the
video benchmarks in a pool of --workers processes (as the references), the image ones in this
process (the references are single-process).

Fixtures (generated into --work, not timed, reused when the size matches; sizes at --scale 1):
- grefcoco: 100 images (640x480, 480x640, 640x427 JPEGs), 3 objects each (float polygons); per
  image a one-target ref (2 sentences), a two-target ref and a no-target ref (1 each): 400 val
  sentences; predictions at 480 x 480, the GT shifted, 1 in 5 grown by a spurious box, [target,
  no-target] scores giving TP, TN, FP (1 target sentence in 11) and FN (the no-target ref of 1
  image in 4). ReLA's loop costs ~0.1 CPU s a sentence here (JPEG read, mapper, torch).
- saco_gold: 500 images of 768 x 1024, 4 noun phrases each (one negative): 2,000 pairs x 3
  annotators (b's instances a pixel wider, c's a pixel taller and missing one in 7 multi-instance
  pairs, 1 in 10 pairs not exhaustive for a); predictions: each GT instance shifted (score
  0.55-0.99; 0.4, below the threshold, on 1 pair in 13), a spurious one on 1 pair in 3 (0.3 or
  0.7), one on 1 negative in 2 (0.7 or 0.3).
- ref_sav: 10 videos x 4 expressions (long / short, one or two of 3 drifting objects) x 30 frames
  at 720x1280 (1,200 scored frames); results.json with the GT shifted, a spurious blob on 1 in 4.
- gseval: 3,715 lines (the release's count) over 500 images of 480 x 640, classes 1-4; predictions
  a jittered box and the mask shifted, grown or boxed.
- long_rvos: 4 videos x 4 expressions (static / dynamic / static+dynamic) x 60 frames at 720x1280
  (960 scored frames), GT PNG absent where the object is, predictions the GT shifted, some frames'
  PNGs absent.

Printed: the fixture's size, wall and CPU seconds of each side (CPU: this process and reaped
children; the reference's own process tree), the ratio reference / ours, and the largest |diff|
between the reference's numbers and ours. Figures: docs/developer/performance.md ("Scoring the
2026 benchmarks").
"""
from __future__ import annotations

import argparse
import ast
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
from pycocotools import mask as cocomask

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_score_scale import _draw, _ellipses, _usage  # noqa: E402  (drifting ellipses, CPU counters)

from rvt_bench.adapters.precomputed import PrecomputedAdapter  # noqa: E402
from rvt_bench.core.types import AdapterError, Prediction  # noqa: E402

cv2.setNumThreads(1)
REPO = Path(__file__).resolve().parents[1]
BENCHES = ("grefcoco", "saco_gold", "ref_sav", "gseval", "long_rvos")


def _rle(mask: np.ndarray) -> dict:
    r = cocomask.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in r["size"]], "counts": r["counts"].decode("ascii")}


def _jpeg(path: Path, h: int, w: int, cache: dict) -> None:
    """A smooth JPEG of h x w at path, hard-linked to one written per size (decoded as a photo is)."""
    if (h, w) not in cache:
        first = path.parent / f"_base_{h}x{w}.jpg"
        yy, xx = np.mgrid[0:h, 0:w]
        img = np.stack([(xx * 255 // max(w, 1)), (yy * 255 // max(h, 1)), ((xx + yy) % 256)], -1).astype(np.uint8)
        cv2.imwrite(str(first), img)
        cache[(h, w)] = first
    if not path.exists():
        os.link(cache[(h, w)], path)


def _fresh(work: Path, wanted: dict) -> bool:
    """True when work holds a complete fixture of exactly this size (size.json is written last)."""
    size = work / "size.json"
    return size.is_file() and json.loads(size.read_text()) == wanted


def _run(cmd: list[str], **kw) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run a reference command; (its result, wall s, CPU s of its process tree)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"reference failed ({' '.join(cmd[:3])} ...), exit {done.returncode}:\n{done.stderr[-3000:]}")
    return done, wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _predict(adapter, sample) -> Prediction:
    try:
        return adapter.predict(sample)
    except AdapterError as exc:
        return Prediction.failure(sample.id, exc.kind, str(exc), trace=exc.trace)


def _in_process(dataset, pred_root: Path, layout: str, protocol) -> dict:
    adapter = PrecomputedAdapter(pred_root, layout=layout, workers=1)
    return protocol.aggregate([protocol.score_or_fail(s, _predict(adapter, s))[0] for s in dataset])


_WORKER: tuple | None = None


def _init(pred_root: str, layout: str, protocol_cls) -> None:
    global _WORKER
    cv2.setNumThreads(1)
    _WORKER = (PrecomputedAdapter(pred_root, layout=layout, workers=1), protocol_cls())


def _score_one(sample):
    adapter, protocol = _WORKER
    return protocol.score_or_fail(sample, _predict(adapter, sample))[0]


def _pooled(samples: list, pred_root: Path, layout: str, protocol_cls, workers: int) -> dict:
    if workers > 1:
        with Pool(workers, initializer=_init, initargs=(str(pred_root), layout, protocol_cls)) as pool:
            records = pool.map(_score_one, samples, chunksize=1)
    else:
        _init(str(pred_root), layout, protocol_cls)
        records = [_score_one(s) for s in samples]
    return protocol_cls().aggregate(records)


def _worst(pairs) -> float:
    """Largest |ours - reference| over (ours, reference) pairs; inf where only one side has a value."""
    worst = 0.0
    for ours, ref in pairs:
        if (ours is None) != (ref is None):
            return float("inf")
        if ours is not None:
            worst = max(worst, abs(float(ours) - float(ref)))
    return worst


# ---------------------------------------------------------------------------------------------- gRefCOCO

GREF_SIZES = [(640, 480), (480, 640), (640, 427)]  # (W, H)


def _polygon(rng, cx, cy, r, n=12):
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    radii = r * rng.uniform(0.6, 1.0, n)
    return [round(float(v), 2) for v in np.stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)], 1).reshape(-1)]


def gen_grefcoco(work: Path, scale: float, tiny: bool) -> dict:
    n_img = 4 if tiny else int(100 * scale)
    wanted = {"bench": "grefcoco", "images": n_img}
    root, pred = work / "datasets", work / "pred"
    info = {"sizes": f"{4 * n_img} val sentences over {n_img} images (640x480, 480x640, 640x427), "
                     f"+ 1 ref in testA and in testB; masks at 480x480"}
    if _fresh(work, wanted):
        return info
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(pred, ignore_errors=True)
    (root / "grefcoco").mkdir(parents=True)
    (root / "images" / "train2014").mkdir(parents=True)
    (pred / "masks").mkdir(parents=True)
    rng = np.random.default_rng(45)
    cache, images, anns, refs, entries = {}, [], [], [], []
    sent_id = 1
    for i in range(1, n_img + 1):
        w, h = GREF_SIZES[i % 3]
        name = f"COCO_train2014_{i:012d}.jpg"
        _jpeg(root / "images" / "train2014" / name, h, w, cache)
        images.append({"id": i, "file_name": name, "height": h, "width": w})
        ids, polys = [], {}
        for k in range(3):
            aid = 10 * i + k
            r = rng.uniform(0.08, 0.2) * min(w, h)
            poly = _polygon(rng, rng.uniform(0.25, 0.75) * w, rng.uniform(0.25, 0.75) * h, r)
            anns.append({"id": aid, "image_id": i, "category_id": 1 + k, "iscrowd": 0, "segmentation": [poly],
                         "area": 0.0, "bbox": [0, 0, 1, 1]})
            ids.append(aid)
            polys[aid] = poly
        plan = [([ids[0]], 2), ([ids[1], ids[2]], 1), ([], 1)]
        if i == 1:
            plan += [([ids[0]], 1, "testA"), ([ids[1]], 1, "testB")]  # a split of only no-target sentences: ReLA divides by 0
        for k, item in enumerate(plan):
            targets, n_sents = item[0], item[1]
            split = item[2] if len(item) > 2 else "val"
            sents = []
            for j in range(n_sents):
                sents.append({"sent_id": sent_id, "sent": f"object {k} of image {i} sentence {j}", "raw": "x",
                              "tokens": ["object"]})
                gt = np.zeros((480, 480), bool)
                scaled = [list((np.asarray(polys[a], float).reshape(-1, 2) * [480 / w, 480 / h]).reshape(-1)) for a in targets]
                if scaled:
                    gt = cocomask.decode(cocomask.frPyObjects(scaled, 480, 480)).any(axis=2)
                m = np.roll(gt, int(rng.integers(-6, 7)), axis=int(rng.integers(0, 2)))
                if sent_id % 5 == 0:
                    m = m.copy()
                    m[20:90, 30:140] = True
                cv2.imwrite(str(pred / "masks" / f"{sent_id}.png"), m.astype(np.uint8) * 255)
                if targets:
                    nt = [0.3, 0.6] if sent_id % 11 == 0 else [0.9, 0.1]  # FP 1 in 11
                else:
                    nt = [0.7, 0.2] if i % 4 == 0 else [0.1, 0.8]  # FN on 1 image in 4
                entries.append({"sent_id": sent_id, "nt_label": nt, "mask": f"masks/{sent_id}.png"})
                sent_id += 1
            ann_id = targets or [-1]
            refs.append({"ref_id": len(refs), "image_id": i, "ann_id": ann_id, "split": split,
                         "category_id": [1] if targets else [-1], "sent_ids": [s["sent_id"] for s in sents],
                         "sentences": sents, "no_target": not targets})
    (root / "grefcoco" / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": anns, "categories": [{"id": c, "name": f"c{c}"} for c in range(1, 4)]}))
    (root / "grefcoco" / "grefs(unc).json").write_text(json.dumps(refs))
    (pred / "predictions.json").write_text(json.dumps(entries))
    (work / "size.json").write_text(json.dumps(wanted))
    return info


def ours_grefcoco(work: Path, workers: int) -> dict:
    from rvt_bench.loaders.grefcoco import GRefCOCODataset
    from rvt_bench.metrics.protocols.grefcoco import GRefCOCOProtocol

    return _in_process(GRefCOCODataset(work / "datasets", "val"), work / "pred", "grefcoco", GRefCOCOProtocol())


def ref_grefcoco(work: Path, ref: Path, pkgs: Path | None, workers: int) -> tuple[dict, float, float]:
    script = REPO / "tests" / "data" / "grefcoco_parity" / "reference" / "run_rela.py"
    for sub in ("gres_model", "detectron2", "pkgs"):
        if not (ref / sub).is_dir():
            raise SystemExit(f"--ref {ref}: no {sub}/ there (run_rela.py's folder: gres_model/, detectron2/, pkgs/)")
    done, wall, cpu = _run([sys.executable, str(script), str(ref), str(work / "datasets"), str(work / "pred")])
    return json.loads(done.stdout)["val"], wall, cpu


PERCENT = ("gIoU", "cIoU", "Pr@0.7", "Pr@0.8", "Pr@0.9")


def cmp_grefcoco(ours: dict, ref: dict) -> str:
    want = ref["results"]["grefcoco"]
    worst = _worst((ours["metrics"][k], v / 100 if k in PERCENT else v) for k, v in want.items())
    same = ours["n"] == ref["n"] and ours["counts"] == ref["counts"]
    return (f"{len(want)} printed values ({', '.join(sorted(want))}) max |diff| {worst:.2e} (percent as fractions); "
            f"n and TP/TN/FP/FN counts {'identical' if same else 'DIFFER'} ({ref['counts']})")


# ---------------------------------------------------------------------------------------------- SA-Co/Gold

SACO_HW = (768, 1024)


def _box_mask(hw, y0, y1, x0, x1):
    m = np.zeros(hw, np.uint8)
    m[max(y0, 0):y1, max(x0, 0):x1] = 1
    return m


def gen_saco_gold(work: Path, scale: float, tiny: bool) -> dict:
    n_img = 3 if tiny else int(500 * scale)
    h, w = (48, 64) if tiny else SACO_HW
    wanted = {"bench": "saco_gold", "images": n_img, "hw": [h, w]}
    gt, pred = work / "gt", work / "pred"
    info = {"sizes": f"{4 * n_img} pairs ({n_img} negatives) over {n_img} images of {h}x{w}, annotators a, b, c"}
    if _fresh(work, wanted):
        return info
    shutil.rmtree(gt, ignore_errors=True)
    shutil.rmtree(pred, ignore_errors=True)
    (gt / "images").mkdir(parents=True)
    rng = np.random.default_rng(45)
    cache, files = {}, []
    for i in range(n_img):
        name = f"metaclip_{i:08d}.jpeg"
        _jpeg(gt / "images" / name, h, w, cache)
        files.append(name)
    per_ann = {a: ([], []) for a in "abc"}
    results = []
    pair = 0
    for i in range(n_img):
        for k, text in enumerate(("dog", "cup", "lamp", "zebra")):
            pid = 1000000 + pair
            n_inst = 0 if k == 3 else 1 + (pair % 3)
            boxes = []
            for _ in range(n_inst):
                bh, bw = int(rng.integers(h // 10, h // 3)), int(rng.integers(w // 10, w // 3))
                y0, x0 = int(rng.integers(0, h - bh)), int(rng.integers(0, w - bw))
                boxes.append((y0, y0 + bh, x0, x0 + bw))
            for a in "abc":
                images, anns = per_ann[a]
                images.append({"id": pid, "file_name": files[i], "text_input": text, "width": w, "height": h,
                               "queried_category": str(pair), "is_pixel_exhaustive": 1,
                               "is_instance_exhaustive": 0 if (a == "a" and pair % 10 == 9) else 1})
                for j, (y0, y1, x0, x1) in enumerate(boxes):
                    if a == "c" and n_inst > 1 and j == n_inst - 1 and pair % 7 == 0:
                        continue
                    wider, taller = (a == "b"), (a == "c")  # three different masks of each instance
                    m = _box_mask((h, w), y0, y1 + taller, x0, x1 + wider)
                    anns.append({"id": len(anns) + 1, "image_id": pid, "source": "manual", "area": float(m.mean()),
                                 "bbox": [x0 / w, y0 / h, (x1 + wider - x0) / w, (y1 + taller - y0) / h],
                                 "segmentation": _rle(m), "category_id": 1, "iscrowd": 0})
            for (y0, y1, x0, x1) in boxes:
                dy, dx = int(rng.integers(-3, 4)), int(rng.integers(-5, 6))
                results.append({"image_id": pid, "category_id": 1, "bbox": [x0 + dx, y0 + dy, x1 - x0, y1 - y0],
                                "score": 0.4 if pair % 13 == 0 else float(rng.uniform(0.55, 0.99)),
                                "segmentation": _rle(_box_mask((h, w), y0 + dy, y1 + dy, x0 + dx, x1 + dx))})
            if (n_inst and pair % 3 == 0) or (not n_inst and i % 2 == 0):  # spurious; on a negative: IL FP
                results.append({"image_id": pid, "category_id": 1, "bbox": [0, 0, w // 8, h // 8],
                                "score": 0.7 if (pair if n_inst else i // 2) % 2 else 0.3,
                                "segmentation": _rle(_box_mask((h, w), 0, h // 8, 0, w // 8))})
            pair += 1
    for a, (images, anns) in per_ann.items():
        (gt / f"gold_metaclip_merged_{a}_release_test.json").write_text(json.dumps(
            {"info": {}, "images": images, "annotations": anns, "categories": [{"id": 1, "name": "object"}]}))
    dump = pred / "gold_metaclip_nps" / "dumps" / "gold_metaclip_nps"
    dump.mkdir(parents=True)
    (dump / "coco_predictions_segm.json").write_text(json.dumps(results))
    (work / "size.json").write_text(json.dumps(wanted))
    return info


def ours_saco_gold(work: Path, workers: int) -> dict:
    from rvt_bench.loaders.saco_gold import SACoGoldDataset
    from rvt_bench.metrics.protocols.saco_gold import SACoGoldProtocol

    return _in_process(SACoGoldDataset(work / "gt", "metaclip_nps", "abc"), work / "pred", "saco_gold",
                       SACoGoldProtocol())


_SACO_BOOT = """import runpy, sys, types
ref = sys.argv[1]
for name, sub in (("sam3", "sam3"), ("sam3.eval", "sam3/eval")):
    m = types.ModuleType(name); m.__path__ = [ref + "/" + sub]; sys.modules[name] = m
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def ref_saco_gold(work: Path, ref: Path, pkgs: Path | None, workers: int) -> tuple[dict, float, float]:
    script = ref / "scripts" / "eval" / "standalone_cgf1.py"
    if not script.is_file() or not (ref / "sam3" / "eval" / "cgf1_eval.py").is_file():
        raise SystemExit(f"--ref {ref}: no scripts/eval/standalone_cgf1.py or sam3/eval/cgf1_eval.py (a sam3 checkout)")
    pred = work / "pred" / "gold_metaclip_nps" / "dumps" / "gold_metaclip_nps" / "coco_predictions_segm.json"
    gts = [str(work / "gt" / f"gold_metaclip_merged_{a}_release_test.json") for a in "abc"]
    done, wall, cpu = _run([sys.executable, "-c", _SACO_BOOT, str(ref), str(script), "--pred_file", str(pred),
                            "--gt_files", *gts])
    last = [line for line in done.stdout.splitlines() if line.startswith("{")][-1]
    printed = ast.literal_eval(re.sub(r"np\.float\d+\(([^()]*)\)", r"\1", last))
    return {k.removeprefix("cgF1_eval_segm_"): v for k, v in printed.items()}, wall, cpu


def cmp_saco_gold(ours: dict, ref: dict) -> str:
    worst = _worst((ours["metrics"].get(k), None if v == -1 else v) for k, v in ref.items())
    return f"{len(ref)} printed values (cgF1, IL_MCC, positive_micro_F1, ...) max |diff| {worst:.2e}; n {ours['n']}"


# ---------------------------------------------------------------------------------------------- Ref-SAV

def _video_objects(h, w, n, rng):
    return [[_draw(h, w, e) for e in track] for track in _ellipses(h, w, n, rng)]


def gen_ref_sav(work: Path, scale: float, tiny: bool, h: int = 720, w: int = 1280) -> dict:
    n_vid, n_frames = (2, 3) if tiny else (int(10 * scale), 30)
    h, w = (36, 64) if tiny else (h, w)
    wanted = {"bench": "ref_sav", "videos": n_vid, "frames": n_frames, "hw": [h, w]}
    root, pred = work / "ref_sav_eval", work / "pred"
    info = {"sizes": f"{4 * n_vid} expressions ({n_vid} videos x 4) x {n_frames} frames at {h}x{w} "
                     f"= {4 * n_vid * n_frames} scored frames"}
    if _fresh(work, wanted):
        return info
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(pred, ignore_errors=True)
    pred.mkdir(parents=True)
    rng = np.random.default_rng(45)
    cache, videos, mask_dict, results = {}, {}, {}, {}
    for v in range(n_vid):
        video = f"sav_{v:06d}"
        frames = [f"{k:05d}" for k in range(n_frames)]
        (root / "videos" / video).mkdir(parents=True)
        for f in frames:
            _jpeg(root / "videos" / video / f"{f}.jpg", h, w, cache)
        objs = _video_objects(h, w, n_frames, rng)
        annos = [3 * v + o for o in range(3)]
        for o, a in enumerate(annos):
            mask_dict[str(a)] = [_rle(m) if m.any() else None for m in objs[o]]
        expressions = {}
        for e in range(4):
            chosen = [e % 3] if e < 2 else [e % 3, (e + 1) % 3]
            expressions[str(e)] = {"exp": f"expression {e}", "anno_id": [annos[o] for o in chosen], "obj_id": chosen,
                                   "type_id": e % 2}
            dy, dx = int(rng.integers(-6, 7)), int(rng.integers(-10, 11))
            masks_out = []
            for k in range(n_frames):
                m = np.roll(np.roll(np.logical_or.reduce([objs[o][k] for o in chosen]), dy, 0), dx, 1)
                if e == 3:
                    m = m | _draw(h, w, (h / 3, w / 4, h / 12, w / 14))
                masks_out.append(_rle(m))
            results.setdefault(video, {})[str(e)] = {"video_id": video, "exp_id": str(e), "exp": f"expression {e}",
                                                     "frames": frames, "prediction_masks": masks_out}
        videos[video] = {"frames": frames, "height": h, "width": w, "expressions": expressions}
    (root / "meta_expressions_valid.json").write_text(json.dumps({"videos": videos}))
    (root / "mask_dict.json").write_text(json.dumps(mask_dict))
    (pred / "results.json").write_text(json.dumps(results))
    (work / "size.json").write_text(json.dumps(wanted))
    return info


def ours_ref_sav(work: Path, workers: int) -> dict:
    from rvt_bench.loaders.ref_sav import RefSAVDataset
    from rvt_bench.metrics.protocols.ref_sav import RefSAVProtocol

    return _pooled(list(RefSAVDataset(work / "ref_sav_eval")), work / "pred", "ref_sav", RefSAVProtocol, workers)


def ref_ref_sav(work: Path, ref: Path, pkgs: Path | None, workers: int) -> tuple[dict, float, float]:
    source_path = ref / "tools" / "eval" / "eval_ref_sav.py"
    if not source_path.is_file() or "NUM_WOEKERS = 128" not in source_path.read_text():
        raise SystemExit(f"--ref {ref}: no tools/eval/eval_ref_sav.py with 'NUM_WOEKERS = 128' (Sa2VA @ 9832e1a)")
    tools = work / "sa2va_tools"
    tools.mkdir(exist_ok=True)
    (tools / "eval_ref_sav.py").write_text(source_path.read_text().replace("NUM_WOEKERS = 128",
                                                                            f"NUM_WOEKERS = {workers}"))
    root = work / "ref_sav_eval"
    _, wall, cpu = _run([sys.executable, str(tools / "eval_ref_sav.py"), str(work / "pred" / "results.json"),
                         "--exp_path", str(root / "meta_expressions_valid.json"),
                         "--mask_path", str(root / "mask_dict.json")],
                        cwd=ref, env={**os.environ, "PYTHONPATH": str(ref)})
    return json.loads((work / "pred" / "ref_sav_valid.json").read_text()), wall, cpu


def cmp_ref_sav(ours: dict, ref: dict) -> str:
    prefix = {"long": "long/", "short": "short/", "overall": ""}
    pairs = [(100 * ours["metrics"][f"{prefix[s]}{m}"], ref[s][r]) for s in prefix
             for m, r in (("J", "J"), ("F", "F"), ("A", "A"), ("J&F", "JF"))]
    return f"J, F, A, J&F of long / short / overall (12 printed values, percent) max |diff| {_worst(pairs):.2e}"


# ---------------------------------------------------------------------------------------------- GroundingSuite-Eval

def gen_gseval(work: Path, scale: float, tiny: bool) -> dict:
    n_lines = 6 if tiny else int(3715 * scale)
    n_img = max(1, n_lines // 7)
    h, w = (36, 48) if tiny else (480, 640)
    wanted = {"bench": "gseval", "lines": n_lines, "hw": [h, w]}
    root, pred = work / "gseval", work / "pred"
    info = {"sizes": f"{n_lines} lines over {n_img} images of {h}x{w}, box and mask mode"}
    if _fresh(work, wanted):
        return info
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(pred, ignore_errors=True)
    (root / "unlabeled2017").mkdir(parents=True)
    pred.mkdir(parents=True)
    rng = np.random.default_rng(45)
    cache, lines, preds = {}, [], []
    for i in range(n_img):
        _jpeg(root / "unlabeled2017" / f"{i:012d}.jpg", h, w, cache)
    for idx in range(n_lines):
        cy, cx = rng.uniform(0.2 * h, 0.8 * h), rng.uniform(0.2 * w, 0.8 * w)
        ry, rx = rng.uniform(0.05 * h, 0.25 * h), rng.uniform(0.05 * w, 0.25 * w)
        m = _draw(h, w, (cy, cx, ry, rx))
        ys, xs = np.nonzero(m)
        box = [float(xs.min()), float(ys.min()), float(xs.max()) + 1, float(ys.max()) + 1]
        lines.append({"idx": idx, "image_path": f"unlabeled2017/{idx % n_img:012d}.jpg", "class_id": 1 + idx % 4,
                      "label": f"thing {idx}", "caption": f"A caption about thing {idx}.", "box": box,
                      "segmentation": _rle(m)})
        kind = idx % 3
        pm = np.roll(m, int(rng.integers(-8, 9)), axis=1) if kind == 0 else \
            cv2.dilate(m.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0 if kind == 1 else \
            _draw(h, w, (cy, cx, 1.3 * ry, 0.8 * rx))
        jitter = max(box[2] - box[0], box[3] - box[1]) * 0.2
        preds.append({"idx": idx, "box": [v + float(rng.uniform(-jitter, jitter)) for v in box],
                      "segmentation": _rle(pm)})
    (root / "GroundingSuite-Eval.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (pred / "model_predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (work / "size.json").write_text(json.dumps(wanted))
    return info


def ours_gseval(work: Path, workers: int) -> dict:
    from rvt_bench.loaders.gseval import GSEvalDataset
    from rvt_bench.metrics.protocols.gseval import GSEvalProtocol

    return {mode: _in_process(GSEvalDataset(work / "gseval", split=mode), work / "pred", "gseval",
                              GSEvalProtocol(mode=mode)) for mode in ("box", "mask")}


def ref_gseval(work: Path, ref: Path, pkgs: Path | None, workers: int) -> tuple[dict, float, float]:
    script = ref / "evaluate_grounding.py"
    if not script.is_file():
        raise SystemExit(f"--ref {ref}: no evaluate_grounding.py (a hustvl/GroundingSuite checkout)")
    env = {**os.environ, "MPLBACKEND": "Agg", **({"PYTHONPATH": str(pkgs)} if pkgs else {})}
    out, wall, cpu = {}, 0.0, 0.0
    root = work / "gseval"
    for mode in ("box", "mask"):
        saved = work / f"gseval_{mode}.json"
        _, w, c = _run([sys.executable, str(script), "--image_dir", str(root), "--gt_file",
                        str(root / "GroundingSuite-Eval.jsonl"), "--pred_file", str(work / "pred" / "model_predictions.jsonl"),
                        "--output_file", str(saved), "--mode", mode, "--vis_samples", "0", "--vis_dir", ""],
                       cwd=work, env=env)
        out[mode] = json.loads(saved.read_text())
        wall, cpu = wall + w, cpu + c
    return out, wall, cpu


def cmp_gseval(ours: dict, ref: dict) -> str:
    box, mask = ours["box"], ours["mask"]
    pairs = [(box["metrics"]["Acc@0.5"], ref["box"]["overall_accuracy"]),
             (mask["metrics"]["gIoU"], ref["mask"]["overall_giou"])]
    pairs += [(box["breakdown"]["class_id"][c]["Acc@0.5"], v) for c, v in ref["box"]["class_accuracies"].items()]
    pairs += [(mask["breakdown"]["class_id"][c]["gIoU"], v) for c, v in ref["mask"]["class_gious"].items()]
    per_ref = {str(r["idx"]): r["iou"] for r in ref["mask"]["results"]}
    return (f"Acc@0.5 and gIoU, overall and per class ({len(pairs)} saved values) max |diff| {_worst(pairs):.2e}; "
            f"{len(per_ref)} mask IoUs saved")


# ---------------------------------------------------------------------------------------------- Long-RVOS

LR_TYPES = ["static", "dynamic", "static+dynamic", "dynamic"]


def gen_long_rvos(work: Path, scale: float, tiny: bool, h: int = 720, w: int = 1280) -> dict:
    n_vid, n_frames = (2, 3) if tiny else (int(4 * scale), 60)
    h, w = (36, 64) if tiny else (h, w)
    wanted = {"bench": "long_rvos", "videos": n_vid, "frames": n_frames, "hw": [h, w]}
    base, pred = work / "long_rvos" / "valid", work / "pred" / "valid"
    info = {"sizes": f"{4 * n_vid} expressions ({n_vid} videos x 4) x {n_frames} frames at {h}x{w} "
                     f"= {4 * n_vid * n_frames} scored frames"}
    if _fresh(work, wanted):
        return info
    shutil.rmtree(work / "long_rvos", ignore_errors=True)
    shutil.rmtree(work / "pred", ignore_errors=True)
    rng = np.random.default_rng(45)
    cache, videos = {}, {}
    for v in range(n_vid):
        video = f"vid{v:04d}"
        frames = [f"{k:05d}" for k in range(n_frames)]
        (base / "JPEGImages" / video).mkdir(parents=True)
        for f in frames:
            _jpeg(base / "JPEGImages" / video / f"{f}.jpg", h, w, cache)
        objs = _video_objects(h, w, n_frames, rng)
        for o in range(3):
            folder = base / "Annotations" / video / str(o)
            folder.mkdir(parents=True)
            for k, f in enumerate(frames):
                if (k // 10 + o) % 4 != 3:  # absent (no PNG) in one stretch of 10 frames in 4
                    cv2.imwrite(str(folder / f"{f}.png"), objs[o][k].astype(np.uint8) * 255)
        expressions = {}
        for e in range(4):
            o = e % 3
            expressions[str(e)] = {"exp": f"expression {e}", "obj_id": o, "type": LR_TYPES[e]}
            folder = pred / video / str(e)
            folder.mkdir(parents=True)
            dy, dx = int(rng.integers(-6, 7)), int(rng.integers(-10, 11))
            for k, f in enumerate(frames):
                if k and (k + e) % 9 == 0:
                    continue  # absent: an empty frame
                present = (k // 10 + o) % 4 != 3
                m = np.roll(np.roll(objs[o][k], dy, 0), dx, 1) if present or e == 1 else np.zeros((h, w), bool)
                cv2.imwrite(str(folder / f"{f}.png"), m.astype(np.uint8) * 255)
        videos[video] = {"frames": frames, "expressions": expressions}
    (base / "meta_expressions.json").write_text(json.dumps({"videos": videos}))
    (work / "size.json").write_text(json.dumps(wanted))
    return info


def ours_long_rvos(work: Path, workers: int) -> dict:
    from rvt_bench.loaders.long_rvos import LongRVOSDataset
    from rvt_bench.metrics.protocols.long_rvos import LongRVOSProtocol

    return _pooled(list(LongRVOSDataset(work / "long_rvos")), work / "pred" / "valid", "long_rvos", LongRVOSProtocol,
                   workers)


def _printed(stdout: str) -> dict:
    out = {}
    for line in stdout.splitlines():
        name, sep, value = line.partition(": ")
        if sep and name in ("J", "F", "J&F", "tIoU", "vIoU"):
            out[name] = float(value)
    return out


def ref_long_rvos(work: Path, ref: Path, pkgs: Path | None, workers: int) -> tuple[dict, float, float]:
    src = ref / "eval" / "eval_long_rvos"
    names = ("eval_static", "eval_dynamic", "eval_hybrid", "eval_overall", "metrics")
    if not all((src / f"{n}.py").is_file() for n in names):
        raise SystemExit(f"--ref {ref}: no eval/eval_long_rvos/{{{','.join(names)}}}.py (a Long_RVOS checkout)")
    tools = work / "long_rvos_tools"
    (tools / "data").mkdir(parents=True, exist_ok=True)
    for n in names:
        text = (src / f"{n}.py").read_text()
        if n != "eval_overall" and n != "metrics":
            if "NUM_WOEKERS = 32" not in text:
                raise SystemExit(f"{src}/{n}.py has no 'NUM_WOEKERS = 32' line (expected Long_RVOS @ 447682a)")
            text = text.replace("NUM_WOEKERS = 32", f"NUM_WOEKERS = {workers}")
        (tools / f"{n}.py").write_text(text)
    link = tools / "data" / "long_rvos"
    if not link.is_symlink():
        link.symlink_to((work / "long_rvos").resolve())
    out, wall, cpu = {}, 0.0, 0.0
    for n in names[:4]:
        done, w, c = _run([sys.executable, str(tools / f"{n}.py"), "--pred_path", str(work / "pred" / "valid"),
                           "--split", "valid"], cwd=tools)
        out[n[len("eval_"):]] = _printed(done.stdout)
        wall, cpu = wall + w, cpu + c
    return out, wall, cpu


def cmp_long_rvos(ours: dict, ref: dict) -> str:
    prefix = {"static": "static/", "dynamic": "dynamic/", "hybrid": "hybrid/", "overall": ""}
    pairs = [(ours["metrics"][f"{prefix[k]}{m}"], ref[k][m]) for k in prefix for m in ("J", "F", "J&F", "tIoU", "vIoU")]
    return f"J, F, J&F, tIoU, vIoU of static / dynamic / hybrid / overall (20 printed values) max |diff| {_worst(pairs):.2e}"


# ---------------------------------------------------------------------------------------------- main

NAMES = {"grefcoco": "ReLA ReferEvaluator (run_rela.py)", "saco_gold": "sam3 standalone_cgf1.py",
         "ref_sav": "Sa2VA eval_ref_sav.py", "gseval": "GroundingSuite evaluate_grounding.py (box + mask)",
         "long_rvos": "Long_RVOS eval_{static,dynamic,hybrid,overall}.py"}


def _headline(bench: str, ours: dict) -> str:
    if bench == "gseval":
        return f"box Acc@0.5={ours['box']['metrics']['Acc@0.5']:.6f}, mask gIoU={ours['mask']['metrics']['gIoU']:.6f}"
    keys = {"grefcoco": ("gIoU", "cIoU", "N_acc", "T_acc"), "saco_gold": ("cgF1", "IL_MCC", "positive_micro_F1"),
            "ref_sav": ("J&F", "J", "F", "A"), "long_rvos": ("J&F", "tIoU", "vIoU")}[bench]
    return ", ".join(f"{k}={ours['metrics'][k]:.6f}" for k in keys)


def run_one(bench: str, args) -> dict:
    g = globals()
    work = args.work / bench
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    info = g[f"gen_{bench}"](work, args.scale, args.tiny)
    gen_s = time.perf_counter() - t0
    load = os.getloadavg()[0]
    c0, t0 = _usage()[0], time.perf_counter()
    ours = g[f"ours_{bench}"](work, args.workers)
    wall, cpu = time.perf_counter() - t0, _usage()[0] - c0
    print(f"{bench}: {info['sizes']}; generated/reused in {gen_s:.1f} s; {args.workers} workers, "
          f"{os.cpu_count()} CPUs visible, load average before: {load:.1f}")
    print(f"{bench} ours: {wall:.1f} s wall, {cpu:.1f} s CPU; {_headline(bench, ours)}")
    out = {"bench": bench, "sizes": info["sizes"], "wall": wall, "cpu": cpu, "ours": ours}
    if args.ref is not None:
        ref, rwall, rcpu = g[f"ref_{bench}"](work, args.ref, args.pkgs, args.workers)
        print(f"{bench} reference, {NAMES[bench]}: {rwall:.1f} s wall, {rcpu:.1f} s CPU")
        print(f"{bench} ratio reference / ours: {rwall / wall:.2f}x wall, {rcpu / max(cpu, 1e-9):.2f}x CPU")
        agreement = g[f"cmp_{bench}"](ours, ref)
        print(f"{bench} agreement: {agreement}")
        out.update(reference=ref, reference_wall=rwall, reference_cpu=rcpu, agreement=agreement)
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", choices=(*BENCHES, "all"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/rvt_score_new"))
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the fixture's size (module docstring)")
    parser.add_argument("--workers", type=int, default=2, help="processes for the video benchmarks, both sides")
    parser.add_argument("--ref", type=Path, default=None, help="the reference's checkout (module docstring)")
    parser.add_argument("--pkgs", type=Path, default=None, help="gseval: a folder with colorama, put on PYTHONPATH")
    parser.add_argument("--tiny", action="store_true", help="a few samples, to check the script runs")
    args = parser.parse_args(argv)
    if args.bench == "all" and args.ref is not None:
        parser.error("--ref names one benchmark's reference: give one benchmark")
    return [run_one(b, args) for b in (BENCHES if args.bench == "all" else (args.bench,))]


if __name__ == "__main__":
    main()
