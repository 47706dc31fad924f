"""JiT's report on its run: where each sample stopped, and the seconds each stage took.

Stages, in order, then "result correct" (rvt_bench.core.records.ScoreRecord.correct):
  plan_json        the planner's reply parsed as a plan: one JSON object naming known specialists
                   (trace "plan")
  specialists_ran  the twin builder ran the planned specialists (timings "twin")
  graph_built      the scene graph was built over the twin (trace "graph_chars")
  answer_parsed    the answer parsed: ids from the LLM's JSON or from its program's output, or text
                   (the prediction has no error)
Measures: the seconds the predictions recorded per stage (planning, perception, scene graph,
reasoning, programs, masks, total). Details: "mode" {semantic | program | text: samples that
reached reasoning in that mode}.
"""
from __future__ import annotations

from typing import Any, Sequence

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import ScoredSample
from rvt_bench.core.records import Measure

STAGES = (("plan_json", "plan is JSON"), ("specialists_ran", "specialists ran"), ("graph_built", "scene graph built"),
          ("answer_parsed", "answer parsed"))
LATENCY = (("planner", "planning"), ("twin", "perception"), ("graph", "scene graph"), ("reasoning", "reasoning"),
           ("sandbox", "programs"), ("masks", "masks"), M.TOTAL)


def _trace(item: ScoredSample) -> dict[str, Any]:
    return item.prediction.trace if isinstance(item.prediction.trace, dict) else {}


def passed(item: ScoredSample) -> dict[str, bool]:
    """Per stage of STAGES: passed or not (module docstring); a stage after a failed one is False."""
    trace = _trace(item)
    out = {"plan_json": "plan" in trace}
    out["specialists_ran"] = out["plan_json"] and "twin" in M.timings(item)
    out["graph_built"] = out["specialists_ran"] and "graph_chars" in trace
    out["answer_parsed"] = out["graph_built"] and not item.prediction.error
    return out


def measures(scored: Sequence[ScoredSample]) -> list[Measure]:
    return M.latency(scored, LATENCY)


def details(scored: Sequence[ScoredSample]) -> dict[str, Any]:
    """{"mode": {mode: samples}} over the samples that reached reasoning; {} when none did."""
    modes: dict[str, int] = {}
    for item in scored:
        mode = _trace(item).get("mode")
        if isinstance(mode, str):
            modes[mode] = modes.get(mode, 0) + 1
    return {"mode": dict(sorted(modes.items()))} if modes else {}
