"""A benchmark scored by its own server (Ref-YouTube-VOS valid: the GT is not public): a run
predicts and keeps its predictions, scores nothing, and says how to submit them."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.metrics.estimators import Found
from rvt_bench.metrics.protocols.base import Protocol, excluded_block, record_header, submission_block

log = logging.getLogger(__name__)


@dataclass
class ServerValues(UnitValues):
    """Nothing scored here: the sample's score is the server's."""

    kind = "server"


class ServerProtocol(Protocol):
    """No metric: aggregate gives {"metrics": {}, "n": 0, "excluded" / "excluded_samples" (every
    sample: no public GT), "submission" (base.submission_block), "warnings": [how to submit]}.

    benchmark: the name `python -m rvt_bench.harness.submission` takes (e.g. "refytvos").
    server: where the zip goes (a URL), named in the warning."""

    name = "server"
    headline: list[str] = []

    def __init__(self, benchmark: str, server: str) -> None:
        self.benchmark, self.server = str(benchmark), str(server)

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        record = record_header(sample, pred, ())
        record.add(ServerValues())
        return record

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        warning = (f"no public GT: the score of these {len(records)} expressions is the server's ({self.server}); "
                   f"write its zip with: python -m rvt_bench.harness.submission {self.benchmark} DATA_ROOT RUN_DIR "
                   "submission.zip")
        log.warning("%s", warning)
        return {"metrics": {}, "breakdown": {}, "n": 0,
                **excluded_block({r.sample_id: f"no public GT: the server scores it ({self.server})" for r in records}),
                "submission": submission_block(self.benchmark, self.server), "warnings": [warning]}

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        return "scored by the server"
