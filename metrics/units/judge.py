"""LLM-judge scores of free-text answers (metrics/judge.py): one verdict per sample, the mean of the
scored verdicts, failures counted; never a fallback to string matching."""
from __future__ import annotations

import math

from rvt_bench.core.records import JudgeVerdict, ScoreRecord
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.estimators import Found, mean_of
from rvt_bench.metrics.units.base import Unit
from rvt_bench.metrics.units.captions import TextValues, text_fields


class JudgeScore(Unit):
    """Per sample: TextValues (as captions.text_fields); after `judge_records`, the record's
    `judge` = rvt_bench.core.records.JudgeVerdict (score None when unscored).

    aggregate: "judge" = mean score of the scored verdicts (NaN when none is scored), "judge_n",
    "judge_n_failed", "judge_failure_rate"; {"judge": rvt_bench.metrics.judge.NOT_CONFIGURED} when no record
    has a verdict (no judge attached). estimator of "judge": the mean over the scored verdicts.
    """

    name = "judge"
    values_type = TextValues

    def score(self, sample: Sample, pred: Prediction) -> TextValues:
        return text_fields(sample, pred, pred.task in (None, sample.task))

    def judge_records(self, records: list[ScoreRecord]) -> None:
        """Set every record's `judge`, in place, when a judge is attached: one request per non-empty
        answer (concurrent, cached: rvt_bench.metrics.judge.Judge), 0.0 without a request for an empty one."""
        if self.judge is None:
            return
        from rvt_bench.metrics.judge import JudgeItem

        asked = [r for r in records if self.of(r).hypothesis.strip()]
        verdicts = self.judge.score_many([JudgeItem(r.sample_id, self.of(r).question, self.of(r).references,
                                                    self.of(r).hypothesis) for r in asked])
        for r, v in zip(asked, verdicts):
            r.judge = v
        for r in records:
            if not self.of(r).hypothesis.strip():
                r.judge = JudgeVerdict(0.0, "empty answer (failed or no text): wrong, no judge request made",
                                       template=self.judge.template.tag, model=self.judge.model)

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        from rvt_bench.metrics.judge import NOT_CONFIGURED

        verdicts = [r.judge for r in records if r.judge is not None]
        if not verdicts:
            return {"judge": NOT_CONFIGURED}
        scores = [v.score for v in verdicts if v.score is not None]
        n_failed = len(verdicts) - len(scores)
        return {"judge": math.fsum(scores) / len(scores) if scores else math.nan, "judge_n": len(verdicts),
                "judge_n_failed": n_failed, "judge_failure_rate": n_failed / len(verdicts)}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found | None:
        if key != "judge":
            return None
        scored = [r for r in records if r.judge is not None and r.judge.score is not None]
        return mean_of(key, scored, lambda r: r.judge.score) if scored else "no judged samples"
