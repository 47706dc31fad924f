"""The metric unit interface: one metric family, scored per sample into its typed values and
aggregated over records; the unit also declares each metric's bootstrap estimator."""
from __future__ import annotations

from typing import Any

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.estimators import Found

# Modes of the units that reproduce a reference script: "reference" = the reference's arithmetic
# (comparability with published numbers), "textbook" = the plain float64 definition.
MODES = ("reference", "textbook")
CORRECT_IOU = 0.5  # IoU above which a mask or box answer counts as correct (as in the DT-R1 paper's analysis)


def check_mode(mode: str, owner: str) -> str:
    """`mode` when it is one of MODES; ValueError naming `owner` otherwise."""
    if mode not in MODES:
        raise ValueError(f"{owner} protocol: mode must be one of {MODES}, got {mode!r}")
    return mode


class Unit:
    """One metric family (video J/F, LISA gIoU/cIoU, box IoU, captions, judge).

    name:             short id of the family, e.g. "video_jf".
    values_type:      the UnitValues class of its per-sample values (rvt_bench.core.records); two
                      units may share one (captions and judge read one answer) if they write equal
                      values.
    higher_is_better: True for every unit here (a score, not an error).
    task:             the task whose outputs the unit reads ("segmentation", "grounding", "vqa", ...;
                      None = any): a prediction that declares another task is scored as empty.

    score(sample, pred) -> values: the sample's typed values (a `values_type` instance), added to its
        ScoreRecord. May hold "gt_empty" (the GT is empty everywhere) and "baseline" (the same
        values for an empty prediction). Raises DatasetFormatError for a bad GT, AdapterError for
        an unusable prediction.
    aggregate(records) -> {metric key: value}: the family's metrics over `records` (ScoreRecords
        holding this unit's values; the order must not change the result: sort before
        order-dependent sums).
    baseline(records) -> {metric key: value}: the aggregate an empty prediction on every sample
        would get; {} when the family has none (text).
    estimator(key, records): the bootstrap estimator of one of its metrics over `records`
        (rvt_bench.metrics.estimators: Estimator or CorpusEstimator), a string saying why the metric
        has none, or None when `key` is not one of its metrics.
    judge_records(records): add judge verdicts in place (only the judge unit does anything).
    gt_empty(record) -> bool | None: whether the sample's GT is empty everywhere, read from this
        unit's values; None when the unit cannot tell.
    warnings(records) -> [str]: caveats about its metrics over `records` ([] by default).
    """

    name: str = ""
    values_type: type[UnitValues] = UnitValues
    higher_is_better: bool = True
    task: str | None = None
    judge: Any = None

    def score(self, sample: Sample, pred: Prediction) -> UnitValues:
        raise NotImplementedError

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        raise NotImplementedError

    def baseline(self, records: list[ScoreRecord]) -> dict:
        return {}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found | None:
        """None: no metric of this unit is named `key`."""
        return None

    def warnings(self, records: list[ScoreRecord]) -> list[str]:
        """What a reader of this family's metrics over all of `records` must know (e.g. a corpus
        too small for CIDEr); the protocol adds them to metrics.json "warnings" and the summary."""
        return []

    def of(self, record: ScoreRecord) -> Any:
        """This unit's values in `record`; RunStoreError when it has none."""
        return record.of(self.values_type)

    def attach_judge(self, judge: Any) -> None:
        """Keep `judge` (rvt_bench.metrics.judge.Judge or None); units without free text never call it."""
        self.judge = judge

    def judge_records(self, records: list[ScoreRecord]) -> None:
        """Nothing to judge by default."""

    def gt_empty(self, record: ScoreRecord) -> bool | None:
        """The values' "gt_empty", None when they have none."""
        return getattr(self.of(record), "gt_empty", None)

    def reads(self, pred: Prediction) -> bool:
        """Whether `pred`'s outputs are for this unit's task (a prediction without a task counts)."""
        return self.task is None or pred.task in (None, self.task)

    def __getstate__(self) -> dict:
        # a judge holds an HTTP client (not picklable) and is used in the parent process only
        state = dict(self.__dict__)
        state.pop("judge", None)
        return state
