"""The metric unit interface: one metric family, scored per sample and aggregated over records."""
from __future__ import annotations

from typing import Any

from rvt_bench.core.types import Prediction, Sample

# Modes of the units that reproduce a reference script: "reference" = the reference's arithmetic
# (comparability with published numbers), "textbook" = the plain float64 definition.
MODES = ("reference", "textbook")


def check_mode(mode: str, owner: str) -> str:
    """`mode` when it is one of MODES; ValueError naming `owner` otherwise."""
    if mode not in MODES:
        raise ValueError(f"{owner} protocol: mode must be one of {MODES}, got {mode!r}")
    return mode


class Unit:
    """One metric family (video J/F, LISA gIoU/cIoU, box IoU, captions, judge).

    name:             short id of the family, e.g. "video_jf".
    higher_is_better: True for every unit here (a score, not an error).
    task:             the task whose outputs the unit reads ("segmentation", "grounding", "vqa", ...;
                      None = any): a prediction that declares another task is scored as empty.

    score(sample, pred) -> dict: JSON-serialisable per-sample values, merged into the sample's
        scores.jsonl record (keys must not collide with another unit's of the same protocol, except
        identical values such as "hypothesis"). May set "gt_empty" (bool: the GT is empty
        everywhere) and "baseline" (the same per-sample values for an empty prediction).
        Raises DatasetFormatError for a bad GT, AdapterError for an unusable prediction.
    aggregate(records) -> {metric key: value}: the family's metrics over `records` (records of
        this unit's score; the order must not change the result: sort before order-dependent sums).
    baseline(records) -> {metric key: value}: the aggregate an empty prediction on every sample
        would get; {} when the family has none (text).
    judge_records(records): add judge verdicts in place (only the judge unit does anything).
    gt_empty(record) -> bool | None: whether the sample's GT is empty everywhere, read from this
        unit's record; None when the unit cannot tell.
    """

    name: str = ""
    higher_is_better: bool = True
    task: str | None = None
    judge: Any = None

    def score(self, sample: Sample, pred: Prediction) -> dict:
        raise NotImplementedError

    def aggregate(self, records: list[dict]) -> dict:
        raise NotImplementedError

    def baseline(self, records: list[dict]) -> dict:
        return {}

    def attach_judge(self, judge: Any) -> None:
        """Keep `judge` (rvt_bench.metrics.judge.Judge or None); units without free text never call it."""
        self.judge = judge

    def judge_records(self, records: list[dict]) -> None:
        """Nothing to judge by default."""

    def gt_empty(self, record: dict) -> bool | None:
        """The record's "gt_empty" (set by `score`), None when it has none."""
        return record.get("gt_empty")

    def reads(self, pred: Prediction) -> bool:
        """Whether `pred`'s outputs are for this unit's task (a prediction without a task counts)."""
        return self.task is None or pred.task in (None, self.task)

    def __getstate__(self) -> dict:
        # a judge holds an HTTP client (not picklable) and is used in the parent process only
        state = dict(self.__dict__)
        state.pop("judge", None)
        return state
