"""Whether one scored sample counts as a correct result: the last stage of every adapter's funnel
(rvt_bench.adapters.base.Adapter.report), defined once, from the score record the protocol wrote.

    mask or box answer   IoU > 0.5: the record's "iou" (ReasonSeg / LLM-Seg40K, I / U), "giou_term"
                         (grounding, LISA's I / (U + 1e-5)) or "J" (a video expression, the mean J
                         over its frames), the first of these the record has; as the DT-R1 paper's
                         failure analysis (arXiv 2511.12365) counts a result correct
    text answer          the judge's verdict >= 0.5; None (undecided) without a verdict
"""
from __future__ import annotations

from typing import Any

from rvt_bench.core.records import ScoreRecord

CORRECT_IOU = 0.5     # IoU above which a mask or box answer is correct
CORRECT_JUDGE = 0.5   # judge score at or above which a text answer is correct
IOU_KEYS = ("iou", "giou_term", "J")


def score_value(record: ScoreRecord, key: str) -> float | None:
    """The record's per-sample value `key` as a float, None when it has none (the one place that
    reads a score record's values by name here)."""
    value: Any = record.values.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def result_correct(record: ScoreRecord) -> bool | None:
    """True / False by the rule of the module docstring; None when the record decides nothing (a
    text answer without a judge verdict, a corpus-level metric only)."""
    if record.judge is not None:
        return None if record.judge.score is None else record.judge.score >= CORRECT_JUDGE
    for key in IOU_KEYS:
        value = score_value(record, key)
        if value is not None:
            return value > CORRECT_IOU
    return None
