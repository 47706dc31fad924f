"""perf/bench_score_scale_mevis.py at a tiny size, this harness only (no reference checkout): the
script runs, its generated MeViS release loads, and our J, F, J&F on its shifted-GT predictions
are the means of per-expression values computed here from the files. Timings are the script's
output, never asserted."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rvt_bench.core import masks

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "bench_score_scale_mevis.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_score_scale_mevis", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_run_scores_the_generated_submission(tmp_path, capsys):
    out = load_script().main(["--work", str(tmp_path), "--videos", "2", "--frames", "3", "--expressions", "2",
                              "--height", "36", "--width", "64", "--workers", "1"])
    assert out["n"] == 4 and out["frames"] == 12 and "reference" not in out
    split = tmp_path / "mevis" / "valid_u"
    meta = json.loads((split / "meta_expressions.json").read_text())["videos"]
    mask_dict = json.loads((split / "mask_dict.json").read_text())
    js = []
    for video, info in meta.items():
        for exp_id, exp in info["expressions"].items():
            per_frame = []
            for t, frame in enumerate(info["frames"]):
                gt = np.zeros((36, 64), dtype=bool)
                for a in exp["anno_id"]:
                    if mask_dict[str(a)][t]:
                        gt |= masks.decode(mask_dict[str(a)][t])
                pred = np.array(Image.open(tmp_path / "pred" / video / exp_id / f"{frame}.png")) > 0
                union = np.count_nonzero(gt | pred)
                per_frame.append(1.0 if union == 0 else np.count_nonzero(gt & pred) / union)
            js.append(np.mean(per_frame))
    assert out["ours"]["J"] == pytest.approx(float(np.mean(js)), abs=1e-12)
    assert "ours:" in capsys.readouterr().out
