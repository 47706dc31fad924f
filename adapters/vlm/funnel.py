"""The VLM adapter's report on its run: where each sample stopped, and the seconds each stage took.

Stages, in order, then "result correct" (rvt_bench.core.records.ScoreRecord.correct):
  reply_received  the backend returned a reply (trace "reply"; a server or model failure has none)
  answer_parsed   the reply held an answer: text, or boxes (and points) in the model's coordinate
                  family on frames it was shown (no parse failure)
  sam2_masks      segmentation only: SAM2 turned the boxes into masks (no failure after parsing);
                  does not apply to the other tasks
Measures: reply tokens (mean over replies), the share answered "no target" (a reply of [] or
"none" for a segmentation or grounding query: Prediction.no_target; only when some did), and the seconds the predictions recorded: frames
(reading and resizing), generation (the VLM), SAM2, total.
"""
from __future__ import annotations

from typing import Any, Sequence

from rvt_bench.adapters import measures as M
from rvt_bench.adapters.base import ScoredSample
from rvt_bench.core.records import Measure
from rvt_bench.core.types import PARSE

STAGES = (("reply_received", "reply received"), ("answer_parsed", "answer parsed"), ("sam2_masks", "masks from SAM2"))
LATENCY = (("frames", "frames"), ("vlm", "generation"), ("sam2", "SAM2"), M.TOTAL)


def _trace(item: ScoredSample) -> dict[str, Any]:
    return item.prediction.trace if isinstance(item.prediction.trace, dict) else {}


def passed(item: ScoredSample) -> dict[str, bool | None]:
    """Per stage of STAGES: passed, failed, or None (SAM2 for a sample that is not segmentation)."""
    pred = item.prediction
    out: dict[str, bool | None] = {"reply_received": "reply" in _trace(item)}
    out["answer_parsed"] = out["reply_received"] and pred.failure_kind != PARSE
    if item.sample.task == "segmentation":
        out["sam2_masks"] = out["answer_parsed"] and not pred.error
    return out


def measures(scored: Sequence[ScoredSample]) -> list[Measure]:
    tokens = [float(t["n_tokens"]) for t in map(_trace, scored) if isinstance(t.get("n_tokens"), (int, float))]
    return [*M.mean("reply_tokens", "reply tokens (mean)", tokens, "count"), *M.no_target(scored),
            *M.latency(scored, LATENCY)]
