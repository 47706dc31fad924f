"""Bootstrap confidence intervals and paired tests for the headline metrics of a run.

The metric is first rebuilt from the run's per-sample records by the estimator its protocol
declares (`Protocol.estimator`, rvt_bench.metrics.estimators: a mean over strata of ratios of sums,
or a corpus caption metric recomputed from sufficient statistics). Resampling is then a matrix product: a (B, n) matrix of multinomial
resampling counts times the per-sample vectors (no re-aggregation per replicate).

Resampling unit = the sample (for ReVOS: the expression), within each stratum (ReVOS: per type;
RVTBench: per task), with replacement; percentile interval; a fixed seed makes it deterministic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from rvt_bench.core.records import ScoreRecord
from rvt_bench.metrics.estimators import CorpusEstimator, Estimator, Stratum

__all__ = ["DEFAULT_B", "DEFAULT_SEED", "LEVEL", "CorpusEstimator", "Estimator", "PairedResult", "Stratum",
           "confidence_interval", "headline_cis", "paired"]

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


def _replicates(strata: Sequence[Stratum], b: int, rng: np.random.Generator,
                paired: Sequence[Stratum] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(b,) bootstrap replicates of the estimator (and of `paired`'s, with the same draws)."""
    vals = np.zeros(b)
    other = np.zeros(b) if paired is not None else None
    for k, s in enumerate(strata):
        n = len(s.ids)
        step = max(1, _CELLS // max(n, 1))
        for lo in range(0, b, step):
            c = _counts(rng, n, min(step, b - lo))
            vals[lo:lo + len(c)] += _ratio(c @ s.num, c @ s.den)
            if paired is not None:
                other[lo:lo + len(c)] += _ratio(c @ paired[k].num, c @ paired[k].den)
    m = len(strata)
    return vals / m, (other / m if other is not None else None)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1), 0.0)


def _corpus_replicates(est: CorpusEstimator, b: int, rng: np.random.Generator,
                       paired: CorpusEstimator | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(b,) replicates of a corpus metric (and of `paired`'s, with the same draws); the draws are
    made as for a one-stratum Estimator of the same n."""
    vals, other = np.zeros(b), (np.zeros(b) if paired is not None else None)
    step = max(1, _CELLS // max(est.n, 1))
    for lo in range(0, b, step):
        c = _counts(rng, est.n, min(step, b - lo))
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
        how = "samples; corpus metric recomputed per replicate" + ("" if est.order is not None else " (IDF included)")
    else:
        reps, _ = _replicates(est.strata, b, rng)
        how = "samples" if len(est.strata) == 1 else f"samples within {len(est.strata)} strata"
    alpha = (1 - level) / 2
    low, high = np.quantile(reps, [alpha, 1 - alpha])
    return {"low": float(low), "high": float(high), "level": level, "B": b, "seed": seed, "n": est.n, "resampled": how}


def headline_cis(protocol: Any, records: list[ScoreRecord], metrics: dict[str, Any], b: int = DEFAULT_B,
                 seed: int = DEFAULT_SEED) -> dict[str, dict[str, Any]]:
    """metrics.json "ci": {headline key: confidence_interval(...) or {"low": None, "high": None,
    "reason": why}} for every headline metric of `protocol` present in `metrics`, from the
    estimator the protocol declares for it (`protocol.estimator(key, records)`)."""
    out: dict[str, dict[str, Any]] = {}
    for key in protocol.headline:
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

    delta = B - A; its interval is a paired percentile bootstrap (the same draws for both runs);
    p_value a two-sided paired permutation test: each sample's A and B records swapped with
    probability 1/2, p = (1 + #{|delta*| >= |delta|}) / (1 + b). Corpus metrics (CorpusEstimator)
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
        perm_a, perm_b = est_a.permuted(est_b, rng.integers(0, 2, size=(b, est_a.n)).astype(np.float64))
        perm = perm_b - perm_a
    else:
        perm = np.zeros(b)
        for sa, sb in zip(est_a.strata, est_b.strata):
            swap = rng.integers(0, 2, size=(b, len(sa.ids))).astype(np.float64)
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
    return PairedResult(est_a.key, va, vb, delta, float(low), float(high), min(1.0, p), est_a.n,
                        wins, losses, len(shared) - wins - losses)
