"""The demo's per-query cost, as the DT-R1 paper reports it, with the policy's prefix cache off and on.

Runs `python run_bench.py` (the README's first command) in fresh run directories, alternating
`policy.prefix_cache=false` (every prompt prefilled whole: the shared system prompt and worked
example, and the rollout's earlier rounds, again at every call) and the default
`policy.prefix_cache=true` (each call prefills only the tokens its instance's KV cache does not hold),
and prints for each run its wall seconds, the 1-minute load average before it, the adapter report's
seconds (generation, its prefill / decode split, perception, code rounds), the tokens prefilled,
and how many rollouts equal the first cache-on run's; then the wall ratio (off / on) and, for the
first cache-on run, the per-sample split: seconds in perception (the twin), policy prefill, policy
decode and code rounds (the sandbox), and the tokens each policy call prefilled (of its prompt).

Prefill and decode seconds are each call's own, measured on the llama.cpp instance that ran it: the
demo decodes two rollouts side by side (policy.n_parallel=2), so they sum to about twice the
generation seconds (each rollout's share of the batches' wall time). Not a test.

    python perf/demo_cost.py [--rounds 1] [--python .venv/bin/python] [--keep DIR] [--] [run_bench.py overrides]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETTINGS = (("cache off", "policy.prefix_cache=false"), ("cache on", "policy.prefix_cache=true"))
SECONDS = (("generation_s", "generation"), ("prefill_s", "prefill"), ("decode_s", "decode"),
           ("perception_s", "perception"), ("code_s", "code"))


def run_once(python: str, work: Path, extra: list[str]) -> dict:
    """One `run_bench.py` in `work`: wall seconds, load, the adapter report's measures, the predictions."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([python, str(REPO / "run_bench.py"), f"run.root={work / 'runs'}",
                           f"leaderboard.dir={work / 'lb'}", *extra], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    metrics = sorted((work / "runs").rglob("metrics.json"))
    preds = sorted((work / "runs").rglob("predictions*.jsonl"))
    body = json.loads(metrics[0].read_text()) if metrics else {}
    measures = {m.get("key"): m.get("value") for m in (body.get("adapter_report") or {}).get("measures") or []}
    records = [json.loads(line) for line in (preds[0].read_text().splitlines() if preds else []) if line.strip()]
    return {"rc": proc.returncode, "wall": wall, "load": load, "measures": measures,
            "records": {r.get("sample_id"): r for r in records}, "tail": proc.stderr[-400:]}


def calls(record: dict) -> list[dict]:
    trace = record.get("trace")
    out = trace.get("calls") if isinstance(trace, dict) else None
    return out if isinstance(out, list) else []


def rollout(record: dict) -> str | None:
    trace = record.get("trace")
    return trace.get("rollout") if isinstance(trace, dict) else trace


def prefilled(res: dict) -> tuple[int, int]:
    """(tokens prefilled, prompt tokens) over every policy call of the run."""
    done = [c for r in res["records"].values() for c in calls(r) if isinstance(c.get("prefilled"), int)]
    return sum(c["prefilled"] for c in done), sum(c.get("prompt_tokens", 0) for c in done)


def per_sample(res: dict) -> None:
    """The per-sample split of one run."""
    print(f"{'sample':<28} {'percep_s':>8} {'prefill_s':>9} {'decode_s':>8} {'code_s':>7} {'gen_tok':>7}  "
          "tokens prefilled per call (of the prompt)")
    for sid, rec in sorted(res["records"].items()):
        t = rec.get("timings") or {}
        cs = calls(rec)
        split = ", ".join(f"{c.get('after')}: {c.get('prefilled', '?')}/{c.get('prompt_tokens', '?')}" for c in cs)
        print(f"{sid:<28} {t.get('twin', 0):8.3f} {t.get('prefill', 0):9.3f} {t.get('decode', 0):8.3f} "
              f"{t.get('sandbox', 0):7.3f} {sum(c.get('generated', 0) for c in cs):7d}  {split}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="pairs of runs (off, on)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--keep", help="copy each run's directory here")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    walls: dict[str, list[float]] = {name: [] for name, _ in SETTINGS}
    first_on = None
    with tempfile.TemporaryDirectory(prefix="demo-cost-") as tmp:
        print(f"{'round':>5} {'setting':<9} {'wall_s':>7} {'load1':>6} "
              + " ".join(f"{label + '_s':>13}" for _, label in SECONDS) + f" {'prefilled':>10}  rollouts")
        results = []
        for r in range(args.rounds):
            for name, override in SETTINGS:
                work = Path(tmp) / f"{name.replace(' ', '-')}-{r}"
                res = run_once(args.python, work, [override, *args.overrides])
                if res["rc"] != 0:
                    print(f"{r:>5} {name:<9} failed (exit {res['rc']}): {res['tail']}")
                    continue
                if args.keep:
                    shutil.copytree(work / "runs", Path(args.keep) / work.name)
                results.append((name, res))
                walls[name].append(res["wall"])
                if name == "cache on" and first_on is None:
                    first_on = res
                tokens, prompt = prefilled(res)
                m = res["measures"]
                print(f"{r:>5} {name:<9} {res['wall']:7.1f} {res['load']:6.2f} "
                      + " ".join(f"{float(m.get(key) or 0):13.2f}" for key, _ in SECONDS)
                      + f" {tokens:>10}  (of {prompt} prompt tokens)", flush=True)
        if first_on is not None:
            for name, res in results:
                same = sum(rollout(res["records"].get(k, {})) == rollout(v) for k, v in first_on["records"].items())
                print(f"{name}: {same}/{len(first_on['records'])} rollouts equal the first cache-on run's")
        for name, w in walls.items():
            if w:
                print(f"{name}: mean wall {statistics.mean(w):.1f} s over {len(w)} runs")
        if walls["cache off"] and walls["cache on"]:
            print(f"wall ratio off / on: {statistics.mean(walls['cache off']) / statistics.mean(walls['cache on']):.2f}")
        if first_on is not None:
            print("\nper sample, the first cache-on run:")
            per_sample(first_on)


if __name__ == "__main__":
    main()
