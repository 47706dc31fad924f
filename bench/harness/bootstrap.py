"""Bootstrap confidence intervals and paired tests for the headline metrics of a run.

The metric is first rebuilt from the run's per-sample records by the estimator its protocol
declares (`Protocol.estimator`, rvt_bench.metrics.estimators: a mean over strata of ratios of sums,
or a corpus caption metric recomputed from sufficient statistics). Resampling is then a matrix product: a (B, n) matrix of multinomial
resampling counts times the per-sample vectors (no re-aggregation per replicate).

Resampling unit = the source: the video or image a sample was asked about (ScoreRecord.source),
drawn with all its samples (ReVOS: a video with its expressions; a cluster bootstrap), within each
stratum (ReVOS: per type; RVTBench: per task), with replacement; percentile interval; a fixed seed
makes it deterministic. Samples of one video are not independent, so resampling them one by one
gives intervals that are too narrow (lmms-eval reports clustered standard errors for the same
reason). Where no two samples of a stratum share a source (ReasonSeg, one text per image) the
source is the sample and the draws are exactly the sample bootstrap's. When a source has samples in
two strata (a ReVOS video with referring and reasoning expressions), the sources are drawn once for
all strata together, so its samples stay together across strata (each stratum's size then varies
between replicates; `_plan`). The
paired tests cluster the same way: the paired bootstrap draws sources, the permutation test swaps
a source's samples together. The method is named in every interval ("resampled").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from rvt_bench.core.records import ScoreRecord
from rvt_bench.metrics.estimators import CorpusEstimator, Estimator, Stratum

__all__ = ["DEFAULT_B", "DEFAULT_SEED", "LEVEL", "CorpusEstimator", "Estimator", "PairedResult", "Stratum",
           "confidence_interval", "headline_cis", "method", "paired"]

DEFAULT_B = 1000
DEFAULT_SEED = 0
LEVEL = 0.95
# An estimator whose point value differs from the protocol's own number by more than this is not
# used (its interval would describe another number).
_TOLERANCE = 1e-6
_CELLS = 4_000_000  # resampling matrix cells per chunk (B x n float64: 32 MB)


def _counts(rng: np.random.Generator, n: int, b: int) -> np.ndarray:
    """(b, n) resampling counts: how often each of n samples is drawn in each replicate."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)


def _plan(strata: Sequence[Stratum]) -> tuple[int | None, list[tuple[np.ndarray, int] | None]]:
    """How the strata are drawn: (None, per-stratum clusters) when no source has samples in two
    strata (each stratum drawn on its own: its sources, or its samples where no two share one);
    (M, each stratum's sample -> index among all M sources) when one does: the sources are then
    drawn once for all strata together, so that a video's referring and reasoning expressions stay
    together (the strata's sizes then vary between replicates)."""
    own = [set(s.sources) if s.sources is not None else None for s in strata]
    if len(strata) > 1 and all(o is not None for o in own) and sum(map(len, own)) > len(set().union(*own)):
        index: dict[str, int] = {}
        found = [np.array([index.setdefault(x, len(index)) for x in s.sources], dtype=np.int64) for s in strata]
        return len(index), [(of, 0) for of in found]
    return None, [s.clusters() for s in strata]


def _by_source(s: Stratum, clusters: tuple[np.ndarray, int] | None, m: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The stratum's num and den summed per source ((m,) each; unchanged without clusters)."""
    if clusters is None:
        return s.num, s.den
    of, own = clusters
    size = m if m is not None else own
    return np.bincount(of, s.num, size), np.bincount(of, s.den, size)


def _replicates(strata: Sequence[Stratum], b: int, rng: np.random.Generator,
                paired: Sequence[Stratum] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(b,) bootstrap replicates of the estimator (and of `paired`'s, with the same draws): sources
    drawn with their samples (`_plan`; the first run's sources for both)."""
    vals = np.zeros(b)
    other = np.zeros(b) if paired is not None else None
    joint, plan = _plan(strata)
    if joint is not None:
        sums = [_by_source(s, plan[k], joint) for k, s in enumerate(strata)]
        psums = [_by_source(paired[k], plan[k], joint) for k in range(len(strata))] if paired is not None else None
        step = max(1, _CELLS // max(joint * len(strata), 1))
        for lo in range(0, b, step):
            c = _counts(rng, joint, min(step, b - lo))
            for k, (num, den) in enumerate(sums):
                vals[lo:lo + len(c)] += _ratio(c @ num, c @ den)
                if psums is not None:
                    other[lo:lo + len(c)] += _ratio(c @ psums[k][0], c @ psums[k][1])
    for k, s in enumerate(strata if joint is None else []):
        num, den = _by_source(s, plan[k])
        if paired is not None:
            pnum, pden = _by_source(paired[k], plan[k])
        n = len(num)
        step = max(1, _CELLS // max(n, 1))
        for lo in range(0, b, step):
            c = _counts(rng, n, min(step, b - lo))
            vals[lo:lo + len(c)] += _ratio(c @ num, c @ den)
            if paired is not None:
                other[lo:lo + len(c)] += _ratio(c @ pnum, c @ pden)
    m = len(strata)
    return vals / m, (other / m if other is not None else None)


def _sample_counts(counts: np.ndarray, clusters: tuple[np.ndarray, int] | None) -> np.ndarray:
    """(b, n) per-sample counts from (b, m) per-source counts: each sample drawn as often as its source."""
    return counts if clusters is None else counts[:, clusters[0]]


def method(est: Estimator | CorpusEstimator) -> str:
    """How `est` is resampled, in words (metrics.json ci "resampled")."""
    if isinstance(est, CorpusEstimator):
        clusters = est.clusters()
        unit = "samples" if clusters is None else f"sources ({clusters[1]} videos or images, each with all its samples)"
        return f"{unit}; corpus metric recomputed per replicate" + ("" if est.order is not None else " (IDF included)")
    joint, plan = _plan(est.strata)
    k = len(est.strata)
    if joint is not None:
        return f"sources ({joint} videos or images, each with all its samples; {est.n} samples), drawn across the {k} strata together"
    within = "" if k == 1 else f" within {k} strata"
    if all(c is None for c in plan):
        return "samples" + within
    m = sum(c[1] if c is not None else len(s.ids) for c, s in zip(plan, est.strata))
    return f"sources ({m} videos or images, each with all its samples; {est.n} samples){within}"


def n_clusters(est: Estimator | CorpusEstimator) -> int:
    """How many independent units the bootstrap draws for `est`: its sources (videos or images,
    each with all its samples) where they cluster the samples, else its samples."""
    if isinstance(est, CorpusEstimator):
        found = est.clusters()
        return len(est.ids) if found is None else int(found[1])
    joint, plan = _plan(est.strata)
    if joint is not None:
        return int(joint)
    return sum(int(c[1]) if c is not None else len(s.ids) for c, s in zip(plan, est.strata))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1), 0.0)


def _corpus_replicates(est: CorpusEstimator, b: int, rng: np.random.Generator,
                       paired: CorpusEstimator | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(b,) replicates of a corpus metric (and of `paired`'s, with the same draws); the draws are
    made as for a one-stratum Estimator of the same n."""
    vals, other = np.zeros(b), (np.zeros(b) if paired is not None else None)
    clusters = est.clusters()
    n = est.n if clusters is None else clusters[1]
    step = max(1, _CELLS // max(est.n, 1))
    for lo in range(0, b, step):
        c = _sample_counts(_counts(rng, n, min(step, b - lo)), clusters)
        vals[lo:lo + len(c)] = est.resampled(c)
        if paired is not None:
            other[lo:lo + len(c)] = paired.resampled(c)
    return vals, other


def confidence_interval(est: Estimator | CorpusEstimator, b: int = DEFAULT_B, seed: int = DEFAULT_SEED,
                        level: float = LEVEL) -> dict[str, Any]:
    """{"low", "high"} (the metric's own scale: fractions, CIDEr's score; percentile bootstrap),
    "level", "B", "seed", "n", "resampled". Raises ValueError when b < 1."""
    if b < 1:
        raise ValueError(f"bootstrap: B must be >= 1, got {b}")
    rng = np.random.default_rng(seed)
    if isinstance(est, CorpusEstimator):
        reps, _ = _corpus_replicates(est, b, rng)
    else:
        reps, _ = _replicates(est.strata, b, rng)
    how = method(est)
    alpha = (1 - level) / 2
    low, high = np.quantile(reps, [alpha, 1 - alpha])
    return {"low": float(low), "high": float(high), "level": level, "B": b, "seed": seed, "n": est.n, "resampled": how}


def headline_cis(protocol: Any, records: list[ScoreRecord], metrics: dict[str, Any], b: int = DEFAULT_B,
                 seed: int = DEFAULT_SEED, keys: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """metrics.json "ci": {headline key: confidence_interval(...) or {"low": None, "high": None,
    "reason": why}} for every headline metric of `protocol` (or each of `keys`) present in
    `metrics`, from the estimator the protocol declares for it (`protocol.estimator(key, records)`)."""
    out: dict[str, dict[str, Any]] = {}
    for key in protocol.headline if keys is None else keys:
        reported = metrics.get(key)
        if not isinstance(reported, (int, float)) or isinstance(reported, bool) or not math.isfinite(reported):
            continue
        est = protocol.estimator(key, records)
        if not isinstance(est, str) and abs(est.value() - reported) > _TOLERANCE:
            est = f"per-sample estimator gives {est.value():.6f}, the protocol {reported:.6f}"
        out[key] = (confidence_interval(est, b, seed) if not isinstance(est, str)
                    else {"low": None, "high": None, "reason": est})
    return out


@dataclass
class PairedResult:
    """One headline metric of two runs compared over their shared samples (`paired`); values on the
    metric's own scale (fractions; CIDEr's score)."""

    key: str
    a: float
    b: float
    delta: float           # b - a
    low: float             # paired bootstrap interval of delta
    high: float
    p_value: float         # paired permutation test, two-sided
    n: int                 # shared samples
    resampled: str         # how: samples, or sources with their samples (bootstrap.method)
    wins: int              # samples where B scores higher than A
    losses: int
    ties: int


def _corpus_pair_check(est_a: CorpusEstimator, est_b: CorpusEstimator) -> None:
    if est_a.ids != est_b.ids or est_a.order != est_b.order:
        raise ValueError(f"{est_a.key}: the two runs' samples differ; compare over shared samples only")
    if est_a.references != est_b.references:
        raise ValueError(f"{est_a.key}: the two runs' references differ; a corpus metric is compared over the same references only")


def paired(est_a: Estimator | CorpusEstimator, est_b: Estimator | CorpusEstimator, b: int = DEFAULT_B,
           seed: int = DEFAULT_SEED, level: float = LEVEL) -> PairedResult:
    """Compare two runs' estimators over the same samples (strata with identical ids, in order).

    delta = B - A; its interval is a paired percentile bootstrap (the same draws of sources for both
    runs); p_value a two-sided paired permutation test: each source's A and B records (all its
    samples together) swapped with probability 1/2, p = (1 + #{|delta*| >= |delta|}) / (1 + b). Corpus metrics (CorpusEstimator)
    likewise, the corpus metric recomputed on every draw and every swap. Raises ValueError when
    the strata (or, for corpus metrics, the samples or references) differ.
    """
    corpus = isinstance(est_a, CorpusEstimator)
    if corpus != isinstance(est_b, CorpusEstimator):
        raise ValueError(f"{est_a.key}: cannot pair a corpus estimator with a per-sample one")
    if corpus:
        _corpus_pair_check(est_a, est_b)
    elif [s.ids for s in est_a.strata] != [s.ids for s in est_b.strata]:
        raise ValueError(f"{est_a.key}: the two runs' samples differ; compare over shared samples only")
    rng = np.random.default_rng(seed)
    va, vb = est_a.value(), est_b.value()
    delta = vb - va
    if corpus:
        rep_a, rep_b = _corpus_replicates(est_a, b, rng, est_b)
    else:
        rep_a, rep_b = _replicates(est_a.strata, b, rng, est_b.strata)
    alpha = (1 - level) / 2
    low, high = np.quantile(rep_b - rep_a, [alpha, 1 - alpha])
    if corpus:
        clusters = est_a.clusters()
        swap = rng.integers(0, 2, size=(b, est_a.n if clusters is None else clusters[1])).astype(np.float64)
        perm_a, perm_b = est_a.permuted(est_b, _sample_counts(swap, clusters))
        perm = perm_b - perm_a
    else:
        perm = np.zeros(b)
        joint, plan = _plan(est_a.strata)
        shared_swap = rng.integers(0, 2, size=(b, joint)).astype(np.float64) if joint is not None else None
        for k, (sa, sb) in enumerate(zip(est_a.strata, est_b.strata)):
            clusters = plan[k]
            swap = (_sample_counts(shared_swap, clusters) if shared_swap is not None else
                    _sample_counts(rng.integers(0, 2, size=(b, len(sa.ids) if clusters is None else clusters[1]))
                                   .astype(np.float64), clusters))
            num_a = sa.num.sum() + swap @ (sb.num - sa.num)
            den_a = sa.den.sum() + swap @ (sb.den - sa.den)
            num_b = sb.num.sum() + swap @ (sa.num - sb.num)
            den_b = sb.den.sum() + swap @ (sa.den - sb.den)
            perm += _ratio(num_b, den_b) - _ratio(num_a, den_a)
        perm /= len(est_a.strata)
    p = (1 + int(np.sum(np.abs(perm) >= abs(delta) - 1e-12))) / (1 + b)
    sa_scores, sb_scores = est_a.per_sample(), est_b.per_sample()
    shared = [i for i in sa_scores if i in sb_scores]
    wins = sum(sb_scores[i] > sa_scores[i] for i in shared)
    losses = sum(sb_scores[i] < sa_scores[i] for i in shared)
    return PairedResult(est_a.key, va, vb, delta, float(low), float(high), min(1.0, p), est_a.n, method(est_a),
                        wins, losses, len(shared) - wins - losses)
