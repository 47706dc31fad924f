"""Round trip of one <execute> through the sandbox (adapters/sandbox/), beside a cold
`python -c` start measured in the same run.

    python perf/bench_sandbox.py [--n 50] [--isolation auto]

Needs only the README's install (no pytest, no test module): it builds its own payload, a twin-like
JSON and two instances' RLE masks over 8 frames of 480 x 640.

Prints p50/p95 in ms for:
- warm round trip: one sample's interpreter from the pre-started pool (NumPy/OpenCV imported,
  twin loaded by an earlier round), `print(1)` and a NumPy snippet, sequential;
- first round of a sample: the pool's interpreter was started while the "model" generated (here a
  sleep of --gen-ms), so the twin goes over the pipe with the code;
- cold `python -c pass` and cold `python -c "import numpy, cv2"` (no sandbox) for scale.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

from rvt_bench.adapters.sandbox.runner import SandboxSettings, get_pool
from rvt_bench.core import masks as mask_io

SNIPPETS = {
    "print(1)": "print(1)",
    "numpy snippet": "m = masks[1]\nys, xs = np.nonzero(m[0])\nprint(m.sum(axis=(1, 2)).tolist(), float(xs.mean()), np.linalg.norm(np.ones(100)))",
}


def payload(frames: int = 8, h: int = 480, w: int = 640) -> dict:
    """What code sees of a twin (Twin.to_code_payload's shape): variables and RLE masks of ids 1, 2."""
    rles: dict[str, dict[str, dict]] = {"1": {}, "2": {}}
    for t in range(frames):
        for iid, (y, x) in (("1", (40 + 10 * t, 60)), ("2", (200, 300 + 5 * t))):
            m = np.zeros((h, w), dtype=bool)
            m[y:y + 120, x:x + 90] = True
            rles[iid][str(t)] = mask_io.encode(m)
    twin = {"instances": [{"id": 1, "label": "ball"}, {"id": 2, "label": "cup"}], "video": {"size": [h, w]}}
    return {"variables": {"twin": twin}, "masks": {"shape": [frames, h, w], "rles": rles}}


def pct(xs: list[float]) -> str:
    a = np.asarray(xs) * 1000
    return f"p50 {np.percentile(a, 50):7.1f} ms   p95 {np.percentile(a, 95):7.1f} ms   (n={len(a)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--isolation", default="auto")
    ap.add_argument("--gen-ms", type=float, default=700.0, help="model generation time simulated between samples")
    args = ap.parse_args()
    twin = payload()  # what the code sees
    pool = get_pool(SandboxSettings(isolation=args.isolation, pool_size=2))
    print(f"isolation: {pool.mode}")
    for name, code in SNIPPETS.items():
        session = pool.session()
        session.execute("pass", twin)  # the sample's first round: interpreter ready, twin loaded
        times = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            r = session.execute(code, twin)
            times.append(time.perf_counter() - t0)
            assert r.ok, r.output
        session.close()
        print(f"warm round trip, {name:14s}: {pct(times)}")
    firsts = []
    for _ in range(max(args.n // 5, 5)):
        time.sleep(args.gen_ms / 1000)  # the policy generating the plan and the first <execute>
        session = pool.session()
        t0 = time.perf_counter()
        r = session.execute(SNIPPETS["numpy snippet"], twin)
        firsts.append(time.perf_counter() - t0)
        assert r.ok, r.output
        session.close()
    print(f"first round of a sample (pool, {args.gen_ms:g} ms generation between samples): {pct(firsts)}")
    for label, cmd in (("python -c pass", "pass"), ("python -c 'import numpy, cv2'", "import numpy, cv2")):
        cold = []
        for _ in range(max(args.n // 5, 5)):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", cmd], check=True)
            cold.append(time.perf_counter() - t0)
        print(f"cold {label:28s}: {pct(cold)}")


if __name__ == "__main__":
    main()
