"""`+model=sam3_agent` end to end: `run_bench.py +dataset=demo` with a loopback OpenAI-compatible
chat server as the MLLM (tests/vlm_server.py, answering as an agent would: segment_phrase, then
examine_each_mask, then select_masks_and_return) and a tiny random-weight SAM 3 (tests/sam3_tiny.py),
images and videos; the trace holds every tool call with its result, the funnel counts them, a
missing system prompt stops the run in one line.

The repository's system prompts are not shipped (SAM License, adapters/sam3_agent/prompts.py): the
runs read stand-in files from model.prompts_dir; the loop's own prompts and parsing are held to the
repository's in tests/test_sam3_agent_loop.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.core.frames import read_frame
from rvt_bench.loaders.demo import DemoDataset
from tests import sam3_tiny
from tests.vlm_server import ChatServer

REPO = Path(__file__).resolve().parents[1]
AGENT, CHECKING = "STAND-IN AGENT SYSTEM PROMPT", "STAND-IN CHECKING SYSTEM PROMPT"


def _calibration_frames() -> list[np.ndarray]:
    images = sorted((REPO / "demo" / "reasonseg" / "val").glob("*.jpg"))
    clips = sorted(p for p in (REPO / "demo" / "revos" / "JPEGImages").rglob("*") if p.is_dir() and any(p.glob("*.jpg")))
    return [read_frame(p) for p in images] + [read_frame(sorted(c.glob("*.jpg"))[0]) for c in clips]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return sam3_tiny.build(tmp_path_factory.mktemp("tiny_sam3"), _calibration_frames())


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("prompts")
    (d / "system_prompt.txt").write_text(AGENT + "\n")
    (d / "system_prompt_iterative_checking.txt").write_text(CHECKING + "\n")
    return d


def _text(message: dict) -> str:
    c = message["content"]
    return c if isinstance(c, str) else " ".join(p.get("text", "") for p in c)


def agent_reply(body: dict) -> str:
    """An agent: segment "object"; with masks shown, examine them once, then select mask 1; with
    none, report no mask. Checking requests: Accept. The preflight's probe: a word."""
    messages = body["messages"]
    if messages[0]["role"] != "system":
        return "ok"
    if messages[0]["content"] == CHECKING:
        return "<think>fine</think>\n<verdict>Accept</verdict>"
    last = _text(messages[-1])
    examined = any("examine_each_mask" in _text(m) for m in messages if m["role"] == "assistant")
    if "did not generate any masks" in last:
        return '<think>nothing</think>\n<tool>{"name": "report_no_mask", "parameters": {}}</tool>'
    if "available mask" in last and not examined:
        return '<think>check each</think>\n<tool>{"name": "examine_each_mask", "parameters": {}}</tool>'
    if "available mask" in last:
        return '<think>mask 1</think>\n<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1]}}</tool>'
    return '<think>look</think>\n<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "object"}}</tool>'


def bench(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900, env=env)


def test_demo_end_to_end_images_and_videos_with_a_local_server(checkpoint, prompts_dir, tmp_path):
    server = ChatServer(model="tiny-mllm", reply=agent_reply)
    try:
        proc = bench("+dataset=demo", "+model=sam3_agent", "model.model=tiny-mllm", f"model.base_url={server.url}",
                     f"model.prompts_dir={prompts_dir}", f"model.sam3.checkpoint={checkpoint}", "model.sam3.device=cpu",
                     f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    finally:
        server.close()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    preds = {r["sample_id"]: r for r in map(json.loads, (run_dir / "predictions.jsonl").read_text().splitlines())}
    samples = {s.id: s for s in DemoDataset(REPO / "demo", split="quick")}
    answered = {sid: p for sid, p in preds.items() if samples[sid].task in ("segmentation", "grounding")}
    assert answered and all(p["error"] is None for p in answered.values()), answered
    ended = {"image": 0, "video": 0}
    for sid, pred in answered.items():
        sample, trace = samples[sid], pred["trace"]
        tools = [c["tool"] for c in trace["calls"]]
        assert tools[0] == "segment_phrase" and trace["calls"][0]["result"]["masks"] >= 0
        assert all("reply" in c and "result" in c for c in trace["calls"]) and "segment_phrase" in trace["rollout"]
        if pred.get("no_target"):
            assert tools == ["segment_phrase", "report_no_mask"] and trace["calls"][0]["result"]["masks"] == 0
            continue
        assert tools == ["segment_phrase", "examine_each_mask", "select_masks_and_return"], tools
        assert all(v["accept"] for v in trace["calls"][1]["result"]["verdicts"]) and trace["selected"] == [1]
        per_frame = pred["masks"] if sample.task == "segmentation" else pred["boxes"]
        assert len(per_frame) == sample.num_frames
        if sample.modality == "video":
            assert trace["video"]["key_frame"] == 0 and trace["video"]["tracks"] >= 0
        ended[sample.modality] += 1
    assert ended["image"] >= 1 and ended["video"] >= 1, ended  # the tiny SAM 3 finds masks on both
    for sid in set(preds) - set(answered):
        assert "SAM 3 Agent answers segmentation and grounding" in preds[sid]["error"]["message"]
    # the conversation the server saw: the history travels (assistant turns), images as image_url parts
    agent_bodies = [b for b in server.bodies if b["messages"][0].get("content") == AGENT]
    assert any(m["role"] == "assistant" for b in agent_bodies for m in b["messages"])
    assert all(sum(p["type"] == "image_url" for m in b["messages"] if isinstance(m["content"], list)
                   for p in m["content"]) <= 2 for b in agent_bodies)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    report = metrics["adapter_report"]
    stages = {s["key"]: s["reached"] for s in report["stages"]}
    assert list(stages) == ["reply_received", "tool_calls_valid", "within_turns", "sam3_ran", "result_correct"]
    n_answered = len(answered)
    assert stages["reply_received"] == stages["sam3_ran"] == n_answered
    measures = {m["key"]: m["value"] for m in report["measures"]}
    assert measures["segment_phrase_calls"] == 1.0
    assert measures["examine_calls"] == pytest.approx(sum(1 for p in answered.values() if not p.get("no_target")) / n_answered)


def test_a_bad_reply_fails_its_sample_at_the_tool_call_stage(checkpoint, prompts_dir, tmp_path):
    server = ChatServer(model="tiny-mllm", reply=lambda body: "ok" if body["messages"][0]["role"] != "system"
                        else '<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": [1]}}</tool>')
    try:
        proc = bench("+dataset=demo", "+model=sam3_agent", "model.model=tiny-mllm", f"model.base_url={server.url}",
                     f"model.prompts_dir={prompts_dir}", f"model.sam3.checkpoint={checkpoint}", "model.sam3.device=cpu",
                     "dataset.split=quick", f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    finally:
        server.close()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    preds = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    failed = [p for p in preds if p["trace"] and "calls" in (p["trace"] or {})]
    assert failed and all(p["error"]["kind"] == "parse" and p["trace"]["failure"] == {"stage": "tool_call", "reason": "first_call"}
                          for p in failed)
    stages = {s["key"]: s["reached"] for s in json.loads((run_dir / "metrics.json").read_text())["adapter_report"]["stages"]}
    assert stages["reply_received"] == len(failed) and stages["tool_calls_valid"] == 0
    # rvt-bench attribute labels each failure by the rule it broke
    out = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "attribute", str(run_dir)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()[1:]}
    assert rows == {"tool_call:first_call": len(failed), "unsupported": len(preds) - len(failed)}, out.stdout


def test_missing_system_prompts_stop_the_run_in_one_line(checkpoint, tmp_path):
    proc = bench("+dataset=demo", "+model=sam3_agent", "model.model=tiny-mllm", "model.base_url=http://127.0.0.1:9/v1",
                 f"model.prompts_dir={tmp_path / 'nowhere'}", f"model.sam3.checkpoint={checkpoint}",
                 f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    assert proc.returncode != 0
    assert "system_prompt.txt" in proc.stderr and "model.prompts_dir" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
