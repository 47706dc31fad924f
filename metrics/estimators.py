"""Per-sample estimators: a metric rebuilt from a run's score records in a form the bootstrap
(rvt_bench.harness.bootstrap) can resample. The protocol or unit that defines a metric declares its
estimator (`Protocol.estimator`, `Unit.estimator`); this module holds the two forms.

Every headline metric of the shipped protocols but the corpus caption metrics is a mean, over one
or more strata of samples, of a ratio of sums over the stratum's samples: value = mean_s (sum_i
num_i / sum_i den_i). A plain mean (J&F, gIoU, ROUGE-L) has den = 1; cIoU has num = I, den = U;
ReVOS's overall = (referring + reasoning) / 2 has two strata (per type), so one `Estimator` serves
them all. Corpus-level text metrics (BLEU-1..4, CIDEr) are not means of per-sample values: a
`CorpusEstimator` recomputes the corpus metric on every resample from per-sample sufficient
statistics (metrics/text_resample.py; rvt_bench.metrics.units.captions builds it).

Both carry each sample's source (the video or image it was asked about, ScoreRecord.source): the
bootstrap resamples sources, keeping the samples of one source together (a cluster bootstrap).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from rvt_bench.core.records import ScoreRecord


@dataclass
class Stratum:
    """One group of samples resampled on its own: value = sum(num) / sum(den).

    sources: (n,) each sample's source (video or image); None: every sample is its own."""

    ids: list[str]
    num: np.ndarray  # (n,) float64
    den: np.ndarray  # (n,) float64
    sources: list[str] | None = None

    def clusters(self) -> tuple[np.ndarray, int] | None:
        """(cluster index per sample (n,), number of clusters), None when no two samples share a source."""
        return clusters_of(self.sources)

    def value(self) -> float:
        """sum(num) / sum(den); 0.0 when sum(den) is 0."""
        den = float(self.den.sum())
        return float(self.num.sum()) / den if den else 0.0


@dataclass
class Estimator:
    """A headline metric as the mean over strata of sum(num) / sum(den)."""

    key: str
    strata: list[Stratum] = field(default_factory=list)

    @property
    def n(self) -> int:
        return sum(len(s.ids) for s in self.strata)

    def value(self) -> float:
        """The metric's point value: the mean of the strata's values."""
        return float(np.mean([s.value() for s in self.strata]))

    def per_sample(self) -> dict[str, float]:
        """Each sample's own num / den (its score for wins / losses); samples with den = 0 left out."""
        out = {}
        for s in self.strata:
            for i, sid in enumerate(s.ids):
                if s.den[i]:
                    out[sid] = float(s.num[i] / s.den[i])
        return out


@dataclass
class CorpusEstimator:
    """A corpus-level caption metric of one task's samples (ids sorted), recomputed per resample.

    stats: rvt_bench.metrics.text_resample.BleuStatistics or CiderStatistics of the samples; order: the BLEU
    order index (0 for BLEU-1 .. 3 for BLEU-4), None for CIDEr; references: the tokenised references
    per sample (two runs are paired only over identical references)."""

    key: str
    ids: list[str]
    stats: Any
    order: int | None
    references: list
    sources: list[str] | None = None  # (n,) each sample's source; None: every sample is its own

    def clusters(self) -> tuple[np.ndarray, int] | None:
        """(cluster index per sample (n,), number of clusters), None when no two samples share a source."""
        return clusters_of(self.sources)

    @property
    def n(self) -> int:
        return len(self.ids)

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """(b,) the metric on b resamples given as (b, n) draw counts."""
        values = self.stats.resampled(counts)
        return values if self.order is None else values[:, self.order]

    def value(self) -> float:
        """The corpus metric over all samples, each drawn once."""
        return float(self.resampled(np.ones((1, self.n)))[0])

    def sample_scores(self) -> np.ndarray:
        """(n,) each sample's own score, in `ids` order (sentence BLEU-n; CIDEr with the corpus IDF)."""
        scores = self.stats.sample_scores()
        return scores if self.order is None else scores[:, self.order]

    def per_sample(self) -> dict[str, float]:
        """Each sample's own score (sentence BLEU; CIDEr with the whole corpus's IDF) for wins / losses."""
        return dict(zip(self.ids, map(float, self.sample_scores())))

    def permuted(self, other: "CorpusEstimator", swap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(b,) values of this run and of `other` when each sample's hypotheses are exchanged where
        swap (b, n) is 1. BLEU: the swapped runs' summed statistics; CIDEr: the IDF depends on the
        references only (identical in both runs), so each sample keeps its full-corpus score."""
        if self.order is None:
            sa, sb = self.sample_scores(), other.sample_scores()
            return (sa.sum() + swap @ (sb - sa)) / self.n, (sb.sum() + swap @ (sa - sb)) / self.n
        ta, tb = self.stats.stats, other.stats.stats
        a = self.stats.corpus(ta.sum(axis=0) + swap @ (tb - ta))[:, self.order]
        b = self.stats.corpus(tb.sum(axis=0) + swap @ (ta - tb))[:, self.order]
        return a, b


def clusters_of(sources: list[str] | None) -> tuple[np.ndarray, int] | None:
    """(index of each sample's source in first-seen order (n,), number of sources), None when
    `sources` is None or no two samples share one."""
    if sources is None:
        return None
    index: dict[str, int] = {}
    of = np.array([index.setdefault(s, len(index)) for s in sources], dtype=np.int64)
    return None if len(index) == len(sources) else (of, len(index))


def stratum(records: list[ScoreRecord], num: Callable[[ScoreRecord], float],
            den: Callable[[ScoreRecord], float] = lambda r: 1.0) -> Stratum:
    """A Stratum of `records` in sample_id order: num(record) / den(record) per sample, each with its
    source (ScoreRecord.source; a record without one is its own source)."""
    records = sorted(records, key=lambda r: r.sample_id)
    return Stratum([r.sample_id for r in records], np.array([num(r) for r in records], np.float64),
                   np.array([den(r) for r in records], np.float64),
                   [r.source if r.source is not None else "\0" + r.sample_id for r in records])


def mean_of(key: str, records: list[ScoreRecord], value: Callable[[ScoreRecord], float]) -> Estimator:
    """The one-stratum Estimator of a plain mean over `records` of value(record)."""
    return Estimator(key, [stratum(records, value)])


Found = Estimator | CorpusEstimator | str  # an estimator, or why a metric has none
