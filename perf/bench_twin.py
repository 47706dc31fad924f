"""Twin construction time per frame (cold = models run, warm = perception cache hits) and the token
size of the twin JSON the policy reads.

Part 1 builds the twin of a synthetic video (moving discs on a gradient, written as PNG frames) with
every tool of the registry through a perception config (conf/perception/<name>.yaml: ``tiny`` =
tiny random models, offline; ``foundation`` = the real hub models, needs the network or the HF
cache). It prints seconds per tool and per frame for a cold build (fresh cache; model loading shown
separately; tiny models are built when the config is instantiated, so their load_s is ~0) and a warm
build (a new perception object on the same cache: no model is loaded). Part 2 measures the twin
JSON of 16 frames x 10 instances (every field filled) at a character budget (default: the schema's
DEFAULT_MAX_CHARS): characters, detail level and tokens of the bundled GGUF policies' tokenizers
(llama.cpp, vocab only). Prints tables; not a test.

    python perf/bench_twin.py [--perception tiny] [--frames 16] [--size 240x427] [--device auto]
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
sys.path.insert(0, str(REPO))

from rvt_bench.adapters.twin.builder import build_twin  # noqa: E402
from rvt_bench.adapters.twin.dag import validate_dag  # noqa: E402
from rvt_bench.adapters.twin.registry import TOOLS  # noqa: E402
from rvt_bench.adapters.twin.schema import (DEFAULT_MAX_CHARS, Depth, FrameInfo, Instance, InstanceFrame,  # noqa: E402
                                            Trajectory, Twin, VideoInfo)
from rvt_bench.core.types import Sample, Target  # noqa: E402

FULL_PLAN = {name: list(spec.requires) for name, spec in TOOLS.items()}


def synthetic_video(directory: Path, frames: int, height: int, width: int) -> list[str]:
    """PNG frames: a vertical gradient with 3 coloured discs moving right (deterministic)."""
    from PIL import Image

    yy, xx = np.mgrid[0:height, 0:width]
    paths = []
    for t in range(frames):
        img = np.stack([(yy * 255 // max(height - 1, 1)).astype(np.uint8)] * 3, axis=-1)
        for k, colour in enumerate([(220, 40, 40), (40, 200, 60), (40, 60, 220)]):
            cx = width * (0.2 + 0.25 * k) + t * width * 0.01
            cy = height * (0.3 + 0.2 * k)
            img[(xx - cx) ** 2 + (yy - cy) ** 2 < (0.08 * min(height, width)) ** 2] = colour
        path = directory / f"{t:05d}.png"
        Image.fromarray(img).save(path)
        paths.append(str(path))
    return paths


def make_perception(name: str, cache_root: Path, device: str):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    import rvt_bench.harness.config  # noqa: F401  registers the structured configs conf/config.yaml's defaults name

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):  # its defaults: the depth model
        cfg = compose("config", overrides=[f"perception={name}", f"run.root={cache_root}"]).perception
    for node in ("sam2", "depth", "owlv2", "qwen"):
        if node in cfg and cfg[node] is not None and device != "auto":
            cfg[node].device = device
    return instantiate(cfg, _convert_="all")


def load_models(perception) -> float:
    """Seconds to load every configured backend's model (the cold build's fixed cost)."""
    t0 = time.perf_counter()
    for backend in getattr(perception, "backends", {}).values():
        if backend is not None:
            backend.components()
    return time.perf_counter() - t0


def timed_build(sample: Sample, perception) -> tuple[Twin, dict[str, float]]:
    """The twin of the full plan and the seconds each tool took."""
    per_tool: dict[str, float] = {}
    run = perception.run

    def timed(tool, s, twin):
        t0 = time.perf_counter()
        run(tool, s, twin)
        per_tool[tool] = time.perf_counter() - t0

    perception.run = timed
    return build_twin(sample, validate_dag(FULL_PLAN), perception), per_tool


def part1(args) -> None:
    height, width = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="rvt-bench-twin-") as tmp:
        tmp = Path(tmp)
        (tmp / "frames").mkdir()
        frames = synthetic_video(tmp / "frames", args.frames, height, width)
        sample = Sample(id="bench/0", dataset="bench", split="bench", modality="video", frames=frames,
                        frame_ids=[f"{t:05d}" for t in range(args.frames)], query="the blue disc",
                        task="segmentation", target=Target(masks=[None] * args.frames), meta={"fps": 6})
        print(f"perception={args.perception} frames={args.frames} size={height}x{width} device={args.device}")
        rows = []
        for label in ("cold", "warm"):
            perception = make_perception(args.perception, tmp, args.device)
            loading = load_models(perception) if label == "cold" else 0.0  # warm must load nothing
            t0 = time.perf_counter()
            twin, per_tool = timed_build(sample, perception)
            total = time.perf_counter() - t0 + loading
            rows.append((label, total, loading, per_tool, twin))
        tools = list(rows[0][3])
        print(f"{'build':<6} {'total_s':>8} {'load_s':>7} {'s/frame':>8}  " + " ".join(f"{t[:14]:>14}" for t in tools))
        for label, total, loading, per_tool, twin in rows:
            per_frame = (total - loading) / args.frames
            print(f"{label:<6} {total:>8.2f} {loading:>7.2f} {per_frame:>8.3f}  "
                  + " ".join(f"{per_tool.get(t, 0.0):>14.3f}" for t in tools))
        warm_cache = rows[1][4].artifacts.get("cache", {})
        print(f"instances={len(rows[0][4].instances)} warm cache: "
              f"{sum(v == 'hit' for v in warm_cache.values())}/{len(warm_cache)} hits")


def dense_twin(frames: int = 16, instances: int = 10, height: int = 480, width: int = 854) -> Twin:
    """A twin with every field filled: each instance visible in every frame with non-integral
    geometry (the worst case for the JSON size), captions of typical length."""
    rng = np.random.default_rng(0)
    twin = Twin(video=VideoInfo(size=[height, width], num_frames=frames, fps=6.0,
                                summary="A brown puppy walks across a checkered blanket, lifts its front left "
                                        "paw, then stands still and barks at a person holding a ball."),
                frames=[FrameInfo(index=t, frame_id=f"{t:05d}", timestamp=t / 6.0,
                                  caption="A puppy stands on a checkered blanket next to a sofa and a red ball.")
                        for t in range(frames)],
                tools=list(FULL_PLAN))
    for i in range(1, instances + 1):
        fr = {}
        for t in range(frames):
            x1, y1 = rng.uniform(0, width - 100), rng.uniform(0, height - 100)
            w, h = rng.uniform(10, 100), rng.uniform(10, 100)
            fr[t] = InstanceFrame([x1, y1, x1 + w, y1 + h], [x1 + w / 2 + 0.37, y1 + h / 2 + 0.61],
                                  int(w * h * 0.7), f"m{i}_{t}")
        twin.instances.append(Instance(
            id=i, frames=fr, label="front left paw", score=float(rng.uniform(0.3, 1.0)),
            depth=Depth(float(rng.uniform(0, 10)), float(rng.uniform(0, 2)), frames, "relative",
                        "relative inverse depth, larger = nearer"),
            trajectory=Trajectory(0, frames - 1, fr[0].centroid, fr[frames - 1].centroid,
                                  [fr[frames - 1].centroid[0] - fr[0].centroid[0],
                                   fr[frames - 1].centroid[1] - fr[0].centroid[1]], float(rng.uniform(50, 500))),
            caption="A small brown dog's paw raised above the blanket."))
    return twin


def part2(max_chars: int) -> None:
    twin = dense_twin()
    text = twin.to_llm_json(max_chars)
    view = json.loads(text)
    print(f"\ntwin JSON, 16 frames x 10 instances, max_chars={max_chars}: {len(text)} chars, "
          f"detail={view['detail']}" + (f" stride={view['track_stride']}" if "track_stride" in view else ""))
    from rvt_bench.adapters.policy.gguf_files import resolve_gguf
    from rvt_bench.adapters.policy.llama_model import LlamaModel

    for key in ("smollm2", "gemma3_270m"):
        try:
            vocab = LlamaModel(resolve_gguf(key), vocab_only=True)
        except Exception as exc:  # a missing optional GGUF package is a line in the table, not a crash
            print(f"  {key:<12} unavailable ({type(exc).__name__}: {exc})")
            continue
        n = len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        vocab.close()
        print(f"  {key:<12} {n:>6} tokens ({len(text) / n:.2f} chars/token)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perception", default="tiny", help="conf/perception/<name>.yaml (tiny | foundation)")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--size", default="240x427", help="HxW of the synthetic frames")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS)
    ap.add_argument("--skip-build", action="store_true", help="only part 2 (JSON size)")
    args = ap.parse_args()
    if not args.skip_build:
        part1(args)
    part2(args.max_chars)


if __name__ == "__main__":
    main()
