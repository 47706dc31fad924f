"""Bootstrap confidence intervals and paired tests for the headline metrics of a run.

Every headline metric of the shipped protocols but the corpus caption metrics is a mean, over one
or more strata of samples, of a ratio of sums over the stratum's samples: value = mean_s (sum_i
num_i / sum_i den_i). A plain mean (J&F, gIoU, ROUGE-L) has den = 1; cIoU has num = I, den = U;
ReVOS's overall = (referring + reasoning) / 2 has two strata. So one estimator serves them all, and
resampling is a matrix product: a (B, n) matrix of multinomial resampling counts times the
per-sample vectors (no re-aggregation per replicate).

Resampling unit = the sample (for ReVOS: the expression), within each stratum (ReVOS: per type;
RVTBench: per task), with replacement; percentile interval; a fixed seed makes it deterministic.
Corpus-level text metrics (RVTBench vqa / summarization BLEU-1..4 and CIDEr: pycocoevalcap over the
whole corpus; METEOR, the jar's own aggregate, has no estimator) are not means of per-sample values: a CorpusEstimator recomputes the corpus metric on
every resample from per-sample sufficient statistics (metrics/text_resample.py; CIDEr's IDF is
recomputed per resample, as pycocoevalcap computes it per evaluated corpus). Their texts are
tokenised once (PTBTokenizer, Java) when the estimator is built.

ReVOS in mode="reference" rounds each expression's J and F to 2 decimals of a percent before
averaging (VISA); the estimator does the same, so its point value equals the reported one.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

DEFAULT_B = 1000
DEFAULT_SEED = 0
LEVEL = 0.95
# An estimator whose point value differs from the protocol's own number by more than this is not
# used (its interval would describe another number).
_TOLERANCE = 1e-6
_CELLS = 4_000_000  # resampling matrix cells per chunk (B x n float64: 32 MB)


@dataclass
class Stratum:
    """One group of samples resampled on its own: value = sum(num) / sum(den)."""

    ids: list[str]
    num: np.ndarray  # (n,) float64
    den: np.ndarray  # (n,) float64

    def value(self) -> float:
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

    stats: metrics.text_resample.BleuStatistics or CiderStatistics of the samples; order: the BLEU
    order index (0 for BLEU-1 .. 3 for BLEU-4), None for CIDEr; references: the tokenised references
    per sample (two runs are paired only over identical references)."""

    key: str
    ids: list[str]
    stats: Any
    order: int | None
    references: list

    @property
    def n(self) -> int:
        return len(self.ids)

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """(b,) the metric on b resamples given as (b, n) draw counts."""
        values = self.stats.resampled(counts)
        return values if self.order is None else values[:, self.order]

    def value(self) -> float:
        return float(self.resampled(np.ones((1, self.n)))[0])

    def sample_scores(self) -> np.ndarray:
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


_TEXT_METRICS = {"BLEU-1": 0, "BLEU-2": 1, "BLEU-3": 2, "BLEU-4": 3, "CIDEr": None}


@functools.lru_cache(maxsize=8)
def _tokenized(items: tuple[tuple[str, str, tuple[str, ...]], ...]) -> tuple[dict, dict]:
    # one PTBTokenizer (Java) pass per corpus, shared by its BLEU-n and CIDEr estimators
    from metrics.text import tokenize_captions

    return tokenize_captions([(sid, hyp) for sid, hyp, _ in items], {sid: list(refs) for sid, _, refs in items})


def _corpus(key: str, metric: str, records: list[dict]) -> Estimator | CorpusEstimator | str:
    """The CorpusEstimator of a caption metric over `records` (scores.jsonl records with
    "hypothesis" and "references"), or why there is none."""
    from metrics.text import JavaMissingError
    from metrics.text_resample import BleuStatistics, CiderStatistics

    records = sorted(records, key=lambda r: r["sample_id"])
    items = tuple((r["sample_id"], r["hypothesis"], tuple(r["references"])) for r in records)
    try:
        res, gts = _tokenized(items)
    except (JavaMissingError, ImportError, ValueError) as exc:
        return f"corpus-level text metric: its texts could not be tokenised for the bootstrap ({exc})"
    ids = [r["sample_id"] for r in records]
    if metric == "ROUGE-L":  # pycocoevalcap: the mean of per-sample scores, which need no corpus
        from pycocoevalcap.rouge.rouge import Rouge

        _, scores = Rouge().compute_score({i: gts[i] for i in ids}, {i: res[i] for i in ids})
        return Estimator(key, [Stratum(ids, np.asarray(scores, dtype=np.float64), np.ones(len(ids)))])
    order = _TEXT_METRICS[metric]
    stats = (CiderStatistics if order is None else BleuStatistics)(res, gts, ids)
    return CorpusEstimator(key, ids, stats, order, [gts[i] for i in ids])


def _stratum(records: list[dict], num: Callable[[dict], float], den: Callable[[dict], float] = lambda r: 1.0) -> Stratum:
    records = sorted(records, key=lambda r: r["sample_id"])
    return Stratum([r["sample_id"] for r in records], np.array([num(r) for r in records], np.float64),
                   np.array([den(r) for r in records], np.float64))


def _visa_round(x: float) -> float:
    # VISA: round(100 * j, 2) on a numpy float64 (numpy's rounding), then back to a fraction
    return float(round(100 * np.float64(x), 2)) / 100


def _revos(protocol: Any, key: str, records: list[dict]) -> Estimator | str:
    from metrics.protocols.revos import SCORED_TYPES, TYPES  # ReVOS's type names, defined once

    types = {TYPES[t]: (t,) for t in SCORED_TYPES}
    prefix, _, metric = key.rpartition("/")
    if prefix and prefix not in types:
        return f"no estimator for ReVOS metric {key!r}"
    chosen = types[prefix] if prefix else (0, 1)
    rnd = _visa_round if getattr(protocol, "mode", "reference") == "reference" else float
    if metric == "J&F":
        fn = lambda r: (rnd(r["J"]) + rnd(r["F"])) / 2  # noqa: E731
    elif metric in ("J", "F", "A", "R"):
        fn = lambda r: rnd(r[metric])  # noqa: E731
    else:
        return f"no estimator for ReVOS metric {key!r}"
    strata = [_stratum(g, fn) for t in chosen if (g := [r for r in records if r.get("type_id") == t])]
    return Estimator(key, strata) if strata else "no scored expressions"


def _reasonseg(protocol: Any, key: str, records: list[dict]) -> Estimator | str:
    if key == "gIoU":
        term = "giou_term" if getattr(protocol, "mode", "reference") == "reference" else "iou"
        return Estimator(key, [_stratum(records, lambda r: r[term])])
    if key == "cIoU":
        return Estimator(key, [_stratum(records, lambda r: r["I"], lambda r: r["U"])])
    return f"no estimator for ReasonSeg metric {key!r}"


def _rvtbench(protocol: Any, key: str, records: list[dict]) -> Estimator | str:
    task, _, metric = key.partition("/")
    own = [r for r in records if r.get("task") == task]
    if not own:
        return f"no {task} samples"
    if task == "segmentation" and metric in ("J", "F", "J&F"):
        return Estimator(key, [_stratum(own, lambda r: r[metric])])
    if task == "grounding":
        if metric == "m_vIoU":
            return Estimator(key, [_stratum(own, lambda r: r["viou"])])
        if metric.startswith("vIoU@"):
            at = float(metric[5:])
            return Estimator(key, [_stratum(own, lambda r: float(r["viou"] > at))])
        if metric == "gIoU":
            return Estimator(key, [_stratum(own, lambda r: r["giou_term"])])
        if metric == "cIoU":
            return Estimator(key, [_stratum(own, lambda r: r["I"], lambda r: r["U"])])
        if metric.startswith("Acc@"):
            threshold = float(metric[4:])
            return Estimator(key, [_stratum(own, lambda r: float(r["giou_term"] > threshold))])
    if metric == "judge":
        scored = [r for r in own if (r.get("judge") or {}).get("score") is not None]
        return Estimator(key, [_stratum(scored, lambda r: float(r["judge"]["score"]))]) if scored else "no judged samples"
    if task in ("vqa", "summarization"):
        if metric in _TEXT_METRICS or metric == "ROUGE-L":
            return _corpus(key, metric, own)
        return f"corpus-level text metric {metric!r} (pycocoevalcap): no resampling statistics for it"
    return f"no estimator for RVTBench metric {key!r}"


_BY_PROTOCOL: dict[str, Callable[[Any, str, list[dict]], Estimator | CorpusEstimator | str]] = {
    "revos": _revos, "reasonseg": _reasonseg, "rvtbench": _rvtbench,
}


def estimator(protocol: Any, key: str, records: list[dict]) -> Estimator | CorpusEstimator | str:
    """The estimator of metric `key` of `protocol` (a metrics.protocols Protocol) from its scores.jsonl
    records, or a string saying why there is none. A composite protocol's "<part>/<key>" is the
    part's estimator over that part's records. Unknown protocols: a plain mean over samples when
    every record has a numeric field named `key`."""
    parts = getattr(protocol, "parts", None)
    # a named protocol first: RVTBench is a composite of task parts, estimated by task
    if isinstance(parts, dict) and getattr(protocol, "name", None) not in _BY_PROTOCOL:
        name, _, rest = key.partition("/")
        if name not in parts:
            return f"no protocol part {name!r}"
        found = estimator(parts[name], rest, [r for r in records if r.get("part") == name])
        if not isinstance(found, str):
            found.key = key
        return found
    try:
        if protocol.name in _BY_PROTOCOL:
            return _BY_PROTOCOL[protocol.name](protocol, key, records)
    except KeyError as exc:
        return f"records lack {exc}"
    if records and all(isinstance(r.get(key), (int, float)) for r in records):
        return Estimator(key, [_stratum(records, lambda r: float(r[key]))])
    return f"no per-sample estimator for {key!r}"


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


def headline_cis(protocol: Any, records: list[dict], metrics: dict[str, Any], b: int = DEFAULT_B,
                 seed: int = DEFAULT_SEED) -> dict[str, dict[str, Any]]:
    """metrics.json "ci": {headline key: confidence_interval(...) or {"low": None, "high": None,
    "reason": why}} for every headline metric of `protocol` present in `metrics`."""
    out: dict[str, dict[str, Any]] = {}
    for key in protocol.headline:
        reported = metrics.get(key)
        if not isinstance(reported, (int, float)) or isinstance(reported, bool) or not math.isfinite(reported):
            continue
        est = estimator(protocol, key, records)
        if not isinstance(est, str) and abs(est.value() - reported) > _TOLERANCE:
            est = f"per-sample estimator gives {est.value():.6f}, the protocol {reported:.6f}"
        out[key] = (confidence_interval(est, b, seed) if not isinstance(est, str)
                    else {"low": None, "high": None, "reason": est})
    return out


@dataclass
class PairedResult:
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
