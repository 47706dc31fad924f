"""Run Long_RVOS's own eval/eval_long_rvos scripts on the fixture, as its run_eval.sh does (static,
dynamic, hybrid, overall); print their printed numbers and the per-expression JSONs they saved.

Usage (README.md beside this folder)::

    python run_reference.py <eval_long_rvos dir> <fixture root> <predictions dir>  > expected_long_rvos.json

Each script runs unchanged as its own process, with its 32 worker processes, in a working directory
where data/long_rvos is the fixture root (the scripts read data/long_rvos/<split>/... relative to it);
--pred_path <work>/pred/valid (a copy of the predictions), --split valid. They save
<static|dynamic|hybrid>_valid.json beside the predictions' folder.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _printed(stdout: str) -> dict:
    out = {}
    for line in stdout.splitlines():
        name, sep, value = line.partition(": ")
        if sep and name in ("J", "F", "J&F", "tIoU", "vIoU"):
            out[name] = float(value)
    return out


def main(ref: Path, root: Path, preds: Path) -> dict:
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "data").mkdir()
        (work / "data" / "long_rvos").symlink_to(root.resolve())
        pred = work / "pred" / "valid"
        shutil.copytree(preds, pred)
        for script in ("eval_static", "eval_dynamic", "eval_hybrid", "eval_overall"):
            proc = subprocess.run([sys.executable, str(ref / f"{script}.py"), "--pred_path", str(pred), "--split", "valid"],
                                  cwd=work, capture_output=True, text=True, check=True)
            out[script[len("eval_"):]] = _printed(proc.stdout)
        out["per_expression"] = {kind: json.loads((work / "pred" / f"{kind}_valid.json").read_text())
                                 for kind in ("static", "dynamic", "hybrid")}
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])), indent=1))
