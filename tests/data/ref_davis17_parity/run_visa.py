"""Run VISA's tools/eval_davis17.py on the fixture (make_fixture.py) and print what it gives.

    python tests/data/ref_davis17_parity/run_visa.py VISA_CHECKOUT WORK > expected_visa.json

VISA_CHECKOUT: github.com/cilinyan/VISA @ ec158fde9cdf87f702399c73618aa0f1127062e9 (outside this
repository; nothing of it is committed here). Two runs, both of VISA's code unchanged:
1. ``printed``: the script itself, ``python tools/eval_davis17.py PRED --mevis_exp_path ...
   --mevis_mask_path .../mask_dict.pkl`` (128 worker processes), its printed JSON;
2. ``expressions``: its ``eval_queue`` called in this process over the same queue, with the
   module globals ``exp_dict`` / ``mask_dict`` set as its ``__main__`` sets them, restarted after
   each exception (a worker of the script dies on that expression and the others go on):
   ``out_dict`` = {"<video>_<exp>": [J, F]} unrounded; the expressions absent were dropped.
"""
from __future__ import annotations

import importlib.util
import json
import pickle
import queue
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(visa: Path, work: Path) -> dict:
    sys.path.insert(0, str(HERE))
    from make_fixture import write_fixture

    root, pred = write_fixture(work)
    exp_path = root / "meta_expressions" / "valid" / "meta_expressions.json"
    mask_path = root / "valid" / "mask_dict.pkl"
    script = visa / "tools" / "eval_davis17.py"
    done = subprocess.run([sys.executable, str(script), str(pred), "--mevis_exp_path", str(exp_path),
                           "--mevis_mask_path", str(mask_path)], capture_output=True, text=True, timeout=600,
                          cwd=str(visa / "tools"))
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    text = done.stdout
    printed = json.loads(text[text.index("{"):text.index("}") + 1])

    sys.path.insert(0, str(visa / "tools"))
    spec = importlib.util.spec_from_file_location("eval_davis17", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.exp_dict = mod.get_meta_exp(str(exp_path))
    mod.mask_dict = pickle.load(open(mask_path, "rb"))
    q: queue.Queue = queue.Queue()
    for vid_name in mod.exp_dict:
        for exp in mod.exp_dict[vid_name]["expressions"]:
            q.put([vid_name, exp])
    out: dict = {}
    crashed = []
    while not q.empty():
        size = q.qsize()
        try:
            mod.eval_queue(q, 0, out, str(pred))
        except Exception as exc:  # noqa: BLE001  (the script's worker process dies here)
            crashed.append(f"{type(exc).__name__} after {size - q.qsize()} items")
    return {"visa": "cilinyan/VISA@ec158fde9cdf87f702399c73618aa0f1127062e9", "printed": printed,
            "expressions": {k: [float(v[0]), float(v[1])] for k, v in sorted(out.items())}, "crashes": crashed}


if __name__ == "__main__":
    stdout, sys.stdout = sys.stdout, sys.stderr  # eval_queue prints "<video> not found": stderr; the JSON alone on stdout
    result = main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
    sys.stdout = stdout
    print(json.dumps(result, indent=1))
