"""Run hustvl/GroundingSuite's own evaluate_grounding.py on the fixture in box and mask mode; print
what it saved (aggregates and per-sample IoU).

Usage (README.md beside this folder)::

    python run_reference.py <GroundingSuite checkout> <fixture root> <predictions dir> <colorama dir> > expected_gseval.json

The script runs unchanged as its own process: ``python evaluate_grounding.py --image_dir <fixture>
--gt_file <fixture>/GroundingSuite-Eval.jsonl --pred_file <pred>/model_predictions.jsonl --output_file
<out> --mode box|mask --vis_samples 0 --vis_dir ''`` (colorama from PyPI on PYTHONPATH).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main(ref: Path, root: Path, preds: Path, pkgs: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(pkgs), "MPLBACKEND": "Agg"}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("box", "mask"):
            result = Path(tmp) / f"{mode}.json"
            subprocess.run([sys.executable, str(ref / "evaluate_grounding.py"), "--image_dir", str(root),
                            "--gt_file", str(root / "GroundingSuite-Eval.jsonl"),
                            "--pred_file", str(preds / "model_predictions.jsonl"), "--output_file", str(result),
                            "--mode", mode, "--vis_samples", "0", "--vis_dir", ""],
                           cwd=tmp, env=env, capture_output=True, text=True, check=True)
            saved = json.loads(result.read_text())
            rows = [{k: r.get(k) for k in ("idx", "class_id", "iou", "correct")} for r in saved.pop("results")]
            out[mode] = {**saved, "per_sample": rows}
    return out


if __name__ == "__main__":
    print(json.dumps(main(*(Path(a) for a in sys.argv[1:5])), indent=1))
