"""Hostile MLLM replies and servers against SAM 3 Agent (rvt_bench.adapters.sam3_agent): each fails
its own sample with a reason the funnel attributes, and none can make the run's files unwritable or
unreadable (a trace nested past the JSON limits, a line past dataset.limits.max_line_mb)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rvt_bench.adapters.sam3.adapter import Sam3Adapter
from rvt_bench.adapters.sam3_agent import adapter as A
from rvt_bench.adapters.sam3_agent import loop
from rvt_bench.adapters.sam3_agent.prompts import ImageRef
from rvt_bench.adapters.vlm.backend import VLMBackend
from rvt_bench.adapters.vlm.openai_chat import OpenAIChatVLM
from rvt_bench.adapters.vlm.reply import Reply
from rvt_bench.core.store import PredictionLog, read_predictions
from rvt_bench.core.types import AdapterError, RunStopped, Sample, Target

SYSTEM = {"agent": "AGENT", "checking": "CHECKING"}


def segment(prompt) -> str:
    return "<tool>" + json.dumps({"name": "segment_phrase", "parameters": {"text_prompt": prompt}}) + "</tool>"


def select(masks_json: str) -> str:
    return '<tool>{"name": "select_masks_and_return", "parameters": {"final_answer_masks": %s}}</tool>' % masks_json


def run_loop(replies, checks=(), n_masks=2, max_generations=loop.MAX_GENERATIONS, repeat_last=False):
    """loop.run on scripted replies (the last repeated forever when repeat_last), SAM 3 finding
    n_masks one-pixel masks for any phrase. Returns the AgentResult or the AgentError raised."""
    replies, checks = list(replies), list(checks)

    def generate(messages):
        pool = checks if messages[0]["content"] == SYSTEM["checking"] else replies
        if repeat_last and pool is replies and len(pool) == 1:
            return pool[0]
        return pool.pop(0) if pool else None

    def sam(prompt):
        masks = np.zeros((n_masks, 6, 8), bool)
        for j in range(n_masks):
            masks[j, j % 6, j % 8] = True
        return loop.Detections(masks, [[0, 0, 1, 1]] * n_masks, [0.9 - 0.1 * j for j in range(n_masks)])

    tools = loop.Tools(generate, sam, lambda det, label: ImageRef(label),
                       lambda det, i: (ImageRef(f"mask {i + 1}"), ImageRef(f"zoom {i + 1}")))
    try:
        return loop.run(ImageRef("raw"), "the query", SYSTEM, tools, max_generations)
    except loop.AgentError as exc:
        return exc


@pytest.mark.parametrize("call", ["[" * 100_000 + "]" * 100_000, '{"name": "report_no_mask", "parameters": {"n": %s}}' % ("9" * 5000)],
                         ids=["nested 100k deep", "an integer of 5000 digits"])
def test_json_past_python_s_parser_limits_is_the_json_rule(call):
    # the repository's json.loads raises too (RecursionError, ValueError): the sample fails there as here,
    # here attributed to the tool call with the trace kept instead of crashing the adapter
    out = run_loop([f"<tool>{call}</tool>"])
    assert isinstance(out, loop.AgentError) and (out.stage, out.reason) == ("tool_call", "json"), out
    assert len(str(out)) < 1000 and out.calls[0]["round"] == 1


class Scripted(VLMBackend):
    """The MLLM: `replies` in order (the last repeated), Accept to every checking request."""

    name = "scripted"

    def __init__(self, replies):
        self.replies, self.n = list(replies), 0

    def generate(self, requests):
        out = []
        for r in requests:
            if r.system == SYSTEM["checking"]:
                out.append(Reply(text="<verdict>Accept</verdict>", finish_reason="stop", n_tokens=1))
                continue
            text = self.replies[min(self.n, len(self.replies) - 1)]
            self.n += 1
            out.append(Reply(text=text, finish_reason="stop", n_tokens=1))
        return out

    def fingerprint(self):
        return {"backend": "scripted"}


class TwoMasks(Sam3Adapter):
    """SAM 3 finding two disjoint masks for any phrase, without a model."""

    def detect(self, frame, text):
        masks = np.zeros((2, *frame.shape[:2]), bool)
        masks[0, :4, :4] = masks[1, 6:, 6:] = True
        return masks, [[0, 0, 4, 4], [6, 6, 12, 10]], [0.9, 0.8], 0.9


@pytest.fixture
def sample(tmp_path):
    from PIL import Image

    Image.fromarray(np.full((10, 12, 3), 90, np.uint8)).save(tmp_path / "f.png")
    return Sample(id="s1", dataset="d", split="val", modality="image", frames=[str(tmp_path / "f.png")], frame_ids=["f"],
                  query="the query", task="segmentation", target=Target())


def predicted_and_stored(replies, sample, path, **kwargs):
    """The harness's prediction of `sample` by the agent on `replies`, appended to the run's
    predictions file and read back as scoring and a resume read it."""
    from rvt_bench.harness.predict import predict_one

    prompts_dir = path.parent / "prompts"
    prompts_dir.mkdir(exist_ok=True)
    (prompts_dir / "system_prompt.txt").write_text(SYSTEM["agent"])
    (prompts_dir / "system_prompt_iterative_checking.txt").write_text(SYSTEM["checking"])
    agent = A.Sam3AgentAdapter(backend=Scripted(replies), sam3=TwoMasks(checkpoint="x"), prompts_dir=str(prompts_dir), **kwargs)
    pred = predict_one(agent, sample, fail_fast=False)
    log = PredictionLog(path)
    log.append(pred)
    log.close()
    return pred, read_predictions([path])[sample.id]


DEEP = "[" * 700 + "]" * 700


@pytest.mark.parametrize("reply", [
    select(DEEP), select("[" * 70 + "1" + "]" * 70), segment("x") + "", '<tool>{"name": %s, "parameters": {}}</tool>' % DEEP,
    '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": %s}}</tool>' % DEEP, "<tool>%s</tool>" % DEEP],
    ids=["final_answer_masks 700 deep", "final_answer_masks 70 deep", "control", "name 700 deep", "text_prompt 700 deep",
         "the call 700 deep"])
def test_a_deeply_nested_tool_call_fails_its_sample_and_the_run_files_stay_readable(reply, sample, tmp_path):
    # before: the trace kept the parameter as parsed; 700 levels made the predictions file's write raise
    # RecursionError (the run died), 70 made the line unreadable at scoring and resume (max_json_depth 64)
    pred, stored = predicted_and_stored([segment("x"), reply, select("[1]")], sample, tmp_path / "predictions.jsonl")
    if reply == segment("x"):  # the same phrase again is refused by the repository's rule, then mask 1 is chosen
        assert pred.error is None and stored.trace["selected"] == [1]
        return
    assert pred.error["kind"] == "parse" and stored.error == pred.error, pred.error
    assert stored.trace["failure"]["stage"] == "tool_call" and len(pred.error["message"]) < 1000
    assert "nested more than" in pred.error["message"] + json.dumps(stored.trace["calls"][-1])


def test_a_megabyte_reply_every_round_keeps_the_trace_bounded(sample, tmp_path):
    # the same phrase every round, behind 1 MB of text: refused each time until model.max_generations
    # (the repository's 100); before, every reply was kept whole twice (calls and rollout): 200 MB
    padding = "y" * (1 << 20)
    path = tmp_path / "predictions.jsonl"
    pred, stored = predicted_and_stored([padding + segment("x")], sample, path)
    assert stored.trace["failure"] == {"stage": "turns", "reason": "max_generations"}
    assert len(stored.trace["calls"]) == loop.MAX_GENERATIONS + 1
    assert path.stat().st_size < 3 * loop.TRACE_CHARS
    first, last = stored.trace["calls"][0]["reply"], stored.trace["calls"][-1]["reply"]
    assert first.startswith("y" * loop.TRACE_REPLY_CHARS) and f"({len(padding) + len(segment('x')) - loop.TRACE_REPLY_CHARS:,} more characters)" in first
    assert "the sample's trace keeps" in last


def test_a_long_phrase_or_mask_list_is_cut_in_the_trace(sample, tmp_path):
    phrase, many = "p" * (1 << 20), json.dumps(list(range(1, 200_000)))
    pred, stored = predicted_and_stored([segment(phrase), select(many)], sample, tmp_path / "predictions.jsonl")
    assert pred.error is None and stored.trace["selected"] == [1, 2]  # the loop read the whole list
    calls = stored.trace["calls"]
    assert len(calls[0]["parameters"]["text_prompt"]) < loop.TRACE_REPLY_CHARS + 100
    assert len(json.dumps(calls[1]["parameters"])) < 1000


@pytest.mark.parametrize("content", [123, {"text": "<tool>{}</tool>"}, [{"type": "text", "text": "hi"}], True])
def test_a_reply_whose_content_is_not_text_fails_at_the_reply_stage(content, tmp_path):
    # the openai client does not check the body's types: an int reached the loop's reply.split (AttributeError)
    from tests.loopback import JSONHandler, Loopback

    class Handler(JSONHandler):
        def do_POST(self):
            self.read_json()
            self.send_json(200, {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})

    server = Loopback(Handler)
    try:
        backend = OpenAIChatVLM(model="m", base_url=server.root + "/v1", max_retries=0)
        agent = A.Sam3AgentAdapter(backend=backend, sam3=TwoMasks(checkpoint="x"))
        with pytest.raises(loop.AgentError) as err:
            agent.generate([{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    finally:
        server.close()
    assert (err.value.stage, err.value.reason) == ("reply", "backend") and "not a string" in str(err.value)


@pytest.mark.parametrize("message", [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "report_no_mask", "arguments": "{}"}}]},
    {"role": "assistant", "content": "", "reasoning_content": '<tool>{"name": "report_no_mask", "parameters": {}}</tool>'}],
    ids=["tool_calls", "reasoning_content"])
def test_a_reply_in_another_field_fails_at_the_reply_stage_saying_where_it_went(message):
    # the repository stops on a None content ("Generated text is None"); the backend reads it as "", which
    # the loop blamed on the tool call ("invalid JSON in tool call: ''") on every sample
    from tests.loopback import JSONHandler, Loopback

    class Handler(JSONHandler):
        def do_POST(self):
            self.read_json()
            self.send_json(200, {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                 "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})

    server = Loopback(Handler)
    try:
        agent = A.Sam3AgentAdapter(backend=OpenAIChatVLM(model="m", base_url=server.root + "/v1", max_retries=0),
                                   sam3=TwoMasks(checkpoint="x"))
        with pytest.raises(loop.AgentError) as err:
            agent.generate([{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    finally:
        server.close()
    assert (err.value.stage, err.value.reason) == ("reply", "empty")
    assert "reasoning_content" in str(err.value) and "--reasoning-parser" in str(err.value) and "\n" not in str(err.value)


class TokenizingTwoMasks(TwoMasks):
    """TwoMasks after tokenizing the phrase as SAM 3's detect does (the tiny CLIP tokenizer)."""

    def detect(self, frame, text):
        from types import SimpleNamespace

        from rvt_bench.adapters.sam3 import tiny

        model = SimpleNamespace(config=SimpleNamespace(detector_config=SimpleNamespace(
            text_config=SimpleNamespace(max_position_embeddings=32))))
        self._tokens(tiny.tokenizer(), model, text)
        return super().detect(frame, text)


@pytest.mark.parametrize("phrase", ["\ud800", "a\x00b\x1b[31m\n../../x"], ids=["lone surrogate", "controls and a path"])
def test_a_phrase_the_tokenizer_cannot_read_fails_at_sam3_with_a_reason(phrase, sample, tmp_path):
    # JSON's "\ud800" is a lone surrogate; the tokenizer raised TypeError, an adapter crash without the trace
    from rvt_bench.harness.predict import predict_one

    prompts_dir = tmp_path / "prompts"
    prompts_dir.mkdir()
    (prompts_dir / "system_prompt.txt").write_text(SYSTEM["agent"])
    (prompts_dir / "system_prompt_iterative_checking.txt").write_text(SYSTEM["checking"])
    agent = A.Sam3AgentAdapter(backend=Scripted([segment(phrase), select("[1]")]), sam3=TokenizingTwoMasks(checkpoint="x"),
                               prompts_dir=str(prompts_dir))
    before = set(tmp_path.rglob("*"))
    pred = predict_one(agent, sample, fail_fast=False)
    if phrase != "\ud800":  # any other text is a phrase like another (nothing is named after it)
        assert pred.error is None and set(tmp_path.rglob("*")) == before
        return
    assert pred.error["kind"] == "adapter" and "U+D800" in pred.error["message"], pred.error
    assert pred.trace["failure"] == {"stage": "sam3", "reason": "error"} and pred.trace["calls"][0]["tool"] == "segment_phrase"


class Failing(Scripted):
    """A server that answers every request with HTTP 500 (the vlm backend's AdapterError)."""

    def generate(self, requests):
        return [AdapterError("vlm m: HTTP 500 after 1 attempt(s) at http://127.0.0.1:9/v1: Error code: 500") for _ in requests]


def test_a_failing_server_is_a_setup_failure_not_the_model_s_output(sample, tmp_path):
    # before: kind "parse" (AgentError is a ParseError): run.stop_after_same_failures never stopped a run whose
    # server failed every request, and a run of nothing but HTTP 500s published its zeros with exit 0
    from rvt_bench.harness.predict import SameFailures, predict_one

    prompts_dir = tmp_path / "prompts"
    prompts_dir.mkdir()
    (prompts_dir / "system_prompt.txt").write_text(SYSTEM["agent"])
    (prompts_dir / "system_prompt_iterative_checking.txt").write_text(SYSTEM["checking"])
    agent = A.Sam3AgentAdapter(backend=Failing([]), sam3=TwoMasks(checkpoint="x"), prompts_dir=str(prompts_dir))
    preds = [predict_one(agent, sample, fail_fast=False) for _ in range(3)]
    assert preds[0].error["kind"] == "adapter" and preds[0].trace["failure"] == {"stage": "reply", "reason": "backend"}
    with pytest.raises(RunStopped, match="the server behind model.base_url"):
        SameFailures(3).check(preds)
    # the model's own output stays its own: a reply the loop refuses is a parse failure
    agent = A.Sam3AgentAdapter(backend=Scripted([select("[1]")]), sam3=TwoMasks(checkpoint="x"), prompts_dir=str(prompts_dir))
    assert predict_one(agent, sample, fail_fast=False).error["kind"] == "parse"
