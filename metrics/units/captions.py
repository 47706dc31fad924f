"""Caption metrics of free-text answers: pycocoevalcap's corpus-level BLEU-1..4 and CIDEr-D (and
METEOR, ROUGE-L on request), metrics/text.py; Java is needed for the tokenizer."""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rvt_bench.core.records import ScoreRecord, UnitValues
from rvt_bench.core.types import DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.estimators import CorpusEstimator, Estimator, Found, Stratum
from rvt_bench.metrics.units.base import Unit

_BLEU_ORDERS = {"BLEU-1": 0, "BLEU-2": 1, "BLEU-3": 2, "BLEU-4": 3}
CAPTION_KEYS = (*_BLEU_ORDERS, "METEOR", "ROUGE-L", "CIDEr")  # the metric keys of the caption families


@dataclass
class TextValues(UnitValues):
    """One free-text answer and its references (Captions, JudgeScore): hypothesis = the model's
    text ("" when absent or declared for another task), references = the sample's answers,
    question = the sample's query. A judge's verdict is the record's own (ScoreRecord.judge)."""

    kind = "text"
    hypothesis: str
    references: list[str]
    question: str = field(default="")


def text_fields(sample: Sample, pred: Prediction, reads: bool) -> TextValues:
    """The TextValues of a free-text sample; DatasetFormatError when the sample has no answers."""
    if not sample.target.answers:
        raise DatasetFormatError(f"sample {sample.id!r}: task {sample.task!r} needs target.answers")
    return TextValues((pred.text or "") if reads else "", list(sample.target.answers), sample.query)


class Captions(Unit):
    """Per sample: TextValues. aggregate: the corpus scores of `metrics` (rvt_bench.metrics.text.METRICS
    families: "BLEU" -> BLEU-1..4, "CIDEr", ...) over the records, so CIDEr's IDF is the records' own
    corpus (a breakdown group is its own corpus).

    estimator: BLEU-n and CIDEr a CorpusEstimator (the corpus metric recomputed on every resample
    from per-sample sufficient statistics, metrics/text_resample.py; CIDEr's IDF too, as
    pycocoevalcap computes it per evaluated corpus), ROUGE-L the mean of its per-sample scores,
    METEOR (the jar's own corpus aggregate) none. The texts are tokenised once (PTBTokenizer, Java)
    when the estimator is built.

    Tokenisation (one Java PTBTokenizer run) is cached per record: the groups of a breakdown reuse
    the whole's tokens, as each caption is tokenised on its own.
    """

    name = "captions"
    values_type = TextValues

    def __init__(self, metrics: Sequence[str] = ("BLEU", "CIDEr")) -> None:
        self.metrics = tuple(metrics)
        self._tokens: dict[tuple, tuple] = {}

    def score(self, sample: Sample, pred: Prediction) -> TextValues:
        # an answer declared for another task scores as empty, as for masks and boxes
        return text_fields(sample, pred, pred.task in (None, sample.task))

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        from rvt_bench.metrics.text import score_tokenized

        self._tokenize(records)
        res = {r.sample_id: self._tokens[self._key(r)][0] for r in records}
        gts = {r.sample_id: self._tokens[self._key(r)][1] for r in records}
        # a small corpus's CIDEr is reported once, for the whole run, by warnings()
        return score_tokenized(res, gts, metrics=self.metrics, warn=False)["corpus"]

    def warnings(self, records: list[ScoreRecord]) -> list[str]:
        from rvt_bench.metrics.text import small_cider_warning

        said = small_cider_warning(len(records)) if "CIDEr" in self.metrics else None
        return [said] if said else []

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found | None:
        if key not in CAPTION_KEYS:
            return None
        if key == "METEOR":
            return f"corpus-level text metric {key!r} (pycocoevalcap): no resampling statistics for it"
        return corpus_estimator(key, [(r.sample_id, self.of(r).hypothesis, self.of(r).references) for r in records],
                                {r.sample_id: r.source for r in records if r.source is not None})

    def _key(self, record: ScoreRecord) -> tuple:
        values = self.of(record)
        return record.sample_id, values.hypothesis, tuple(values.references)

    def _tokenize(self, records: list[ScoreRecord]) -> None:
        import rvt_bench.metrics.text as text  # pycocoevalcap and Java only when text is scored

        todo = [r for r in records if self._key(r) not in self._tokens]
        if not todo:
            return
        res, gts = text.tokenize_captions([(r.sample_id, self.of(r).hypothesis) for r in todo],
                                          {r.sample_id: self.of(r).references for r in todo})
        for r in todo:
            self._tokens[self._key(r)] = (res[r.sample_id], gts[r.sample_id])

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_tokens"] = {}  # a cache: never shipped to scoring workers
        return state


@functools.lru_cache(maxsize=8)
def _tokenized(items: tuple[tuple[str, str, tuple[str, ...]], ...]) -> tuple[dict, dict]:
    # one PTBTokenizer (Java) pass per corpus, shared by its BLEU-n and CIDEr estimators
    from rvt_bench.metrics.text import tokenize_captions

    return tokenize_captions([(sid, hyp) for sid, hyp, _ in items], {sid: list(refs) for sid, _, refs in items})


def corpus_estimator(key: str, texts: list[tuple[str, str, list[str]]], sources: dict[str, str] | None = None) -> Found:
    """The estimator of caption metric `key` ("BLEU-1".."BLEU-4", "CIDEr": a CorpusEstimator;
    "ROUGE-L": the mean of pycocoevalcap's per-sample scores) over (sample_id, hypothesis,
    references) triples, or why there is none (the texts could not be tokenised: Java missing).
    sources: {sample_id: video or image} (ScoreRecord.source), resampled together by the bootstrap."""
    from rvt_bench.metrics.text import JavaMissingError
    from rvt_bench.metrics.text_resample import BleuStatistics, CiderStatistics

    texts = sorted(texts, key=lambda t: t[0])
    items = tuple((sid, hyp, tuple(refs)) for sid, hyp, refs in texts)
    try:
        res, gts = _tokenized(items)
    except (JavaMissingError, ImportError, ValueError) as exc:
        return f"corpus-level text metric: its texts could not be tokenised for the bootstrap ({exc})"
    ids = [sid for sid, _, _ in texts]
    if key == "ROUGE-L":  # pycocoevalcap: the mean of per-sample scores, which need no corpus
        from pycocoevalcap.rouge.rouge import Rouge

        _, scores = Rouge().compute_score({i: gts[i] for i in ids}, {i: res[i] for i in ids})
        return Estimator(key, [Stratum(ids, np.asarray(scores, dtype=np.float64), np.ones(len(ids)),
                                       [sources.get(i, "\0" + i) for i in ids] if sources else None)])
    order = _BLEU_ORDERS.get(key)
    stats = (CiderStatistics if order is None else BleuStatistics)(res, gts, ids)
    return CorpusEstimator(key, ids, stats, order, [gts[i] for i in ids],
                           [sources.get(i, "\0" + i) for i in ids] if sources else None)
