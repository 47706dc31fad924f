"""95% bootstrap intervals of a run's paper-table cells beyond its headline metrics
(rvt_bench.leaderboards.tables: VISA's referring / reasoning columns, LISA's short / long query,
RVTBench's levels), so that every value of the table a run prints carries its interval. Each cell
is the estimator the protocol declares (`Protocol.estimator`) over the records of the cell's subset."""
from __future__ import annotations

import re
from typing import Any

from rvt_bench.core.records import ScoreRecord
from rvt_bench.harness.bootstrap import confidence_interval
from rvt_bench.metrics.estimators import CorpusEstimator
from rvt_bench.leaderboards.tables import cell_keys, cells_of
from rvt_bench.metrics.protocols.base import group_key

_TOLERANCE = 1e-6  # as bootstrap.headline_cis: an estimator must give the reported value


def _subset(key: str, records: list[ScoreRecord]) -> tuple[str, list[ScoreRecord]]:
    """(the protocol's metric key, the records) of a cell key: "referring/J" -> all records;
    "is_sentence=false/gIoU" -> ("gIoU", records whose meta is_sentence is false);
    "segmentation/level=1/J" -> ("segmentation/J", records of level 1)."""
    if "=" not in key:
        return key, records
    left, right = key.split("=", 1)
    value, _, metric = right.partition("/")
    prefix, _, meta = left.rpartition("/")
    chosen = [r for r in records if meta in r.meta and group_key(r.meta[meta]) == value]
    return (f"{prefix}/{metric}" if prefix else metric), chosen


def table_cis(protocol: Any, records: list[ScoreRecord], body: dict[str, Any], b: int, seed: int) -> dict[str, dict]:
    """{cell key: confidence_interval(...) or {"low": None, "high": None, "reason"}} for the cells of
    the run's paper table that are not headline metrics. Corpus-level text metrics (BLEU, CIDEr) get
    none on a subset: their replicates recompute the corpus score and would cost a bootstrap each."""
    cells = cells_of(body)
    out: dict[str, dict] = {}
    for key in cell_keys(str(body.get("dataset")), body):
        if key in (protocol.headline or []) or not isinstance(cells.get(key), (int, float)):
            continue
        metric, subset = _subset(key, records)  # a tagged key ("R[binarized]") as the protocol names it
        est = protocol.estimator(metric, subset) if subset else "no samples in this subset"
        if isinstance(est, str) and "[" in key:  # a key whose tag the protocol does not name
            metric, subset = _subset(re.sub(r"\[[^\]]*\]", "", key), records)
            est = protocol.estimator(metric, subset) if subset else est
        if isinstance(est, CorpusEstimator) and "=" in key:
            est = "corpus-level metric: no interval per subset"
        if not isinstance(est, str) and abs(est.value() - cells[key]) > _TOLERANCE:
            est = f"per-sample estimator gives {est.value():.6f}, the protocol {cells[key]:.6f}"
        out[key] = confidence_interval(est, b, seed) if not isinstance(est, str) else {"low": None, "high": None, "reason": est}
    return out
