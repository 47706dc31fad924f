"""run_bench's config + runner with perception=tiny (the foundation code path, tiny random models) and a
scripted DT-R1 policy: twins are built through the model backends, and a second run with the same
perception (another run name) hits the perception cache for every model call."""
from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import open_dict

import run_bench  # noqa: F401  (registers the ${repo:} resolver)
from rvt_bench.harness.runner import run
from rvt_bench.core.paths import DEMO_DIR
from rvt_bench.core.store import read_jsonl

CONF = Path(__file__).resolve().parents[1] / "conf"
PLAN = ('<think>segment, measure depth</think>\n<dt_plan>{"SAM2": [], "DepthAnything2": [], "OWLv2": [], '
        '"DepthStats": ["SAM2", "DepthAnything2"], "SemanticAnalysis": ["SAM2"]}</dt_plan>')
ANSWER = '<think>the first instance</think>\n<task>segmentation</task> <answer>{"instances": [1]}</answer>'


def _cfg(tmp_path, name, n=2):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["+dataset=demo", "dataset.split=demo", "+model=dtr1", "perception=tiny",
                                           f"run.root={tmp_path / 'runs'}", f"run.name={name}", f"run.limit={n}",
                                           f"leaderboard.dir={tmp_path / 'lb'}"])
    with open_dict(cfg):
        cfg.policy = {"_target_": "rvt_bench.adapters.policy.scripted.ScriptedPolicy", "turns": [PLAN, ANSWER] * n}
    return cfg


def _entries(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*.npz")}


def test_twins_are_built_by_the_models_and_a_second_run_only_reads_the_cache(tmp_path):
    first = run(_cfg(tmp_path, "first"))
    preds = list(read_jsonl(first.run_dir / "predictions.jsonl"))
    assert len(preds) == 2
    for pred in preds:
        twin_events = [e for e in pred["trace"]["events"] if e["stage"] == "twin"]
        assert len(twin_events) == 1 and twin_events[0]["chars"] > 0, pred
        rollout = pred["trace"]["rollout"]
        assert '"tools":["SAM2","DepthAnything2","OWLv2","DepthStats","SemanticAnalysis"]' in rollout
        assert "relative inverse depth, larger = nearer" in rollout
    cache_root = tmp_path / "runs" / ".cache" / "perception-tiny"
    written = _entries(cache_root)
    # the demo's first two samples are two queries on one image: SAM2, DepthAnything2 and
    # SemanticAnalysis (same crops) are computed once; OWLv2 twice (the query is one of its phrases)
    samples = {p["sample_id"] for p in preds}
    assert samples == {"image/astronaut_flag", "image/astronaut_helmet"}
    val = DEMO_DIR / "reasonseg" / "val"
    assert (val / "astronaut_flag.jpg").read_bytes() == (val / "astronaut_helmet.jpg").read_bytes()
    assert len(written) == 5

    second = run(_cfg(tmp_path, "second"))
    assert second.run_dir != first.run_dir
    assert _entries(cache_root) == written  # nothing recomputed or rewritten
    again = {p["sample_id"]: p["trace"]["rollout"] for p in read_jsonl(second.run_dir / "predictions.jsonl")}
    assert again == {p["sample_id"]: p["trace"]["rollout"] for p in preds}
