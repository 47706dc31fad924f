"""`python run_bench.py +model=vlm ...` end to end on a small copy of the demo (tests/small_demo.py:
one image, two clips, a grounding, a VQA and a summary query), through the real runner, scoring and leaderboard:
the openai backend against the loopback chat server (no hub access), and the hf backend on the tiny
random Qwen2.5-VL checkpoint. SAM2 is the tiny random-weight transformers model."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.small_demo import TASKS, make_small_demo
from tests.tiny_vlm import build_tiny_vlm
from tests.vlm_server import ChatServer

REPO = Path(__file__).resolve().parents[1]
TINY_SAM2 = ["model.sam2._target_=rvt_bench.adapters.twin.backends.sam2_hf.Sam2HFBackend.tiny", "~model.sam2.model_id",
             "~model.sam2.revision", "model.sam2.device=cpu"]


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    return make_small_demo(tmp_path_factory.mktemp("demo"))


def bench(*args):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("run directory: "), last
    return Path(last.removeprefix("run directory: "))


def _predictions(run_dir: Path) -> dict[str, dict]:
    return {r["sample_id"]: r for r in map(json.loads, (run_dir / "predictions.jsonl").read_text().splitlines())}


def test_openai_backend_against_a_local_server_runs_every_task(small_demo, tmp_path):
    server = ChatServer(model="tiny-vlm")
    try:
        run_dir = bench("+model=vlm", "model.model=tiny-vlm", f"model.base_url={server.url}", *TINY_SAM2,
                        f"dataset.root={small_demo}", f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    finally:
        server.close()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 6 and metrics["failures"] == 0 and metrics["tasks"] == TASKS
    assert len(server.bodies) == 1 + 6  # the preflight's probe with an image, then one request per sample
    assert all(p["type"] == "image_url" for b in server.bodies for p in b["messages"][-1]["content"][:-1]
               if p["type"] != "text")
    preds = _predictions(run_dir)
    seg = preds["video/launch_pad/0"]
    assert seg["trace"]["reply"] and seg["trace"]["key_frame"] in seg["trace"]["frames"]
    assert set(seg["timings"]) >= {"frames", "vlm", "sam2"} and len(seg["masks"]) == 16
    assert preds["rvt/vqa/coin_entry"]["text"] == "A small object moves."
    assert len(preds["rvt/grounding/launch_pad"]["boxes"]) == 16
    board = pd.read_csv(tmp_path / "boards" / "demo.csv")
    assert list(board["model"]) == ["vlm"]


def test_hf_backend_on_a_tiny_checkpoint_runs_through_the_runner(small_demo, tmp_path):
    checkpoint = build_tiny_vlm(tmp_path / "tiny_vlm")
    run_dir = bench("+model=vlm", "model.backend=hf", f"model.model={checkpoint}", "model.device=cpu",
                    "model.dtype=float32", "model.frames.num_frames=2", "model.frames.max_pixels=12544",
                    "model.generation.max_new_tokens=8", *TINY_SAM2, f"dataset.root={small_demo}",
                    f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 6 and metrics["tasks"] == TASKS
    # random weights: what fails is the reply (no boxes, no answer), recorded as a parse failure
    assert set(metrics["failures_by_kind"]) <= {"parse"}
    preds = _predictions(run_dir)
    for pred in preds.values():
        assert pred["trace"]["backend"].startswith("hf:") and pred["trace"]["prompt"]
    # the VLM's own funnel, counted from its predictions: every request got a reply
    stages = {s["key"]: s["reached"] for s in metrics["adapter_report"]["stages"]}
    assert list(stages) == ["reply_received", "answer_parsed", "sam2_masks", "result_correct"]
    assert stages["reply_received"] == 6 and stages["answer_parsed"] == sum(p["error"] is None for p in preds.values())
    assert "masks from SAM2" in (run_dir / "report.html").read_text()
