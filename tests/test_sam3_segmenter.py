"""SAM 3 behind the twin's segmenter interface (rvt_bench.adapters.sam3.segmenter) on the tiny
random checkpoint of tests/sam3_tiny.py: tracks over every frame, labelled by their concept."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.sam3.segmenter import Sam3Segmenter
from rvt_bench.core.frames import read_frame
from tests import sam3_tiny

REPO = Path(__file__).resolve().parents[1]
CLIP = sorted((REPO / "demo" / "revos" / "JPEGImages" / "launch_pad").glob("*.jpg"))


@pytest.fixture(scope="module")
def frames():
    return [read_frame(p) for p in CLIP]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, frames):
    return sam3_tiny.build(tmp_path_factory.mktemp("tiny_sam3_seg"), [frames[0]])


def test_tracks_cover_every_frame_and_carry_their_concept(checkpoint, frames):
    seg = Sam3Segmenter(model_id=str(checkpoint), device="cpu", concepts=["rocket", "tower"], max_instances=3)
    tracks = seg.segment(frames, key_frame=len(frames) // 2)
    assert tracks and len(tracks) <= 3
    for track in tracks:
        assert track.masks.shape == (len(frames), *frames[0].shape[:2]) and track.masks.dtype == bool
        assert track.masks.any() and track.label in ("rocket", "tower") and 0.0 < track.score <= 1.0
    assert [t.score for t in tracks] == sorted((t.score for t in tracks), reverse=True)


def test_detector_labels_are_the_concepts_and_no_prompt_is_no_track(checkpoint, frames):
    seg = Sam3Segmenter(model_id=str(checkpoint), device="cpu")
    assert seg.segment(frames, 0, boxes=[], labels=[], scores=[]) == []
    tracks = seg.segment(frames, 0, boxes=[[0, 0, 10, 10]], labels=["launch pad"], scores=[0.9])
    assert all(t.label == "launch pad" for t in tracks)


def test_fingerprint_names_the_model_and_its_concepts():
    a = Sam3Segmenter(model_id="facebook/sam3").fingerprint()
    b = Sam3Segmenter(model_id="facebook/sam3", concepts=["dog"]).fingerprint()
    assert a["backend"] == "sam3_hf" and a["params"]["concepts"] == ["person", "animal", "vehicle", "object"]
    assert a != b


# --- as the twin's segmenter in a run (perception/segmenter=...) ----------------------------------

PLAN = '<think>segment</think>\n<dt_plan>{"SAM2": []}</dt_plan>'
ANSWER = '<think>the first instance</think>\n<task>segmentation</task> <answer>{"instances": [1]}</answer>'


def _dtr1_run(tmp_path, segmenter: str):
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from rvt_bench.core.paths import CONF_DIR
    from rvt_bench.harness.runner import run

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "+model=dtr1", "perception=tiny",
                                           f"perception/segmenter={segmenter}", "run.limit=1",
                                           f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'lb'}"])
    with open_dict(cfg):
        cfg.policy = {"_target_": "rvt_bench.adapters.policy.scripted.ScriptedPolicy", "turns": [PLAN, ANSWER]}
    return run(cfg)


def test_the_segmenter_switch_gives_one_run_per_segmenter_and_sam3_builds_the_twin(tmp_path):
    import json

    runs = {name: _dtr1_run(tmp_path, name) for name in ("sam2", "sam3_tiny")}
    assert runs["sam2"].run_dir != runs["sam3_tiny"].run_dir  # two rows: the fingerprints differ
    configs = {n: (r.run_dir / "config.yaml").read_text() for n, r in runs.items()}
    assert "Sam3Segmenter" in configs["sam3_tiny"] and "Sam3Segmenter" not in configs["sam2"]
    preds = {n: json.loads((r.run_dir / "predictions.jsonl").read_text().splitlines()[0]) for n, r in runs.items()}
    rollout = preds["sam3_tiny"]["trace"]["rollout"]
    assert '"tools":["SAM2"]' in rollout  # the plan's node, served by SAM 3
    assert any(f'"label":"{c}"' in rollout for c in ("person", "animal", "vehicle", "object")), rollout[:2000]


@pytest.mark.parametrize("perception", ["oracle", "provided"])
def test_a_segmenter_on_a_perception_without_one_is_refused_in_one_line(perception):
    from rvt_bench.adapters.twin.oracle import OraclePerception
    from rvt_bench.adapters.twin.provided import ProvidedPerception
    from rvt_bench.core.types import AdapterError

    cls = {"oracle": OraclePerception, "provided": ProvidedPerception}[perception]
    with pytest.raises(AdapterError, match="perception/segmenter applies to perception=foundation"):
        cls(segmenter=Sam3Segmenter(model_id="facebook/sam3"))
    cls(segmenter={})  # perception/segmenter=sam2 (the perception's own) is no segmenter to refuse


def test_a_hydra_multirun_over_the_segmenter_gives_two_rows_with_different_fingerprints(tmp_path):
    """Issue 46's check as a user types it: `-m perception/segmenter=sam2,sam3_tiny +model=dtr1` (the
    tiny SAM 3 in the real one's place, offline) leaves two leaderboard rows whose fingerprints differ.
    A copy of the demo with a one-sample split: a run.limit run would not be published."""
    import json
    import shutil
    import subprocess
    import sys

    import pandas as pd

    repo = Path(__file__).resolve().parents[1]
    demo = shutil.copytree(repo / "demo", tmp_path / "demo")
    (demo / "splits" / "one.txt").write_text("image/coffee_cup\n")
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps([PLAN, ANSWER]))
    proc = subprocess.run(
        [sys.executable, str(repo / "run_bench.py"), "-m", "+dataset=demo", f"dataset.root={demo}", "dataset.split=one",
         "+model=dtr1", "perception=tiny", "perception/segmenter=sam2,sam3_tiny", "policy=scripted",
         f"policy.turns_file={turns}", "run.bootstrap.B=100", f"run.root={tmp_path / 'runs'}",
         f"leaderboard.dir={tmp_path / 'boards'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = pd.read_csv(tmp_path / "boards" / "demo.csv", dtype={"fingerprint": str})
    assert len(rows) == 2 and rows["fingerprint"].is_unique, rows[["fingerprint", "overrides"]]
    assert sorted(rows["overrides"].str.extract(r"perception/segmenter=(\w+)")[0]) == ["sam2", "sam3_tiny"]
