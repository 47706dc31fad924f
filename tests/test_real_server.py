"""The `openai` policy and the judge against a real OpenAI-compatible server: llama.cpp's own server
(tests/llama_server.py, the xllamacpp wheel) serving the embedded SmolLM2-135M on loopback. What is
proven is the request shapes a real server accepts (chat template rendering, tokenize/detokenize,
completions with stop strings and a GBNF grammar, chat completions for the judge), not what a stub
was written to accept. The 135M model's answers are mostly wrong; only the kinds of failure are
checked: none may come from a request the server refused."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rvt_bench.adapters.dtr1.grammar import Spans, plan_grammar
from rvt_bench.adapters.policy.openai_compat import OpenAIPolicy
from tests.demo_runs import REPO, write_predictions
from tests.llama_server import MODEL, LlamaServer, available

MESSAGES = [{"role": "system", "content": "You plan vision tools."}, {"role": "user", "content": "Query: the dog"}]


@pytest.fixture(scope="module")
def server():
    reason = available()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    # one slot: requests queue and reuse its cached system prompt (the DT-R1 prompt is ~1.3k tokens)
    s = LlamaServer(parallel=1).start()
    yield s
    s.stop()


def policy(server, **kw) -> OpenAIPolicy:
    return OpenAIPolicy(MODEL, server.url, api_key="EMPTY", max_retries=0, timeout_s=600, **kw)


def test_the_server_renders_its_chat_template_and_tokenizes(server):
    p = policy(server)
    p.preflight()  # GET /v1/models lists the alias, then a probe render
    prompt = p.render(MESSAGES, "<think>")
    # SmolLM2's ChatML template, from the GGUF, rendered by the server (POST /apply-template)
    assert prompt == ("<|im_start|>system\nYou plan vision tools.<|im_end|>\n<|im_start|>user\nQuery: the dog<|im_end|>\n"
                      "<|im_start|>assistant\n<think>")
    ids = p.encode("<dt_plan>{}</dt_plan>")  # POST /tokenize {content}
    assert ids and server.post("detokenize", {"tokens": ids})["content"] == "<dt_plan>{}</dt_plan>"


def test_a_completion_pauses_at_a_stop_string_and_follows_a_grammar(server):
    p = policy(server, decoding="grammar", grammar_field="grammar")
    prompt = p.render(MESSAGES)
    grammar = plan_grammar(Spans(think_chars=16), think_open=False)
    out = p.generate(prompt, ["</dt_plan>", "</execute>", "</answer>"], 96, grammar=grammar)
    # the grammar admits only <think>...</think> <dt_plan>{DAG}</dt_plan>: the server stops at the closing tag
    assert out.stop_reason == "stop" and out.matched_stop == "</dt_plan>", out
    assert out.text.startswith("<think>") and "<dt_plan>{" in out.text and out.n_tokens > 0


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=1200)


def test_dtr1_runs_end_to_end_through_the_server(server, tmp_path):
    proc = bench("+dataset=demo", "+model=dtr1", "policy=openai", f"policy.model={MODEL}", f"policy.base_url={server.url}",
                 "policy.decoding=grammar", "policy.grammar_field=grammar", "model.twin_style=compact",
                 "model.twin_max_chars=400", "model.max_new_tokens=128", "run.limit=2",
                 f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (preds,) = (tmp_path / "runs").glob("demo/dtr1/*/predictions.jsonl")
    records = [json.loads(line) for line in preds.read_text().splitlines()]
    assert len(records) == 2
    for r in records:
        # a wrong answer is the model's ("parse"); a refused request would be "adapter" or "server"
        assert r["error"] is None or r["error"]["kind"] == "parse", r["error"]
        assert "<dt_plan>" in r["trace"]["rollout"] and "<dt_rep>" in r["trace"]["rollout"]


def test_the_judge_scores_the_demos_vqa_and_summary_samples_through_the_server(server, tmp_path):
    preds = write_predictions(tmp_path / "p.jsonl", spoil_every=1000)  # the references as answers
    proc = bench("+dataset=demo", "dataset.split=demo", "+model=precomputed", f"model.root={preds}", "judge=openai",
                 f"judge.model={MODEL}", f"judge.base_url={server.url}", "judge.api_key=EMPTY", "judge.cache_dir=",
                 "judge.max_tokens=48", "judge.max_failure_rate=1.0", "run.verify_frames=false", "run.report=false",
                 f"run.root={tmp_path / 'runs'}", f"leaderboard.dir={tmp_path / 'boards'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (scores,) = (tmp_path / "runs").glob("demo/precomputed/*/scores.jsonl")
    judged = {r["sample_id"]: r["judge"] for r in map(json.loads, scores.read_text().splitlines()) if r.get("judge")}
    assert sorted(judged) == ["rvt/summary/coin_entry", "rvt/summary/kitchen_table", "rvt/vqa/coin_entry",
                              "rvt/vqa/launch_pad", "rvt/vqa/lawn_depth"]
    for verdict in judged.values():
        # every request answered: a verdict or a reply the parser could not read, never a refused request
        assert verdict["raw"] and not (verdict["error"] or "").startswith("request"), verdict
