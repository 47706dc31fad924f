"""Caption metrics of free-text answers: pycocoevalcap's corpus-level BLEU-1..4 and CIDEr-D (and
METEOR, ROUGE-L on request), metrics/text.py; Java is needed for the tokenizer."""
from __future__ import annotations

from collections.abc import Sequence

from rvt_bench.core.types import DatasetFormatError, Prediction, Sample
from rvt_bench.metrics.units.base import Unit


def text_fields(sample: Sample, pred: Prediction, reads: bool) -> dict:
    """"question", "hypothesis" (pred.text; "" when absent or declared for another task) and
    "references" of a free-text sample; DatasetFormatError when the sample has no answers."""
    if not sample.target.answers:
        raise DatasetFormatError(f"sample {sample.id!r}: task {sample.task!r} needs target.answers")
    return {"question": sample.query, "hypothesis": (pred.text or "") if reads else "",
            "references": list(sample.target.answers)}


class Captions(Unit):
    """Per sample: "question", "hypothesis", "references" (text_fields). aggregate: the corpus
    scores of `metrics` (rvt_bench.metrics.text.METRICS families: "BLEU" -> BLEU-1..4, "CIDEr", ...) over the
    records, so CIDEr's IDF is the records' own corpus (a breakdown group is its own corpus).

    Tokenisation (one Java PTBTokenizer run) is cached per record: the groups of a breakdown reuse
    the whole's tokens, as each caption is tokenised on its own.
    """

    name = "captions"

    def __init__(self, metrics: Sequence[str] = ("BLEU", "CIDEr")) -> None:
        self.metrics = tuple(metrics)
        self._tokens: dict[tuple, tuple] = {}

    def score(self, sample: Sample, pred: Prediction) -> dict:
        # an answer declared for another task scores as empty, as for masks and boxes
        return text_fields(sample, pred, pred.task in (None, sample.task))

    def aggregate(self, records: list[dict]) -> dict:
        from rvt_bench.metrics.text import score_tokenized

        self._tokenize(records)
        res = {r["sample_id"]: self._tokens[_key(r)][0] for r in records}
        gts = {r["sample_id"]: self._tokens[_key(r)][1] for r in records}
        return score_tokenized(res, gts, metrics=self.metrics)["corpus"]

    def _tokenize(self, records: list[dict]) -> None:
        import rvt_bench.metrics.text as text  # pycocoevalcap and Java only when text is scored

        todo = [r for r in records if _key(r) not in self._tokens]
        if not todo:
            return
        res, gts = text.tokenize_captions([(r["sample_id"], r["hypothesis"]) for r in todo],
                                          {r["sample_id"]: r["references"] for r in todo})
        for r in todo:
            self._tokens[_key(r)] = (res[r["sample_id"]], gts[r["sample_id"]])

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_tokens"] = {}  # a cache: never shipped to scoring workers
        return state


def _key(record: dict) -> tuple:
    return record["sample_id"], record["hypothesis"], tuple(record["references"])
