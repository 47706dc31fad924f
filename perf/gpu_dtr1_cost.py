"""DT-R1's per-query cost on a GPU, in the setting of the paper's 1.54 s per query, split by stage.

The DT-R1 paper (arXiv 2511.12365) reports 1.54 s per query for DT-R1 against 15.24 s for JiT
(leaderboards/paper/dtr1_arxiv2511.12365.csv: unverified, the paper's text was not reachable; its
shipped note says RTX 4090). What the project knows of that setting: the policy is
DeepSeek-R1-Distill-Qwen-7B with the GRPO LoRA adapter (conf/policy/vllm.yaml, docs/training.md),
greedy; the twin is built by the foundation models (SAM2, Depth Anything V2, OWLv2, Qwen2.5-VL;
perception=foundation); samples are rolled out 32 at a time (docs/developer/performance.md
"Throughput": 1.54 s per sample at batch 32). This script runs that configuration with vLLM's
in-process engine (automatic prefix caching on, so each round prefills only its new tokens) and
prints, per query: wall seconds (the run's prediction wall time / samples), and the mean seconds
in perception (the twin), policy (its share of the batched generate calls), code rounds (the
sandbox), the tokens each policy call prefilled and the share of prompt tokens vLLM's prefix cache
held; then ours beside 1.54 s.

Run when a GPU machine is lent (weights already in the HF cache, vllm installed):

    python perf/gpu_dtr1_cost.py --out DIR [--adapter LORA_DIR] [--samples N] [--batch-size 32]
        [--policy vllm|hf] [--] [run_bench.py overrides, e.g. +dataset=reasonseg dataset.root=/data/ReasonSeg]
    python perf/gpu_dtr1_cost.py --dry-run ...     # the plan: settings and command, runs nothing
    python perf/gpu_dtr1_cost.py --run-dir RUN     # the split of a finished run (any DT-R1 run)

Without dataset overrides it runs the bundled demo's 31 samples (dataset.split=demo).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAPER_S = 1.54  # seconds per query, DT-R1 (arXiv 2511.12365; unverified, see the module docstring)
POLICY = "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"


def command(args: argparse.Namespace) -> list[str]:
    """The run_bench.py command of the paper's setting."""
    out = Path(args.out or "gpu-dtr1-cost")
    cmd = [sys.executable, str(REPO / "run_bench.py")]
    if not any(o.startswith("+dataset=") for o in args.overrides):
        cmd += ["+dataset=demo", "dataset.split=demo"]
    cmd += ["+model=dtr1", f"policy={args.policy}", f"policy.model={POLICY}", "perception=foundation",
            f"run.batch_size={args.batch_size}", f"run.root={out / 'runs'}", f"leaderboard.dir={out / 'lb'}"]
    if args.adapter:
        cmd.append(f"policy.adapter={args.adapter}")
    if args.samples:
        cmd.append(f"run.limit={args.samples}")
    return cmd + list(args.overrides)


def split(run_dir: Path) -> dict:
    """Per-query figures of a finished DT-R1 run directory: {"n", "wall_per_query_s", "mean_s":
    {stage: mean seconds over the queries that recorded it}, "prefilled_per_call", "cached_share"}.
    Raises FileNotFoundError when the run has no predictions.jsonl."""
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines() if line.strip()]
    manifest = json.loads((run_dir / "manifest.json").read_text()) if (run_dir / "manifest.json").is_file() else {}
    pred = manifest.get("prediction") or {}
    stages: dict[str, list[float]] = {}
    calls = []
    for rec in records:
        for key, value in (rec.get("timings") or {}).items():
            if isinstance(value, (int, float)):
                stages.setdefault(key, []).append(float(value))
        trace = rec.get("trace")
        calls += [c for c in (trace.get("calls") or []) if isinstance(c, dict)] if isinstance(trace, dict) else []
    counted = [c for c in calls if isinstance(c.get("prefilled"), int)]
    prompt = sum(c.get("prompt_tokens", 0) for c in counted)
    wall = pred.get("seconds")
    return {"n": len(records),
            "wall_per_query_s": float(wall) / len(records) if isinstance(wall, (int, float)) and records else None,
            "mean_s": {k: statistics.mean(v) for k, v in sorted(stages.items())},
            "prefilled_per_call": statistics.mean(c["prefilled"] for c in counted) if counted else None,
            "cached_share": sum(c.get("cached_tokens", 0) for c in counted) / prompt if prompt else None}


def show(fig: dict) -> None:
    names = {"twin": "perception", "policy": "policy", "prefill": "prefill", "decode": "decode",
             "sandbox": "code rounds", "total": "total (per request)"}
    print(f"queries: {fig['n']}")
    if fig["wall_per_query_s"] is not None:
        print(f"wall per query: {fig['wall_per_query_s']:.3f} s (paper: {PAPER_S} s; ratio "
              f"{fig['wall_per_query_s'] / PAPER_S:.2f})")
    for key, value in fig["mean_s"].items():
        print(f"  {names.get(key, key):<22} {value:8.3f} s per query (mean)")
    if fig["prefilled_per_call"] is not None:
        print(f"  tokens prefilled per policy call {fig['prefilled_per_call']:.1f}, "
              f"share of prompt tokens from the prefix cache {100 * fig['cached_share']:.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for the run (run.root, leaderboard.dir)")
    ap.add_argument("--adapter", help="the GRPO LoRA adapter directory (policy.adapter); none = the base policy")
    ap.add_argument("--samples", type=int, help="run.limit")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--policy", default="vllm", choices=["vllm", "hf"])
    ap.add_argument("--dry-run", action="store_true", help="print the plan and run nothing")
    ap.add_argument("--run-dir", help="print the split of this finished run and run nothing")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    if args.run_dir:
        show(split(Path(args.run_dir)))
        return
    cmd = command(args)
    if args.dry_run:
        print(f"setting: policy {POLICY} ({args.policy}, greedy, prefix caching on"
              f"{', LoRA ' + args.adapter if args.adapter else ', no LoRA adapter: the base model'}), "
              f"perception=foundation (SAM2, Depth Anything V2, OWLv2, Qwen2.5-VL), batch {args.batch_size}")
        print(f"paper: {PAPER_S} s per query (unverified; leaderboards/paper/dtr1_arxiv2511.12365.csv)")
        print("command: " + " ".join(cmd))
        print("then: the run's wall per query, the mean seconds per stage, tokens prefilled per call")
        return
    proc = subprocess.run(cmd, cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"run_bench.py failed (exit {proc.returncode}); its last line above says why")
    runs = sorted((Path(args.out or "gpu-dtr1-cost") / "runs").rglob("predictions.jsonl"), key=lambda p: p.stat().st_mtime)
    show(split(runs[-1].parent))


if __name__ == "__main__":
    main()
