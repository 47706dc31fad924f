"""Run Sa2VA's own tools/eval/eval_ref_sav.py on the fixture; print the results JSON it wrote.

Usage (README.md beside this folder)::

    python run_reference.py <Sa2VA checkout> <fixture root> <predictions dir>  > expected_sa2va.json

The script runs unchanged as its own process (``python tools/eval/eval_ref_sav.py
<predictions>/results.json --exp_path <fixture>/meta_expressions_valid.json --mask_path
<fixture>/mask_dict.json``, PYTHONPATH = the checkout, for ``third_parts.revos.utils.metircs``), with
its 128 worker processes; it writes ref_sav_valid.json beside results.json, printed here with the
per-expression rows of its CSV (J, F, JF, A as it rounds them).
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path


def main(ref: Path, root: Path, preds: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ref)}
    proc = subprocess.run([sys.executable, str(ref / "tools/eval/eval_ref_sav.py"), str(preds / "results.json"),
                           "--exp_path", str(root / "meta_expressions_valid.json"),
                           "--mask_path", str(root / "mask_dict.json")],
                          cwd=ref, env=env, capture_output=True, text=True, check=True)
    results = json.loads((preds / "ref_sav_valid.json").read_text())
    with open(preds / "ref_sav_valid.csv") as f:
        rows = sorted(({k: r[k] for k in ("videxp", "type_id", "J", "F", "JF", "A")} for r in csv.DictReader(f)),
                      key=lambda r: r["videxp"])
    return {"results": results, "expressions": rows, "stdout_first_line": proc.stdout.splitlines()[0]}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])), indent=1))
