"""Hostile MLLM replies and servers against SAM 3 Agent (rvt_bench.adapters.sam3_agent): each fails
its own sample with a reason the funnel attributes, and none can make the run's files unwritable or
unreadable (a trace nested past the JSON limits, a line past dataset.limits.max_line_mb)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rvt_bench.adapters.sam3_agent import loop
from rvt_bench.adapters.sam3_agent.prompts import ImageRef

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
