"""The demo's wall time with two checkouts side by side, interleaved (A B A B ...), on this machine.

Each round runs `python run_bench.py` of each checkout in a fresh run directory (so every run does
all the model work) and prints its wall seconds, the 1-minute load average before it, the seconds
the policy generated (metrics.json's adapter report) and whether its scores (metrics.json without the
run's name) and its rollouts equal those of the first run. Used to
compare the embedded policy's runtimes (docs/demo-run.md): a checkout before the runtime swap
needs llama-cpp-python installed in the interpreter given by --python. Not a test.

    python perf/demo_side_by_side.py --checkout old=/tmp/old-checkout --checkout new=. [--rounds 3]
        [--python .venv/bin/python] [--keep DIR] [--] [run_bench.py overrides, e.g. dataset.split=demo]
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

MAPPED = ("adapters", "metrics", "leaderboards", "conf", "demo")  # pyproject.toml's package-dir
SCORES = ("n", "metrics", "breakdown", "failures", "failures_by_kind", "funnel")  # metrics.json's scores


def shim(checkout: Path, root: Path) -> Path:
    """A folder whose `rvt_bench` is `checkout`'s code (pyproject's mapping, as symbolic links), so
    the checkout runs from PYTHONPATH whatever the interpreter has installed editable."""
    pkg = root / "rvt_bench"
    pkg.mkdir(parents=True)
    for entry in (checkout / "bench").iterdir():
        if entry.name not in MAPPED:
            (pkg / entry.name).symlink_to(entry)
    for name in MAPPED:
        (pkg / name).symlink_to(checkout / name)
    return root


def run_once(python: str, checkout: Path, path: Path, work: Path, extra: list[str]) -> dict:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run([python, str(checkout / "run_bench.py"), f"run.root={work / 'runs'}",
                           f"leaderboard.dir={work / 'lb'}", *extra], cwd=checkout,
                          env={**os.environ, "PYTHONPATH": str(path)}, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    metrics = sorted((work / "runs").rglob("metrics.json"))
    preds = sorted((work / "runs").rglob("predictions*.jsonl"))
    texts = {}
    for line in (preds[0].read_text().splitlines() if preds else []):
        rec = json.loads(line)
        texts[rec.get("sample_id")] = (rec.get("trace") or {}).get("rollout")
    body = json.loads(metrics[0].read_text()) if metrics else {}
    # the adapter's report (metrics.json schema 3), else a version 2 file's analytics
    measures = {m.get("key"): m.get("value") for m in (body.get("adapter_report") or {}).get("measures") or []}
    generation = measures.get("generation_s", ((body.get("analytics") or {}).get("latency_s") or {}).get("generation"))
    return {"rc": proc.returncode, "wall": wall, "load": load, "generation": generation,
            "scores": {k: body.get(k) for k in SCORES} if metrics else None,
            "texts": texts, "tail": proc.stderr[-400:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", action="append", required=True, help="NAME=DIR, twice or more")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--keep", help="copy each run's directory here")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    named = [(n, Path(d).resolve()) for n, d in (c.split("=", 1) for c in args.checkout)]
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        paths = {n: shim(d, Path(tmp) / "shim" / n) for n, d in named}
        first = None
        print(f"{'round':>5} {'checkout':<10} {'wall_s':>7} {'load1':>6} {'policy_s':>8}  scores, rollouts vs the first run")
        walls: dict[str, list[float]] = {n: [] for n, _ in named}
        for r in range(args.rounds):
            for name, checkout in named:
                work = Path(tmp) / f"{name}-{r}"
                res = run_once(args.python, checkout, paths[name], work, args.overrides)
                if res["rc"] != 0:
                    print(f"{r:>5} {name:<10} failed (exit {res['rc']}): {res['tail']}")
                    continue
                if args.keep:
                    shutil.copytree(work / "runs", Path(args.keep) / f"{name}-{r}")
                if first is None:
                    first = res
                same_texts = sum(res["texts"].get(k) == v for k, v in first["texts"].items())
                same = (f"scores {'same' if res['scores'] == first['scores'] else 'DIFFERENT'}, "
                        f"{same_texts}/{len(first['texts'])} rollouts identical")
                walls[name].append(res["wall"])
                print(f"{r:>5} {name:<10} {res['wall']:7.1f} {res['load']:6.2f} {res['generation'] or 0:8.1f}  {same}",
                      flush=True)
        for name, w in walls.items():
            if w:
                print(f"{name}: mean {statistics.mean(w):.1f} s, median {statistics.median(w):.1f} s over {len(w)} runs")


if __name__ == "__main__":
    main()
