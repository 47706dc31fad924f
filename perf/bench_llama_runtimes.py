"""llama.cpp builds side by side: the embedded policy's prompt evaluation and greedy steps on
SmolLM2 Q8_0 with one thread, in the wheel's build (adapters/policy/llama_lib.py) and, when
llama-cpp-python is importable, in its build (the runtime before the swap). Each measurement runs
in its own process (two llama.cpp builds cannot share one), interleaved over rounds; CPU seconds
are printed beside wall seconds because a busy machine inflates wall time. Not a test.

    python perf/bench_llama_runtimes.py [--rounds 3] [--prompt-tokens 1200] [--steps 128]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEXT = ("The digital twin lists instances with boxes at key frames; the policy reads it, writes code, "
        "and answers with instance ids. ") * 200


def measure(runtime: str, prompt_tokens: int, steps: int, extra_bufts: bool) -> dict:
    from rvt_bench.adapters.policy.gguf_files import requantize_gguf, resolve_gguf

    path = str(requantize_gguf(resolve_gguf("smollm2"), "q8_0"))
    if runtime == "wheel":
        from rvt_bench.adapters.policy.llama_model import LlamaContext, LlamaModel

        model = LlamaModel(Path(path), use_extra_bufts=extra_bufts)
        ctx = LlamaContext(model, 4096, 1, 1)
        tokens = model.tokenize(TEXT.encode(), add_bos=True)[:prompt_tokens]
        t = _clock()
        ctx.eval(tokens)
        prompt = _since(t)
        t = _clock()
        for _ in range(steps):
            ctx.decode([int(ctx.logits(-1).argmax())], logits_all=False)
        step = _since(t)
    else:
        from llama_cpp import Llama

        llm = Llama(model_path=path, n_ctx=4096, n_threads=1, n_threads_batch=1, verbose=False)
        tokens = llm.tokenize(TEXT.encode(), add_bos=True)[:prompt_tokens]
        t = _clock()
        llm.eval(tokens)
        prompt = _since(t)
        t = _clock()
        gen = llm.generate(tokens, temp=0.0, top_k=1, reset=True)
        next(gen)  # the prompt is cached but for its last token: one token evaluated
        t = _clock()
        for _ in range(steps):
            next(gen)
        step = _since(t)
    return {"prompt_wall": prompt[0], "prompt_cpu": prompt[1], "step_wall": step[0], "step_cpu": step[1]}


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t[0], time.process_time() - t[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=1200)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # internal: RUNTIME EXTRA_BUFTS in a child
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.prompt_tokens, args.steps, args.one[1] == "1")))
        return
    try:
        import importlib.util

        has_old = importlib.util.find_spec("llama_cpp") is not None
    except ValueError:
        has_old = False
    variants = [("wheel", "0"), ("wheel", "1")] + ([("llama-cpp-python", "0")] if has_old else [])
    print(f"SmolLM2 Q8_0, 1 thread: {args.prompt_tokens}-token prompt, {args.steps} greedy steps "
          f"(ms per token: wall / cpu)")
    print(f"{'round':>5} {'runtime':<18} {'extra_bufts':>11} {'prompt ms/tok':>15} {'step ms/tok':>15} {'load1':>6}")
    for r in range(args.rounds):
        for runtime, bufts in variants:
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, __file__, "--one", runtime, bufts, "--prompt-tokens",
                                  str(args.prompt_tokens), "--steps", str(args.steps)],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{r:>5} {runtime:<18} failed: {out.stderr[-300:]}")
                continue
            m = json.loads(out.stdout.strip().splitlines()[-1])
            p = f"{1e3 * m['prompt_wall'] / args.prompt_tokens:.2f} / {1e3 * m['prompt_cpu'] / args.prompt_tokens:.2f}"
            s = f"{1e3 * m['step_wall'] / args.steps:.2f} / {1e3 * m['step_cpu'] / args.steps:.2f}"
            print(f"{r:>5} {runtime:<18} {bufts:>11} {p:>15} {s:>15} {load:6.2f}", flush=True)


if __name__ == "__main__":
    main()
