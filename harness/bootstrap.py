"""Bootstrap confidence intervals and paired tests for the headline metrics of a run.

Every headline metric of the shipped protocols is a mean, over one or more strata of samples, of a
ratio of sums over the stratum's samples: value = mean_s (sum_i num_i / sum_i den_i). A plain mean
(J&F, gIoU) has den = 1; cIoU has num = I, den = U; ReVOS's overall = (referring + reasoning) / 2
has two strata. So one estimator serves them all, and resampling is a matrix product: a (B, n)
matrix of multinomial resampling counts times the per-sample vectors (no re-aggregation per replicate).

Resampling unit = the sample (for ReVOS: the expression), within each stratum (ReVOS: per type;
RVTBench: per task), with replacement; percentile interval; a fixed seed makes it deterministic.
Corpus-level text metrics (BLEU, CIDEr: pycocoevalcap over the whole corpus) have no per-sample
decomposition here: their interval is null with that reason.

ReVOS in mode="reference" rounds each expression's J and F to 2 decimals of a percent before
averaging (VISA); the estimator does the same, so its point value equals the reported one.
"""
from __future__ import annotations

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
        return "corpus-level text metric (pycocoevalcap): no per-sample bootstrap"
    return f"no estimator for RVTBench metric {key!r}"


_BY_PROTOCOL: dict[str, Callable[[Any, str, list[dict]], Estimator | str]] = {
    "revos": _revos, "reasonseg": _reasonseg, "rvtbench": _rvtbench,
}


def estimator(protocol: Any, key: str, records: list[dict]) -> Estimator | str:
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
        if isinstance(found, Estimator):
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


def confidence_interval(est: Estimator, b: int = DEFAULT_B, seed: int = DEFAULT_SEED, level: float = LEVEL) -> dict[str, Any]:
    """{"low", "high"} (fractions, percentile bootstrap), "level", "B", "seed", "n", "resampled"."""
    if b < 1:
        raise ValueError(f"bootstrap: B must be >= 1, got {b}")
    reps, _ = _replicates(est.strata, b, np.random.default_rng(seed))
    alpha = (1 - level) / 2
    low, high = np.quantile(reps, [alpha, 1 - alpha])
    return {"low": float(low), "high": float(high), "level": level, "B": b, "seed": seed, "n": est.n,
            "resampled": "samples" if len(est.strata) == 1 else f"samples within {len(est.strata)} strata"}


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
        if isinstance(est, Estimator) and abs(est.value() - reported) > _TOLERANCE:
            est = f"per-sample estimator gives {est.value():.6f}, the protocol {reported:.6f}"
        out[key] = (confidence_interval(est, b, seed) if isinstance(est, Estimator)
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


def paired(est_a: Estimator, est_b: Estimator, b: int = DEFAULT_B, seed: int = DEFAULT_SEED,
           level: float = LEVEL) -> PairedResult:
    """Compare two runs' estimators over the same samples (strata with identical ids, in order).

    delta = B - A; its interval is a paired percentile bootstrap (the same draws for both runs);
    p_value a two-sided paired permutation test: each sample's A and B records swapped with
    probability 1/2, p = (1 + #{|delta*| >= |delta|}) / (1 + b). Raises ValueError when the strata differ.
    """
    if [s.ids for s in est_a.strata] != [s.ids for s in est_b.strata]:
        raise ValueError(f"{est_a.key}: the two runs' samples differ; compare over shared samples only")
    rng = np.random.default_rng(seed)
    va, vb = est_a.value(), est_b.value()
    delta = vb - va
    rep_a, rep_b = _replicates(est_a.strata, b, rng, est_b.strata)
    alpha = (1 - level) / 2
    low, high = np.quantile(rep_b - rep_a, [alpha, 1 - alpha])
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
