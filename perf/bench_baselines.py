"""Per-query latency of the baseline adapters, split by stage, on the bundled demo (offline).

Rows (each adapter on the same samples, one query at a time, as the runner calls predict):
- jit / smollm2: JiT with the embedded GGUF policy (SmolLM2-135M, CPU) and oracle perception: the
  real offline default. The tiny model rarely writes a valid plan, so most queries stop after the
  planner (the stages that ran are what is timed).
- jit / scripted: JiT with a scripted policy (instant, valid replies: semantic ids for images,
  a sandboxed program for videos, text for vqa / summaries) and oracle perception: the harness's own
  stages (twin, scene graph, sandbox) with zero LLM time.
- vlm / hf-tiny: the VLM adapter's hf backend on a tiny random Qwen2.5-VL checkpoint (CPU) with the
  tiny random SAM2 (transformers) for masks; replies are gibberish, so segmentation and grounding
  mostly stop at parsing (SAM2 time shows where a reply parsed).
- vlm / loopback: the openai backend against a loopback server with canned valid replies, tiny
  SAM2: frame sampling + PNG/base64 encoding + HTTP + SAM2 with no model time.
Prints, per row and stage, the mean seconds over the queries where the stage ran, and the mean total
wall time per query. Not a test; real-model latency needs the models (docs/models.md).

    python perf/bench_baselines.py [--samples 8] [--rows jit-smollm2,jit-scripted,vlm-hf,vlm-loopback]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from omegaconf import OmegaConf  # noqa: E402

from rvt_bench.loaders.demo import DemoDataset  # noqa: E402
from rvt_bench.core.types import AdapterError  # noqa: E402

PROGRAM = ("objs = graph['objects']\n"
           "print(json.dumps({'ids': [max(objs, key=lambda o: o['frames'][0])['id']]}))\n")


def _conf(name: str) -> dict:
    from rvt_bench.harness.config import group_node

    # the composed node (schema defaults + conf/model/<name>.yaml), as run_bench.py builds it
    return OmegaConf.to_container(group_node("model", name), resolve=False)


def jit(policy) -> object:
    from rvt_bench.adapters.jit.adapter import JiTAdapter
    from rvt_bench.adapters.twin.oracle import OraclePerception

    import inspect

    # the yaml's own settings only (not Hydra's `defaults` list, which composes the schema)
    takes = set(inspect.signature(JiTAdapter).parameters) - {"policy", "perception", "name"}
    kw = {k: v for k, v in _conf("jit").items() if k in takes}
    return JiTAdapter(policy=policy, perception=OraclePerception(), **kw)


class ScriptFor:
    """A policy answering JiT's calls validly for each sample in turn (see module docstring)."""

    name = "scripted"
    prefill = ""

    def __init__(self, samples):
        self.turns = []
        for s in samples:
            if s.task in ("vqa", "summarization"):
                self.turns += ['{"query_type": "semantic", "specialists": []}', "Two objects move."]
            elif s.modality == "image":
                self.turns += ['{"query_type": "semantic", "specialists": [{"name": "OWLv2"}]}', '{"ids": [1]}']
            else:
                self.turns += ['{"query_type": "temporal", "specialists": [{"name": "DepthAnything2"}]}', PROGRAM]

    def render(self, messages, prefix=""):
        return json.dumps(messages) + prefix

    def generate(self, prompt, stop, max_new_tokens):
        from rvt_bench.adapters.policy.base import Generation

        text = self.turns.pop(0)
        return Generation(text, "eos", None, len(text.split()))

    def fingerprint(self):
        return {"policy": "scripted"}

    def preflight(self):
        pass

    def close(self):
        pass


def vlm(backend: str, model: str, **kw) -> object:
    from rvt_bench.adapters.twin.backends.sam2_hf import Sam2HFBackend
    from rvt_bench.adapters.vlm.adapter import VLMAdapter

    conf = _conf("vlm")
    args = {k: conf[k] for k in ("coords", "frames", "generation", "think", "grounding_fill", "prompts")}
    args["frames"] = dict(args["frames"], num_frames=4, max_pixels=112 * 112)
    args["generation"] = dict(args["generation"], max_new_tokens=32)
    return VLMAdapter(backend=backend, model=model, sam2=Sam2HFBackend.tiny(seed=0, device="cpu"), **args, **kw)


def measure(adapter, samples) -> dict[str, list[float]]:
    stages: dict[str, list[float]] = {"total": []}
    for s in samples:
        t0 = time.perf_counter()
        try:
            timings = adapter.predict(s).timings
        except AdapterError as exc:
            timings = (exc.trace or {}).get("timings", {})
        stages["total"].append(time.perf_counter() - t0)
        for k, v in timings.items():
            stages.setdefault(k, []).append(v)
    return stages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=8, help="demo samples, evenly spaced over the 31 (images, clips, rvt queries)")
    ap.add_argument("--rows", default="jit-smollm2,jit-scripted,vlm-hf,vlm-loopback")
    args = ap.parse_args()
    demo = list(DemoDataset(REPO / "demo"))
    k = max(1, min(args.samples, len(demo)))
    samples = [demo[i] for i in sorted({round(j * (len(demo) - 1) / max(1, k - 1)) for j in range(k)})]
    print(f"{len(samples)} demo samples: " + ", ".join(s.id for s in samples))
    rows = args.rows.split(",")
    results = {}
    if "jit-smollm2" in rows:
        from hydra.utils import instantiate

        policy = instantiate(OmegaConf.load(REPO / "conf/policy/smollm2.yaml"))
        policy.preflight()  # load the GGUF once, outside the timings
        results["jit / smollm2 (GGUF, CPU) + oracle"] = measure(jit(policy), samples)
    if "jit-scripted" in rows:
        results["jit / scripted LLM + oracle"] = measure(jit(ScriptFor(samples)), samples)
    if "vlm-hf" in rows:
        from tests.tiny_vlm import build_tiny_vlm

        with tempfile.TemporaryDirectory() as tmp:
            adapter = vlm("hf", str(build_tiny_vlm(tmp)), device="cpu", dtype="float32")
            adapter.preflight()
            results["vlm / hf tiny Qwen2.5-VL + tiny SAM2 (CPU)"] = measure(adapter, samples)
    if "vlm-loopback" in rows:
        from tests.vlm_server import ChatServer

        server = ChatServer()
        try:
            results["vlm / openai loopback (canned) + tiny SAM2"] = measure(
                vlm("openai", "tiny-vlm", base_url=server.url), samples)
        finally:
            server.close()
    for row, stages in results.items():
        print(f"\n{row}")
        for stage, values in stages.items():
            print(f"  {stage:<10} mean {statistics.mean(values):7.3f} s  (n={len(values)})")


if __name__ == "__main__":
    main()
