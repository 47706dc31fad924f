"""SAM 3 Agent's report on its run: where each sample's loop stopped, and what the loop did.

Stages, in order (a failed sample fails exactly one: the stage its trace's "failure" names), then
"result correct" (rvt_bench.core.records.ScoreRecord.correct):
  reply_received    every MLLM request got a reply (the backend answered with text; the repository raises on None)
  tool_calls_valid  every reply held a tool call the loop accepts (JSON, a known tool, its parameters,
                    segment_phrase or report_no_mask first, examine_each_mask with masks shown, a
                    verdict Accept or Reject)
  within_turns      the loop ended (select_masks_and_return or report_no_mask) within
                    model.max_generations rounds and the repository's history bounds
  sam3_ran          SAM 3 ran every segment_phrase call (and, for a video, the tracking)
A prediction without the agent's trace (an adapter crash) fails reply_received.
Measures: rounds (main MLLM requests per sample), segment_phrase / examine_each_mask calls per
sample, masks selected (samples ended by select_masks_and_return), the share answered "no target"
(report_no_mask, or an empty selection), and the seconds of the MLLM ("generation"), SAM 3's
segment_phrase calls, its video tracking, the pictures drawn and the whole sample. A sample of a
task the agent does not answer (vqa, summarization) fails reply_received.
"""
from __future__ import annotations

from typing import Any, Sequence

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import ScoredSample
from rvt_bench.core.records import Measure

STAGES = (("reply_received", "MLLM replied"), ("tool_calls_valid", "tool calls valid"),
          ("within_turns", "loop ended within its limits"), ("sam3_ran", "SAM 3 ran"))
FAILURE_STAGE = {"reply": "reply_received", "tool_call": "tool_calls_valid", "turns": "within_turns", "sam3": "sam3_ran"}
LATENCY = (("mllm", "generation"), ("sam3", "segment_phrase"), ("sam3_video", "tracking"), ("render", "rendering"), M.TOTAL)


def trace(item: ScoredSample) -> dict[str, Any]:
    t = item.prediction.trace
    return t if isinstance(t, dict) else {}


def passed(item: ScoredSample) -> dict[str, bool | None]:
    """Per stage: False at the stage the trace's failure names, True elsewhere; a prediction with
    an error and no agent trace fails the first stage."""
    t = trace(item)
    if item.prediction.error is not None and "calls" not in t:
        return {STAGES[0][0]: False}
    failed = FAILURE_STAGE.get((t.get("failure") or {}).get("stage"))
    return {key: key != failed for key, _ in STAGES}


def _count(tool: str):
    return lambda t: float(sum(1 for c in t.get("calls") or [] if c.get("tool") == tool))


def measures(scored: Sequence[ScoredSample]) -> list[Measure]:
    traces = [t for t in map(trace, scored) if "calls" in t]
    rounds = [float(t["rounds"]) for t in traces if isinstance(t.get("rounds"), int)]
    selected = [float(len(t["selected"])) for t in traces if t.get("ended_with") == "select_masks_and_return"]
    return [*M.mean("rounds", "MLLM rounds per sample (mean)", rounds, "count"),
            *M.mean("segment_phrase_calls", "segment_phrase calls per sample (mean)", list(map(_count("segment_phrase"), traces)), "count"),
            *M.mean("examine_calls", "examine_each_mask calls per sample (mean)", list(map(_count("examine_each_mask"), traces)), "count"),
            *M.mean("masks_selected", "masks selected (mean, samples ended by select_masks_and_return)", selected, "count"),
            *M.no_target(scored), *M.latency(scored, LATENCY)]
