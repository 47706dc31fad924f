"""Measure the real vision foundation models behind the twin on a GPU: load time, seconds per frame,
peak GPU memory, and sanity checks of each backend's outputs on a synthetic 16-frame video.

Run when a GPU machine is lent (one short call; weights must already be in the HF cache or in local
directories, because such machines usually have no network):

    python perf/gpu_real_models.py [--frames 16] [--size 480x854] [--out DIR]
        [--sam2 ID_OR_DIR] [--depth ID_OR_DIR] [--owlv2 ID_OR_DIR] [--qwen ID_OR_DIR] [--lisa ID_OR_DIR]
        [--sa2va ID_OR_DIR] [--skip qwen lisa sa2va ...]
    python perf/gpu_real_models.py --tiny     # the same code path with tiny random models, CPU
    python perf/gpu_real_models.py MODEL [MODEL ...] | --all [--data REASONSEG=DIR ...] [--out DIR]
        [--dry-run]    # one published number per released model (perf/published_checks.py)
    (--published [MODEL ...] is the same)

MODEL ... / --all runs, for each model named (--all: one row per model), the rvt-bench command of
perf/published_checks.py that should reproduce one number its authors published, with the public
checkpoint (from the HF cache, or downloaded where the machine has network), on the paper's split, in
the authors' precision and under the paper's scoring variant, and prints ours beside theirs
(percent, difference; whether ours rounds to theirs at the published precision; whether it is within
the check's tolerance). A reproduction on other hardware is not bit-exact: the size of the
difference is the finding. --dry-run prints, per model, the checkpoint, split, precision, expected
value with its source and the command, and runs nothing.

Checks (a failed check is printed and makes the exit status 1; a model that cannot be loaded is
reported as "unavailable" and skipped): DepthAnything V2 maps are (H, W), finite, and nearer discs
(drawn larger and lower) get larger values than the far background (relative inverse depth);
OWLv2 boxes lie inside the non-square frame and the best "disc" box overlaps a drawn disc;
SAM2 tracks are (T, H, W) and a box-prompted disc is tracked in >= half the frames with IoU > 0.5;
Qwen2.5-VL answers are non-empty and a batch answers like one-by-one (left padding);
LISA (adapters/lisa, bfloat16, eval prompt and generated answer) returns one (H, W) mask per frame, and
on the real checkpoint "the large blue disc" overlaps the near disc with IoU > 0.3 and the generated
answer holds a [SEG]. (--lisa needs the checkpoint and openai/clip-vit-large-patch14 in the HF cache.)
Sa2VA (adapters/sa2va, bfloat16, ByteDance/Sa2VA-4B) returns one (H, W) mask per frame of a two-frame
clip and of one image, and on the real checkpoint its answer holds a [SEG] and the clip's first mask
overlaps the near disc with IoU > 0.3. One published number to reproduce with it (docs/models.md "One
published number per model"): `rvt-bench +dataset=mevis dataset.root=/data/mevis dataset.split=valid_u
+model=sa2va` -> MeViS valid_u J&F 55.9 (Sa2VA Table 8, InternVL2.5-4B).
Prints one row per model and writes results.json under --out when given.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rvt_bench.adapters.twin.backends.depth_anything import DepthAnythingBackend  # noqa: E402
from rvt_bench.adapters.twin.backends.owlv2 import Owlv2Backend, box_iou  # noqa: E402
from rvt_bench.adapters.twin.backends.qwen_vl import QwenVLBackend  # noqa: E402
from rvt_bench.adapters.twin.backends.sam2_hf import Sam2HFBackend  # noqa: E402


class LisaBench:
    """rvt_bench.adapters.lisa.adapter.LisaAdapter in both prompt modes, behind run_model's backend interface."""

    def __init__(self, checkpoint: str, device: str, workdir: Path):
        from rvt_bench.adapters.lisa.adapter import LisaAdapter

        self.model_id = checkpoint
        self.workdir = workdir
        self.eval = LisaAdapter(checkpoint, prompt_mode="eval", device=device)
        self.generate = LisaAdapter(checkpoint, prompt_mode="generate", device=device, max_new_tokens=64)

    def components(self):
        loaded = self.eval._load()
        self.generate._loaded = loaded  # one copy of the weights serves both modes
        return loaded

    def answer(self, frames: list[np.ndarray], query: str):
        from PIL import Image

        from rvt_bench.core import masks
        from rvt_bench.core.types import Sample, Target

        paths = []
        for i, frame in enumerate(frames):
            paths.append(str(self.workdir / f"frame{i}.png"))
            Image.fromarray(frame).save(paths[-1])
        sample = Sample(id="disc", dataset="synthetic", split="gpu", modality="video" if len(paths) > 1 else "image",
                        frames=paths, frame_ids=[str(i) for i in range(len(paths))], query=query,
                        task="segmentation", target=Target(), meta={"is_sentence": False})
        evaluated = self.eval.predict(sample)
        generated = self.generate.predict(sample)
        return [masks.decode(r) for r in evaluated.masks], generated.text or ""


class Sa2VABench:
    """rvt_bench.adapters.sa2va.adapter.Sa2VAAdapter behind run_model's backend interface: a clip and its first frame."""

    def __init__(self, checkpoint: str, device: str, workdir: Path, max_new_tokens: int = 64):
        from rvt_bench.adapters.sa2va.adapter import Sa2VAAdapter

        self.model_id = checkpoint
        self.workdir = workdir
        self.adapter = Sa2VAAdapter(checkpoint, device=device, max_new_tokens=max_new_tokens)

    def components(self):
        return self.adapter._load()

    def answer(self, frames: list[np.ndarray], query: str):
        from PIL import Image

        from rvt_bench.core import masks
        from rvt_bench.core.types import Sample, Target

        paths = []
        for i, frame in enumerate(frames):
            paths.append(str(self.workdir / f"sa2va_frame{i}.png"))
            Image.fromarray(frame).save(paths[-1])
        out = []
        for name, modality, chosen in (("clip", "video", paths), ("image", "image", paths[:1])):
            sample = Sample(id=name, dataset="synthetic", split="gpu", modality=modality, frames=chosen,
                            frame_ids=[str(i) for i in range(len(chosen))], query=query, task="segmentation", target=Target())
            pred = self.adapter.predict(sample)
            out.append(([masks.decode(r) for r in pred.masks], pred.text or ""))
        return out


def synthetic_video(frames: int, height: int, width: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Frames (a far grey wall above a floor) with two discs: a small far one high up, a large near
    one low down moving right. Returns (frames, per-frame (2, H, W) bool disc masks)."""
    yy, xx = np.mgrid[0:height, 0:width]
    out, masks = [], []
    for t in range(frames):
        img = np.zeros((height, width, 3), np.uint8)
        img[: height // 2] = 150
        img[height // 2:] = np.linspace(90, 200, height - height // 2, dtype=np.uint8)[:, None, None]
        far = (xx - width * 0.3) ** 2 + (yy - height * 0.3) ** 2 < (0.05 * height) ** 2
        near = (xx - width * (0.4 + 0.01 * t)) ** 2 + (yy - height * 0.75) ** 2 < (0.18 * height) ** 2
        img[far] = (200, 40, 40)
        img[near] = (40, 60, 220)
        out.append(img)
        masks.append(np.stack([far, near]))
    return out, masks


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_gb() -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None


def reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def run_model(name, make, work, checks, results) -> None:
    reset_peak()
    t0 = time.perf_counter()
    try:
        backend = make()
        backend.components()
    except Exception as exc:  # noqa: BLE001 - an absent checkpoint is a reported row, not a crash
        results[name] = {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"[:300]}
        return
    sync()
    load_s = time.perf_counter() - t0
    work(backend)  # warm-up (kernels, caches)
    sync()
    t0 = time.perf_counter()
    output = work(backend)
    sync()
    seconds = time.perf_counter() - t0
    failures = [msg for ok, msg in checks(output) if not ok]
    results[name] = {"status": "ok" if not failures else "check_failed", "model_id": backend.model_id,
                     "load_s": round(load_s, 2), "run_s": round(seconds, 3), "peak_gb": peak_gb(),
                     "failures": failures}


def main() -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--size", default="480x854")
    ap.add_argument("--tiny", action="store_true", help="tiny random models on CPU (tests this script)")
    ap.add_argument("--sam2", default="facebook/sam2.1-hiera-tiny")
    ap.add_argument("--depth", default="depth-anything/Depth-Anything-V2-Small-hf")
    ap.add_argument("--owlv2", default="google/owlv2-base-patch16-ensemble")
    ap.add_argument("--qwen", default="Qwen/Qwen2.5-VL-3B-Instruct")
    ap.add_argument("--lisa", default="xinlai/LISA-7B-v1")
    ap.add_argument("--sa2va", default="ByteDance/Sa2VA-4B")
    ap.add_argument("--skip", nargs="*", default=[], choices=["sam2", "depth", "owlv2", "qwen", "lisa", "sa2va"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--published", nargs="*", default=None, metavar="MODEL",
                    help="run perf/published_checks.py's command per model (all when none named)")
    ap.add_argument("--data", nargs="*", default=[], metavar="NAME=DIR", help="--published: data placeholders")
    ap.add_argument("--dry-run", action="store_true", help="--published: print the commands, run nothing")
    ap.add_argument("--all", action="store_true", help="every published check, one row per model")
    ap.add_argument("models", nargs="*", metavar="MODEL", help="published checks of these models (as --published)")
    args = ap.parse_args()
    if args.published is not None or args.models or args.all:
        return published([*(args.published or []), *args.models], args.data, args.out, args.dry_run)
    height, width = (int(v) for v in args.size.split("x"))
    frames, discs = synthetic_video(args.frames, height, width)
    near0 = discs[0][1]
    ys, xs = np.nonzero(near0)
    near_box = [float(xs.min()), float(ys.min()), float(xs.max()) + 1, float(ys.max()) + 1]
    T = args.frames
    results: dict = {}
    tiny = args.tiny

    if "depth" not in args.skip:
        def depth_checks(maps):
            yield all(m.shape == (height, width) for m in maps), f"depth maps not all {(height, width)}"
            yield all(np.isfinite(m).all() for m in maps), "non-finite depth"
            if not tiny:
                m = maps[0]
                yield m[discs[0][1]].mean() > m[:height // 4].mean(), "near disc not larger than far wall"
        run_model("DepthAnythingV2",
                  (lambda: DepthAnythingBackend.tiny(device="cpu")) if tiny else
                  (lambda: DepthAnythingBackend(model_id=args.depth, device="cuda")),
                  lambda b: b.estimate(frames), depth_checks, results)

    if "owlv2" not in args.skip:
        def owl_checks(dets):
            yield all(0 <= d["box"][0] < d["box"][2] <= width and 0 <= d["box"][1] < d["box"][3] <= height
                      for d in dets), "box outside the frame"
            if not tiny:
                yield bool(dets), "no detection"
                yield bool(dets) and box_iou([dets[0]["box"]], [near_box])[0, 0] > 0.3, \
                    "best box does not overlap the near disc"
        run_model("OWLv2",
                  (lambda: Owlv2Backend.tiny(device="cpu", threshold=0.0)) if tiny else
                  (lambda: Owlv2Backend(model_id=args.owlv2, device="cuda", threshold=0.1)),
                  lambda b: b.detect([frames[0]], ["a blue disc", "a red disc"])[0], owl_checks, results)

    if "sam2" not in args.skip:
        def sam_checks(tracks):
            yield len(tracks) == 1 and tracks[0].masks.shape == (T, height, width), "track shape"
            if not tiny and tracks:
                got = tracks[0].masks
                ious = [float((got[t] & discs[t][1]).sum() / max((got[t] | discs[t][1]).sum(), 1)) for t in range(T)]
                yield sum(i > 0.5 for i in ious) >= T / 2, f"near disc tracked badly: IoU {np.round(ious, 2).tolist()}"
        run_model("SAM2 (transformers)",
                  (lambda: Sam2HFBackend.tiny(device="cpu")) if tiny else
                  (lambda: Sam2HFBackend(model_id=args.sam2, device="cuda")),
                  lambda b: b.segment(frames, T // 2, boxes=[near_box]), sam_checks, results)

    if "qwen" not in args.skip:
        requests = [([frames[0]], "Describe this video frame in one sentence."),
                    ([frames[1]], "What colour is the large disc? One word."),
                    ([frames[0], frames[T - 1]], "What moved between these frames? One sentence.")]

        def qwen_work(b):
            return b.generate(requests), [b.generate([r])[0] for r in requests]

        def qwen_checks(out):
            batched, alone = out
            if not tiny:
                yield all(a.strip() for a in batched), "empty answer"
            yield batched == alone, f"batch differs from one-by-one: {batched} vs {alone}"
        run_model("Qwen2.5-VL",
                  (lambda: QwenVLBackend.tiny(device="cpu")) if tiny else
                  (lambda: QwenVLBackend(model_id=args.qwen, device="cuda", max_new_tokens=32)),
                  qwen_work, qwen_checks, results)

    if "lisa" not in args.skip:
        import tempfile

        workdir = Path(tempfile.mkdtemp(prefix="lisa_bench_"))

        def make_lisa():
            checkpoint = args.lisa
            if tiny:
                from tests.lisa_tiny import build_checkpoint

                checkpoint = str(build_checkpoint(workdir / "tiny_lisa"))
            return LisaBench(checkpoint, "cpu" if tiny else "cuda", workdir)

        def lisa_checks(out):
            got, answer = out
            yield len(got) == 2 and all(m.shape == (height, width) for m in got), "mask shapes"
            if not tiny:
                iou = float((got[0] & discs[0][1]).sum() / max((got[0] | discs[0][1]).sum(), 1))
                yield iou > 0.3, f"near disc IoU {iou:.2f}"
                yield "[SEG]" in answer, f"generated answer without [SEG]: {answer!r}"
        run_model("LISA", make_lisa, lambda b: b.answer(frames[:2], "the large blue disc"), lisa_checks, results)

    if "sa2va" not in args.skip:
        import tempfile

        sa2va_dir = Path(tempfile.mkdtemp(prefix="sa2va_bench_"))

        def make_sa2va():
            if tiny:
                from tests.sa2va_tiny import REFERENCE_BOOSTS, build_checkpoint

                return Sa2VABench(str(build_checkpoint(sa2va_dir / "tiny_sa2va", 0, **REFERENCE_BOOSTS)), "cpu", sa2va_dir, 8)
            return Sa2VABench(args.sa2va, "cuda", sa2va_dir)

        def sa2va_checks(out):
            (clip, clip_answer), (image, _) = out
            yield len(clip) == 2 and len(image) == 1 and all(m.shape == (height, width) for m in clip + image), "mask shapes"
            if not tiny:
                iou = float((clip[0] & discs[0][1]).sum() / max((clip[0] | discs[0][1]).sum(), 1))
                yield iou > 0.3, f"near disc IoU {iou:.2f}"
                yield "[SEG]" in clip_answer, f"answer without [SEG]: {clip_answer!r}"
        run_model("Sa2VA", make_sa2va, lambda b: b.answer(frames[:2], "the large blue disc"), sa2va_checks, results)

    print(f"frames={T} size={height}x{width} tiny={tiny}")
    print(f"{'model':<20} {'status':<13} {'load_s':>7} {'run_s':>7} {'s/frame':>8} {'peak_GB':>8}")
    for name, r in results.items():
        if r["status"] == "unavailable":
            print(f"{name:<20} unavailable   {r['error']}")
            continue
        peak = "-" if r["peak_gb"] is None else f"{r['peak_gb']:.2f}"
        print(f"{name:<20} {r['status']:<13} {r['load_s']:>7.2f} {r['run_s']:>7.3f} {r['run_s'] / T:>8.4f} {peak:>8}")
        for msg in r["failures"]:
            print(f"    FAILED: {msg}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "results.json").write_text(json.dumps(results, indent=2))
    return 1 if any(r["status"] == "check_failed" for r in results.values()) else 0


def published(models: list[str], data_args: list[str], out: str | None, dry_run: bool) -> int:
    """--published: run each check's command (a subprocess, as a user runs it), read its metrics.json
    and print ours beside the published value. Exit 1 when a command fails or names an unknown model."""
    import shlex
    import subprocess

    from published_checks import CHECKS, fill, placeholders

    known = {c.model for c in CHECKS}
    unknown = sorted(set(models) - known)
    if unknown:
        print(f"error: no published check for {unknown}; known: {sorted(known)} (perf/published_checks.py)")
        return 1
    bad = [arg for arg in data_args if not re.fullmatch(r"[A-Z][A-Z0-9_]*=.+", arg, re.S)]
    if bad:
        from rvt_bench.core.printable import printable

        print(f"error: --data takes NAME=DIR (NAME as the checks write it, e.g. REASONSEG=/data/reasonseg), got "
              f"{', '.join(printable(repr(arg)) for arg in bad)}")
        return 1
    data = dict(arg.split("=", 1) for arg in data_args)
    work = Path(out or "published_runs").resolve()
    repo = Path(__file__).resolve().parents[1]
    rows, failed = [], False
    for check in CHECKS:
        if models and check.model not in models:
            continue
        missing = [name for name in placeholders(check) if name not in data]
        if missing and not dry_run:
            rows.append((check, None, f"needs --data {' '.join(m + '=DIR' for m in missing)}"))
            failed = True
            continue
        filled = fill(check.overrides, {**{m: "{" + m + "}" for m in missing}, **data})
        runs = work / check.model
        cmd = [sys.executable, str(repo / "run_bench.py"), *filled, f"run.root={runs}/runs",
               f"leaderboard.dir={runs}/boards"]
        if dry_run:
            needs = f"; needs --data {' '.join(m + '=DIR' for m in missing)}" if missing else ""
            print(f"{check.model}: checkpoint {check.checkpoint or '(the config default)'}, split {check.split or '-'}, "
                  f"precision {check.precision or '-'}", flush=True)
        print("$ " + shlex.join(cmd), flush=True)
        if dry_run:
            print(f"  expect {check.metric} {check.expected} +- {check.tolerance} ({check.source}){needs}", flush=True)
            continue
        if subprocess.run(cmd, cwd=repo).returncode != 0:
            rows.append((check, None, "the command failed (its last line above)"))
            failed = True
            continue
        found = sorted((runs / "runs").rglob("metrics.json"), key=lambda f: f.stat().st_mtime)
        value = json.loads(found[-1].read_text())["metrics"].get(check.metric) if found else None
        if value is None:
            failed = True
        rows.append((check, None if value is None else 100 * value, "" if value is not None else
                     f"the run wrote no {check.metric} (metrics.json under {runs / 'runs'})"))
    if dry_run:
        return 0
    print(f"{'model':<16} {'metric':<8} {'published':>9} {'ours':>8} {'diff':>7}  rounds to it  within tolerance")
    for check, ours, note in rows:
        if ours is None:
            print(f"{check.model:<16} {check.metric:<8} {check.expected:>9} {'-':>8} {'-':>7}  {note}")
            continue
        decimals = len(str(check.expected).partition(".")[2])
        same = round(ours, decimals) == check.expected
        within = abs(ours - check.expected) <= check.tolerance
        print(f"{check.model:<16} {check.metric:<8} {check.expected:>9} {ours:>8.2f} {ours - check.expected:>+7.2f}  "
              f"{'yes' if same else 'no'}  {'yes' if within else 'no'} (+-{check.tolerance})   ({check.source})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
