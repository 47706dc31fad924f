"""SAM 3 Agent's loop (rvt_bench.adapters.sam3_agent.loop) held to the repository's own
agent_inference on recorded replies (tests/data/sam3_agent/loop_cases.json, written by
tests/data/sam3_agent/reference/run_agent_loop.py from facebookresearch/sam3 at 99d02f2): every
request the loop sends (its messages, in order, with which images) and how it ends (the masks
selected, or a failure where the repository raises). Also client_sam3's mask filtering
(rvt_bench.adapters.sam3_agent.tool.postprocess) against the repository's on random detections."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from rvt_bench.adapters.sam3_agent import loop, tool
from rvt_bench.adapters.sam3_agent.prompts import ImageRef

DATA = json.loads((Path(__file__).parent / "data" / "sam3_agent" / "loop_cases.json").read_text())
SYSTEM = {"agent": "AGENT SYSTEM PROMPT", "checking": "CHECKING SYSTEM PROMPT"}
_LIST = re.compile(r"\[('(?:[^'\\]|\\.)*'(?:, '(?:[^'\\]|\\.)*')*)\]")


def _unordered(text: str) -> str:
    """A message with its lists of used phrases sorted: the repository lists a set's elements
    (an order that varies with PYTHONHASHSEED), the port lists them in the order of first use."""
    return _LIST.sub(lambda m: "[" + ", ".join(sorted(m.group(1).split(", "))) + "]", text)


def _normal(messages: list[dict]) -> list[dict]:
    out = copy.deepcopy(messages)
    for m in out:
        if m["role"] == "system":
            m["content"] = {SYSTEM["agent"]: "<system:agent>", SYSTEM["checking"]: "<system:checking>"}[m["content"]]
        elif isinstance(m["content"], list):
            for c in m["content"]:
                if c["type"] == "image":
                    c["image"] = c["image"].label
                else:
                    c["text"] = _unordered(c["text"])
    return out


def _reference(requests: list) -> list:
    for messages in requests:
        for m in messages:
            if isinstance(m["content"], list):
                for c in m["content"]:
                    if c["type"] == "text":
                        c["text"] = _unordered(c["text"])
    return requests


def _run(case: dict):
    replies, checks, requests = list(case["replies"]), list(case["checks"]), []

    def generate(messages):
        requests.append(_normal(messages))
        pool = checks if messages[0]["content"] == SYSTEM["checking"] else replies
        return pool.pop(0) if pool else None

    def segment(prompt):
        n = case["sam"].get(prompt, 0)
        masks = np.zeros((n, 6, 8), bool)
        for j in range(n):
            masks[j, j % 6, j % 8] = True
        return loop.Detections(masks, [[0, 0, 1, 1]] * n, [0.9 - 0.1 * j for j in range(n)])

    tools = loop.Tools(generate, segment, lambda det, label: ImageRef(label),
                       lambda det, i: (ImageRef(f"mask {i + 1}"), ImageRef(f"zoom {i + 1}")))
    try:
        result = loop.run(ImageRef("raw"), case["query"], SYSTEM, tools)
    except loop.AgentError as exc:
        return requests, {"error": exc}, None
    final = [] if result.final is None else [f"rle-{result.text_prompt}-{i}" for i in result.final.ids]
    return requests, {"final": final}, result


@pytest.mark.parametrize("case", DATA["cases"], ids=[c["name"] for c in DATA["cases"]])
def test_loop_sends_what_the_repository_sends_and_ends_as_it_ends(case):
    requests, outcome, _ = _run(case)
    assert requests == _reference(case["requests"])
    if "error" in case["outcome"]:
        assert "error" in outcome, f"the repository raised {case['outcome']['error']}, the port ended with {outcome}"
    else:
        assert outcome == case["outcome"]


def test_the_recorded_cases_cover_every_branch():
    names = {c["name"]: c for c in DATA["cases"]}
    errors = {c["outcome"].get("error") for c in DATA["cases"]} - {None}
    assert errors >= {"AssertionError", "ValueError", "TypeError", "IndexError", "KeyError"}
    assert names["examine keeps two"]["outcome"] == {"final": ["rle-person-0", "rle-person-2"]}
    assert sum("final" in c["outcome"] for c in DATA["cases"]) >= 30


@pytest.mark.parametrize("name, stage, reason", [
    ("invalid json", "tool_call", "json"), ("select first", "tool_call", "first_call"),
    ("unknown tool", "tool_call", "unknown_tool"), ("verdict missing", "tool_call", "verdict"),
    ("examine after no masks", "tool_call", "examine_without_masks"), ("extra parameter", "tool_call", "parameters"),
    ("select floats", "tool_call", "parameters"), ("no name", "tool_call", "malformed"),
    ("examine three times", "turns", "history"), ("102 rounds", "turns", "max_generations"),
    ("replies run out", "reply", "none")])
def test_each_failure_is_attributed_to_its_rule(name, stage, reason):
    case = next(c for c in DATA["cases"] if c["name"] == name)
    _, outcome, _ = _run(case)
    assert (outcome["error"].stage, outcome["error"].reason) == (stage, reason)
    assert outcome["error"].calls[0]["reply"] == case["replies"][0]  # the trace so far travels, refused reply included
    assert outcome["error"].loop_timings["mllm"] >= 0  # and the seconds spent


def test_the_trace_holds_every_tool_call_and_its_result():
    case = next(c for c in DATA["cases"] if c["name"] == "examine keeps two")
    _, _, result = _run(case)
    assert [c["tool"] for c in result.calls] == ["segment_phrase", "examine_each_mask", "select_masks_and_return"]
    assert result.calls[0]["result"]["masks"] == 3
    assert [v["accept"] for v in result.calls[1]["result"]["verdicts"]] == [True, False, True]
    assert result.calls[2]["result"] == {"selected": [1, 2]} and result.generations == 3


@pytest.mark.parametrize("case", DATA["postprocess"], ids=lambda c: str(c["boxes"]))
def test_mask_filtering_keeps_what_call_sam_service_keeps(case):
    h, w = case["shape"]
    masks = np.zeros((len(case["boxes"]), h, w), bool)
    for i, (y0, y1, x0, x1) in enumerate(case["boxes"]):
        masks[i, y0:y1, x0:x1] = True
    det = tool.postprocess(masks, [[i, 0, 0, 0] for i in range(len(masks))], case["scores"])
    assert det.ids == case["kept"]


def test_the_recorded_system_prompts_are_the_reference_commit_s():
    from rvt_bench.adapters.sam3_agent import prompts

    assert DATA["system_prompts_sha256"] == prompts.REFERENCE_SHA256
