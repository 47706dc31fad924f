"""Per-sample estimators of the headline metrics: each rebuilds a protocol's reported number from
its scores.jsonl records in a form the bootstrap (bench/harness/bootstrap.py) can resample.

Every headline metric of the shipped protocols but the corpus caption metrics is a mean, over one
or more strata of samples, of a ratio of sums over the stratum's samples: value = mean_s (sum_i
num_i / sum_i den_i). A plain mean (J&F, gIoU, ROUGE-L) has den = 1; cIoU has num = I, den = U;
ReVOS's overall = (referring + reasoning) / 2 has two strata (per type; RVTBench: per task), so one
`Estimator` serves them all.

Corpus-level text metrics (RVTBench vqa / summarization BLEU-1..4 and CIDEr: pycocoevalcap over the
whole corpus; METEOR, the jar's own aggregate, has no estimator) are not means of per-sample values:
a `CorpusEstimator` recomputes the corpus metric on every resample from per-sample sufficient
statistics (metrics/text_resample.py; CIDEr's IDF is recomputed per resample, as pycocoevalcap
computes it per evaluated corpus). Their texts are tokenised once (PTBTokenizer, Java) when the
estimator is built.

ReVOS in mode="reference" rounds each expression's J and F to 2 decimals of a percent before
averaging (VISA); the estimator does the same, so its point value equals the reported one.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class Stratum:
    """One group of samples resampled on its own: value = sum(num) / sum(den)."""

    ids: list[str]
    num: np.ndarray  # (n,) float64
    den: np.ndarray  # (n,) float64

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


_TEXT_METRICS = {"BLEU-1": 0, "BLEU-2": 1, "BLEU-3": 2, "BLEU-4": 3, "CIDEr": None}


@functools.lru_cache(maxsize=8)
def _tokenized(items: tuple[tuple[str, str, tuple[str, ...]], ...]) -> tuple[dict, dict]:
    # one PTBTokenizer (Java) pass per corpus, shared by its BLEU-n and CIDEr estimators
    from rvt_bench.metrics.text import tokenize_captions

    return tokenize_captions([(sid, hyp) for sid, hyp, _ in items], {sid: list(refs) for sid, _, refs in items})


def _corpus(key: str, metric: str, records: list[dict]) -> Estimator | CorpusEstimator | str:
    """The CorpusEstimator of a caption metric over `records` (scores.jsonl records with
    "hypothesis" and "references"), or why there is none."""
    from rvt_bench.metrics.text import JavaMissingError
    from rvt_bench.metrics.text_resample import BleuStatistics, CiderStatistics

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
    from rvt_bench.metrics.protocols.revos import SCORED_TYPES, TYPES  # ReVOS's type names, defined once

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
        if getattr(protocol, "mode", "reference") == "reference":
            # LISA divides the sum by N + 1e-5 (rvt_bench.metrics.masks.giou): each sample's denominator is
            # 1 + 1e-5 / N, so a resample's sum(count * den) is N + 1e-5 as well; without it a run of
            # N <~ 10 samples differs from the protocol's number by more than the tolerance.
            n = len(records)
            return Estimator(key, [_stratum(records, lambda r: r["giou_term"], lambda r: 1.0 + 1e-5 / n)])
        return Estimator(key, [_stratum(records, lambda r: r["iou"])])
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
    """The estimator of metric `key` of `protocol` (a rvt_bench.metrics.protocols Protocol) from its scores.jsonl
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
