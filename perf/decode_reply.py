"""Time of `protocol.decode` (adapters/sandbox/protocol.py) on maximal-size adversarial replies:
each body as large as the harness accepts at a given max_output_chars (protocol.max_reply_bytes).
Issue 34: the nesting scan it replaced was quadratic (b'"' + b'\\"' * 24000 took ~18 s).

    python perf/decode_reply.py [--max-output-chars 2000 20000] [--repeat 5]

Prints, per limit and body, the reply's size and the best and worst of --repeat decodes in ms
(the bound to keep: < 50 ms at the largest limit the config accepts, MAX_OUTPUT_CHARS).
"""
from __future__ import annotations

import argparse
import json
import time

from rvt_bench.adapters.sandbox import protocol
from rvt_bench.adapters.sandbox.settings import MAX_OUTPUT_CHARS


def bodies(size: int) -> dict[str, bytes]:
    """Adversarial bodies of `size` bytes (or just under), and the largest legal reply."""
    widest = "\U0010ffff" * 10**6
    legal, n = b"", 1
    lo, hi = 0, size
    while lo < hi:  # the longest output + error of widest characters that fits
        n = (lo + hi + 1) // 2
        legal = json.dumps({"ok": False, "output": widest[:n], "error": widest[:n], "end": None}).encode()
        lo, hi = (n, hi) if len(legal) <= size else (lo, n - 1)
    legal = json.dumps({"ok": False, "output": widest[:lo], "error": widest[:lo], "end": None}).encode()
    return {
        "escaped quotes, unterminated": b'"' + b'\\"' * ((size - 1) // 2),
        "backslashes, unterminated": b'"' + b"\\" * (size - 1),
        "open brackets": b"[" * size,
        "empty strings": b"[" + b'"",' * ((size - 2) // 3) + b"]",
        "quotes only": b'"' * size,
        "brackets inside strings": b"[" + b'"[",' * ((size - 2) // 4) + b"]",
        "brackets and quotes": b'["' * (size // 2),
        "largest legal reply": legal,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-output-chars", type=int, nargs="+", default=[2000, MAX_OUTPUT_CHARS])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for limit in args.max_output_chars:
        size = protocol.max_reply_bytes(limit)
        print(f"max_output_chars={limit}: largest reply {size} bytes")
        for name, body in bodies(size).items():
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                protocol.decode(body)
                times.append((time.perf_counter() - t) * 1000)
            print(f"  {name:30s} {len(body):8d} B  best {min(times):7.2f} ms  worst {max(times):7.2f} ms")


if __name__ == "__main__":
    main()
