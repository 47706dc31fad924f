"""A run that cannot succeed says so at once (bench/harness/predict.py SameFailures, bench/harness/main.py):
`+model=precomputed` with model.root at another benchmark's predictions stops after
run.stop_after_same_failures samples with one line naming model.root and exit status 9; run to its
end, a run whose every sample failed exits 10 (docs/failures.md)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent


def bench(tmp_path, *args):
    # another benchmark's predictions: a ReVOS-layout folder of PNGs, no ReasonSeg file in it
    preds = tmp_path / "revos_preds" / "UVO" / "all" / "0aB3x" / "2"
    preds.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(preds / "00000.png")
    cmd = [sys.executable, str(REPO / "run_bench.py"), "+dataset=reasonseg", f"dataset.root={REPO / 'demo/reasonseg'}",
           "+model=precomputed", f"model.root={tmp_path / 'revos_preds'}", f"run.root={tmp_path / 'runs'}",
           f"leaderboard.dir={tmp_path / 'boards'}", "run.report=false", *args]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180)


def test_predictions_of_another_benchmark_stop_after_k_alike_failures(tmp_path):
    proc = bench(tmp_path, "run.stop_after_same_failures=3")
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 9, proc.stderr[-3000:]
    assert len(lines) == 1 and "the first 3 samples all failed alike" in lines[0] and "fix model.root" in lines[0], lines
    (written,) = list((tmp_path / "runs").rglob("predictions.jsonl"))
    assert len(written.read_text().splitlines()) == 3  # stopped after K, not after all 11
    assert all(json.loads(line)["error"]["kind"] == "adapter" for line in written.read_text().splitlines())


def test_a_run_whose_every_sample_failed_exits_non_zero(tmp_path):
    proc = bench(tmp_path, "run.stop_after_same_failures=0")
    assert proc.returncode == 10, proc.stderr[-3000:]
    assert "every one of the 11 samples failed" in proc.stderr and "run directory: " in proc.stdout
    # the stop line names what went wrong (the first failed sample's reason), not only where to look
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "for the reasons; the first: sample astronaut_flag: prediction PNG " in line and "does not exist" in line, line
