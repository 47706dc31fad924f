"""`python run_bench.py +model=jit ...` end to end through the real runner on a small copy of the
demo (tests/small_demo.py) with oracle perception: with a scripted policy (a Hydra config dir adds
conf/policy/jit_script.yaml) every path runs (semantic ids, a sandboxed program, grounding, vqa,
summary); with the embedded GGUF policy (the offline default) the run completes and what the tiny
model cannot plan is recorded as parse failures with the planner's prompt and reply."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.small_demo import TASKS, make_small_demo

REPO = Path(__file__).resolve().parents[1]
PLAN = {"query_type": "semantic", "specialists": [{"name": "OWLv2", "rationale": "labels"}]}
TEMPORAL = {"query_type": "temporal", "specialists": []}
LATEST = ("```python\nobjs = graph['objects']\n"
          "print(json.dumps({'ids': [max(objs, key=lambda o: o['frames'][0])['id']]}))\n```")
# samples in the order the runner asks: image/coffee_cup, video/UVO/all/coin_entry/0 ("the coin that
# appears later in the video"), video/launch_pad/0, rvt/grounding/launch_pad, rvt/vqa/coin_entry,
# rvt/summary/coin_entry
TURNS = [json.dumps(PLAN), '{"ids": [1]}', json.dumps(TEMPORAL), LATEST, json.dumps(PLAN), '{"ids": [1]}',
         json.dumps(PLAN), '{"ids": [1]}', json.dumps(PLAN), "Two coins.", json.dumps(PLAN), "A second coin slides in."]


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    return make_small_demo(tmp_path_factory.mktemp("demo"))


def bench(*args):
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    return Path(last.removeprefix("run directory: "))


def _predictions(run_dir):
    return {r["sample_id"]: r for r in map(json.loads, (run_dir / "predictions.jsonl").read_text().splitlines())}


def test_every_path_runs_through_the_runner_with_a_scripted_policy(small_demo, tmp_path):
    conf = tmp_path / "conf"
    (conf / "policy").mkdir(parents=True)
    (conf / "policy/jit_script.yaml").write_text(yaml.safe_dump(
        {"_target_": "rvt_bench.adapters.policy.scripted.ScriptedPolicy", "turns": TURNS}))
    run_dir = bench("--config-dir", str(conf), "+model=jit", "policy=jit_script", f"dataset.root={small_demo}",
                    f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n"] == 6 and metrics["failures"] == 0 and metrics["tasks"] == TASKS
    preds = _predictions(run_dir)
    assert metrics["metrics"]["image/gIoU"] == pytest.approx(1.0, abs=1e-4)  # instance 1 of coffee_cup is the cup (LISA: I / (U + 1e-5))
    later = preds["video/UVO/all/coin_entry/0"]
    assert later["trace"]["mode"] == "program" and later["trace"]["program_output"].startswith('{"ids"')
    assert {"planner", "twin", "graph", "reasoning", "sandbox"} <= set(later["timings"])
    assert preds["rvt/vqa/coin_entry"]["text"] == "Two coins."
    assert len(preds["rvt/grounding/launch_pad"]["boxes"]) == 16
    assert all(len(p["trace"]["calls"]) == 2 for p in preds.values())
    assert [s["reached"] for s in metrics["adapter_report"]["stages"]][:4] == [6, 6, 6, 6]


def test_the_embedded_policy_runs_offline_and_records_what_it_could_not_plan(small_demo, tmp_path):
    run_dir = bench("+model=jit", "model.max_new_tokens.planner=24", "run.limit=2", f"dataset.root={small_demo}",
                    f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    preds = _predictions(run_dir)
    assert len(preds) == 2
    for pred in preds.values():
        planner = pred["trace"]["calls"][0]
        assert planner["stage"] == "planner" and "Specialists:" in planner["messages"][0]["content"]
        assert pred["error"] is None or pred["error"]["kind"] == "parse"
    # JiT's own funnel: "plan is JSON" counts the plans that parsed, whatever the tiny model wrote;
    # the embedded policy's grammar is DT-R1's, which JiT does not apply, and says so
    report = json.loads((run_dir / "metrics.limit2.json").read_text())["adapter_report"]
    stages = {s["key"]: s["reached"] for s in report["stages"]}
    assert list(stages) == ["plan_json", "specialists_ran", "graph_built", "answer_parsed", "result_correct"]
    assert stages["plan_json"] == sum("plan" in p["trace"] for p in preds.values())
    assert stages["answer_parsed"] == sum(p["error"] is None for p in preds.values())
    assert "decoding" not in report
    assert {m["key"]: m["value"] for m in report["measures"]}["policy_decoding"] == "not applied (JiT decodes free)"
