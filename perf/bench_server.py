"""Throughput of the harness against an OpenAI-compatible server: samples per second, harness
milliseconds per sample, and how many requests the server had in flight, for DT-R1 (twin from the
oracle, `--code-rounds` sandbox rounds), JiT and the VLM adapter at each run.batch_size.

The server is perf/instant_server.py, a stand-in that answers every request at once with a valid
reply (or after --latency-ms), so a run's predict-phase wall time is the harness's own cost on the
critical path: prompt rendering, HTTP, twin building, the sandbox, answer parsing, the fsynced
predictions log. With --real, DT-R1 also runs against llama.cpp's server (tests/llama_server.py,
SmolLM2-135M on this CPU), where the model's time dominates. Not a test: it prints one row per run.

    python perf/bench_server.py [--samples 64] [--batch-sizes 1 8 32] [--adapters dtr1 jit vlm]
        [--latency-ms 0] [--code-rounds 1] [--real] [--real-samples 4]

Columns: samples/s and harness ms/sample (predict-phase wall time / samples), CPU ms/sample (this
process, all threads), the mean and peak requests in flight at the server over the predict phase,
the per-sample stage seconds the adapters report (summed, / samples), failures.
The samples are the demo's 31, repeated with new ids up to --samples (RepeatedDemo).
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf, open_dict  # noqa: E402

import rvt_bench.harness.config  # noqa: E402,F401  (registers the schemas)
from rvt_bench.harness import predict as predict_mod  # noqa: E402
from rvt_bench.harness import runner  # noqa: E402
from rvt_bench.loaders.demo import DemoDataset  # noqa: E402

OmegaConf.register_new_resolver("repo", lambda rel="": str(REPO / rel), replace=True)


class RepeatedDemo:
    """The demo's samples repeated with new ids ("<id>#k") until there are `samples`."""

    def __init__(self, root: str, split: str = "demo", samples: int = 64):
        base = list(DemoDataset(root, split=split))
        self.samples = []
        for k in range(samples):
            s = base[k % len(base)]
            self.samples.append(replace(s, id=f"{s.id}#{k // len(base)}") if k >= len(base) else s)

    def __iter__(self):
        return iter(self.samples)

    def __len__(self) -> int:
        return len(self.samples)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def model_overrides(adapter: str, url: str, model: str, batch: int) -> list[str]:
    """The command line of one run: a batch of `batch` samples with as many requests in flight."""
    if adapter in ("dtr1", "jit"):
        # the stand-in reads the task off DT-R1's user message: the task_hint variant names it
        hint = ["model.task_hint=true"] if adapter == "dtr1" else []
        return [f"+model={adapter}", "policy=openai", f"policy.model={model}", f"policy.base_url={url}",
                f"policy.max_concurrency={batch}", f"run.batch_size={batch}", *hint]
    # no SAM2: segmentation samples fail after the reply (SAM2 is model work, like the twin's perception)
    return ["+model=vlm", f"model.model={model}", f"model.base_url={url}", "model.sam2=null",
            f"model.max_concurrency={batch}", f"run.batch_size={batch}"]


def compose_cfg(root: Path, overrides: list[str], samples: int):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "dataset.split=demo", *overrides,
                                           f"run.root={root / 'runs'}", f"leaderboard.dir={root / 'boards'}",
                                           "leaderboard.publish=false", "run.report=false",
                                           # the VLM runs without SAM2 here (its segmentation samples fail alike
                                           # by design): measure every sample rather than stop after K
                                           "run.stop_after_same_failures=0"])
    with open_dict(cfg):
        cfg.dataset.loader = {"_target_": "perf.bench_server.RepeatedDemo", "root": str(REPO / "demo"), "split": "demo",
                              "samples": samples}
        cfg._overrides = list(overrides)
    return cfg


def measure(overrides: list[str], samples: int, stats_url: str | None) -> dict:
    """One fresh run; the predict phase's figures."""
    timed: dict = {}
    inner = predict_mod.predict

    def timed_predict(*args, **kwargs):
        if stats_url:
            get(stats_url.replace("/stats", "/reset"))
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            timed["wall"], timed["cpu"] = time.perf_counter() - t0, time.process_time() - c0
            if stats_url:
                timed["server"] = get(stats_url)

    runner.predict = timed_predict  # runner imported the name; patch where it is looked up
    try:
        with tempfile.TemporaryDirectory(prefix="rvt-bench-server-") as tmp:
            result = runner.run(compose_cfg(Path(tmp), overrides, samples))
            preds = [json.loads(line) for p in sorted(result.run_dir.glob("predictions*.jsonl"))
                     for line in p.read_text().splitlines()]
    finally:
        runner.predict = inner
    stages: dict[str, float] = defaultdict(float)
    for p in preds:
        for key, value in (p.get("timings") or {}).items():
            if key != "total" and isinstance(value, (int, float)):
                stages[key] += value
    server = timed.get("server") or {}
    return {"n": len(preds), "wall": timed["wall"], "cpu": timed["cpu"],
            "failures": sum(p.get("error") is not None for p in preds),
            "kinds": sorted({p["error"]["kind"] for p in preds if p.get("error")}),
            "mean_in_flight": server.get("request_seconds", 0.0) / timed["wall"] if server else None,
            "peak_in_flight": server.get("peak"), "requests": server.get("requests"),
            "stages": {k: v / max(1, len(preds)) for k, v in sorted(stages.items())},
            "scoring_s": result.scoring_s}


def row(label: str, batch: int, m: dict) -> str:
    stages = " ".join(f"{k}={v * 1000:.0f}" for k, v in m["stages"].items())
    flight = "" if m["mean_in_flight"] is None else f"{m['mean_in_flight']:6.1f} {m['peak_in_flight']:5d}"
    return (f"{label:<18} {batch:>5} {m['n']:>4} {m['n'] / m['wall']:>9.2f} {m['wall'] / m['n'] * 1000:>10.1f} "
            f"{m['cpu'] / m['n'] * 1000:>9.1f} {flight:>12} {m['failures']:>4}{'(' + ','.join(m['kinds']) + ')' if m['kinds'] else ''}"
            f"  ms/sample: {stages}")


HEADER = (f"{'adapter/server':<18} {'batch':>5} {'n':>4} {'samples/s':>9} {'harness ms':>10} {'CPU ms':>9} "
          f"{'in flight':>12} fail")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--adapters", nargs="+", default=["dtr1", "jit", "vlm"], choices=["dtr1", "jit", "vlm"])
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the stand-in's answer time per request")
    parser.add_argument("--code-rounds", type=int, default=1, help="DT-R1 <execute> rounds per rollout")
    parser.add_argument("--repeats", type=int, default=1, help="runs per cell; the median run is printed")
    parser.add_argument("--real", action="store_true", help="also DT-R1 against llama.cpp's server (SmolLM2)")
    parser.add_argument("--real-samples", type=int, default=4)
    args = parser.parse_args()

    port = free_port()
    stand_in = subprocess.Popen([sys.executable, str(REPO / "perf" / "instant_server.py"), "--port", str(port),
                                 "--latency-ms", str(args.latency_ms), "--code-rounds", str(args.code_rounds)],
                                stdout=subprocess.PIPE, text=True)
    try:
        stand_in.stdout.readline()  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/v1"
        print(f"stand-in server: latency {args.latency_ms} ms, DT-R1 code rounds {args.code_rounds}")
        print(HEADER)
        for adapter in args.adapters:
            for batch in args.batch_sizes:
                runs = [measure(model_overrides(adapter, url, "stand-in", batch), args.samples,
                                f"http://127.0.0.1:{port}/stats") for _ in range(args.repeats)]
                median = sorted(runs, key=lambda m: m["wall"])[len(runs) // 2]
                print(row(adapter, batch, median), flush=True)
    finally:
        stand_in.terminate()
        stand_in.wait()
    if args.real:
        real(args)


def real(args: argparse.Namespace) -> None:
    from tests.llama_server import MODEL, LlamaServer

    print(f"\nllama.cpp server (xllamacpp), {MODEL}, DT-R1 with policy.decoding=grammar, {args.real_samples} samples")
    print(HEADER)
    for batch in [b for b in args.batch_sizes if b <= 8]:
        server = LlamaServer(parallel=max(1, batch)).start()
        try:
            m = measure([*model_overrides("dtr1", server.url, MODEL, batch), "policy.decoding=grammar",
                         "policy.grammar_field=grammar", "model.twin_style=compact", "model.twin_max_chars=400"],
                        args.real_samples, None)
        finally:
            server.stop()
        print(row("dtr1/llama.cpp", batch, m), flush=True)


if __name__ == "__main__":
    main()
