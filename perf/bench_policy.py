"""Load time and decoding speed of the embedded GGUF policies (adapters/policy/gguf.py).

For each model x runtime: seconds to the first usable model (file resolution, load), prompt
tokens, generated tokens and tokens/s of a greedy continuation of the same DT-R1-style prompt
(no stop string, so every run generates `--tokens` tokens unless the model ends its turn).
Prints one row per combination; not a test.

    python perf/bench_policy.py [--tokens 128] [--threads N] [--models smollm2 gemma3_270m]
        [--runtimes llama_cpp transformers]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rvt_bench.adapters.policy.gguf import GGUFPolicy  # noqa: E402

TEMPLATES = {"smollm2": None, "gemma3_270m": "gemma3"}
MESSAGES = [
    {"role": "system", "content": "You answer questions about a video by planning vision tools. "
     "Write <think>reasoning</think> then <dt_plan>a JSON DAG of tools</dt_plan>."},
    {"role": "user", "content": "Input: a video of 16 frames.\nTask: segmentation.\n"
     "Query: the dog that jumps over the fence after the ball is thrown."},
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", nargs="+", default=list(TEMPLATES))
    ap.add_argument("--runtimes", nargs="+", default=["llama_cpp", "transformers"])
    args = ap.parse_args()
    print(f"threads={args.threads} max_new_tokens={args.tokens}")
    print(f"{'model':<12} {'runtime':<13} {'load_s':>7} {'gen_tokens':>10} {'gen_s':>7} {'tok/s':>7}  stop")
    for model in args.models:
        for runtime in args.runtimes:
            policy = GGUFPolicy(model=model, runtime=runtime, n_ctx=2048, n_threads=args.threads,
                                chat_template=TEMPLATES.get(model))
            prompt = policy.render(MESSAGES, "<think>")
            t0 = time.perf_counter()
            policy._load()  # load separately so tokens/s excludes it
            load_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            gen = policy.generate(prompt, [], args.tokens)
            gen_s = time.perf_counter() - t0
            print(f"{model:<12} {runtime:<13} {load_s:7.2f} {gen.n_tokens:10d} {gen_s:7.2f} "
                  f"{gen.n_tokens / gen_s:7.1f}  {gen.stop_reason}", flush=True)
            policy.close()


if __name__ == "__main__":
    main()
