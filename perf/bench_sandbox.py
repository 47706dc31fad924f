"""Round trip of one <execute> through the sandbox (adapters/sandbox/), beside a cold
`python -c` start measured in the same run.

    python perf/bench_sandbox.py [--n 50] [--isolation auto]

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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rvt_bench.adapters.sandbox.runner import SandboxSettings, get_pool  # noqa: E402
from rvt_bench.adapters.twin.builder import build_twin  # noqa: E402
from rvt_bench.adapters.twin.oracle import OraclePerception  # noqa: E402
from tests.test_twin_oracle import ALL_TOOLS, synthetic_sample  # noqa: E402

SNIPPETS = {
    "print(1)": "print(1)",
    "numpy snippet": "m = masks[1]\nys, xs = np.nonzero(m[0])\nprint(m.sum(axis=(1, 2)).tolist(), float(xs.mean()), np.linalg.norm(np.ones(100)))",
}


def pct(xs: list[float]) -> str:
    a = np.asarray(xs) * 1000
    return f"p50 {np.percentile(a, 50):7.1f} ms   p95 {np.percentile(a, 95):7.1f} ms   (n={len(a)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--isolation", default="auto")
    ap.add_argument("--gen-ms", type=float, default=700.0, help="model generation time simulated between samples")
    args = ap.parse_args()
    twin = build_twin(synthetic_sample(), ALL_TOOLS, OraclePerception()).to_code_payload()  # what the code sees
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
