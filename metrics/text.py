"""Caption metrics for vqa / summarization answers: BLEU-1..4, METEOR, ROUGE-L, CIDEr (CIDEr-D).

A thin wrapper over pycocoevalcap (the COCO caption evaluation code, pip package `pycocoevalcap`
1.2; reference: `pycocoevalcap/eval.py::COCOEvalCap.evaluate`): every text, hypotheses and
references alike, is lower-cased and tokenised by its PTBTokenizer (Stanford CoreNLP 3.4.1, a Java
program) with punctuation removed, then each scorer runs once over the whole corpus. So:
- scores are corpus-level: BLEU pools n-gram counts over the corpus (it is not the mean of the
  per-sample BLEUs); METEOR is the jar's aggregate over the corpus; ROUGE-L and CIDEr are means
  of their per-sample scores;
- CIDEr's IDF is computed from the evaluated corpus's references, so it depends on the corpus:
  with N = 1 sample every n-gram has document frequency N and IDF log(N / df) = 0, so CIDEr is
  0 by construction; with few samples it is unstable. We warn (logging) below CIDER_MIN_SAMPLES.
- BLEU, METEOR and ROUGE-L lie in [0, 1]; CIDEr keeps its native scale (CIDEr-D is scaled by 10
  and clipped per n-gram, so it typically lies in [0, ~5]); nothing is multiplied by 100.
Java is needed by the tokenizer and by METEOR (meteor-1.5.jar): `check_java()` runs first and
raises JavaMissingError naming what to install. PTBTokenizer writes a temporary file next to its
jar, so the installed package directory must be writable.
"""
from __future__ import annotations

import contextlib
import functools
import io
import logging
import shutil
import subprocess
from typing import Hashable, Iterable, Mapping, Sequence

from rvt_bench.core.codec import unencodable_reason
from rvt_bench.core.types import RvtBenchError

log = logging.getLogger(__name__)

METRICS: tuple[str, ...] = ("BLEU", "METEOR", "ROUGE-L", "CIDEr")
"""Metric families; "BLEU" yields BLEU-1..BLEU-4."""

CIDER_MIN_SAMPLES = 50
"""Below this many samples CIDEr's corpus IDF is coarse; we log a warning (N = 1 gives 0)."""


def small_cider_warning(n: int) -> str | None:
    """Why CIDEr over `n` samples should not be read as a score (None from CIDER_MIN_SAMPLES on)."""
    if n >= CIDER_MIN_SAMPLES:
        return None
    return (f"CIDEr over {n} sample(s) is unreliable: its IDF comes from the scored samples themselves "
            f"(stable from about {CIDER_MIN_SAMPLES}; with 1 sample it is always 0)")


@functools.lru_cache(maxsize=None)
def _warn_small_cider(n: int) -> None:
    """Once per corpus size and process (breakdowns score many small groups)."""
    log.warning("%s", small_cider_warning(n))


@contextlib.contextmanager
def _java_stderr_to_log():
    """PTBTokenizer's Java process inherits our stderr and prints a line per call ("PTBTokenizer
    tokenized N tokens at ..."); send file descriptor 2 to a temporary file meanwhile and log what
    it wrote at debug level (warning level when the block fails)."""
    import os
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace").strip()
            if text:
                (log.warning if failed else log.debug)("PTBTokenizer (Java) stderr: %s", text)


class JavaMissingError(RvtBenchError, RuntimeError):
    """No working `java` on PATH; pycocoevalcap's PTBTokenizer and METEOR cannot run."""

    kind = "metric"


@functools.lru_cache(maxsize=1)
def check_java() -> str:
    """Return the first line of `java -version`; raise JavaMissingError when Java cannot run."""
    hint = (
        "caption metrics (pycocoevalcap PTBTokenizer, METEOR) need a Java runtime on PATH: "
        "install one, e.g. `apt-get install default-jre-headless` or `conda install openjdk`"
    )
    java = shutil.which("java")
    if java is None:
        raise JavaMissingError(f"`java` not found on PATH; {hint}")
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaMissingError(f"`{java} -version` failed ({exc}); {hint}") from exc
    if proc.returncode != 0:
        raise JavaMissingError(f"`{java} -version` exited {proc.returncode}: {proc.stderr.strip()[:200]}; {hint}")
    # java prints its version on stderr
    return (proc.stderr or proc.stdout).strip().splitlines()[0]


def _check_inputs(
    predictions: Iterable[tuple[Hashable, str]], references: Mapping[Hashable, Sequence[str]]
) -> dict[Hashable, str]:
    hyps: dict[Hashable, str] = {}
    for pair in predictions:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"caption_scores: predictions must be (id, text) pairs, got {str(pair)[:120]!r}")
        sid, text = pair
        if sid in hyps:
            raise ValueError(f"caption_scores: sample {sid!r} has more than one hypothesis; expected exactly one")
        if not isinstance(text, str):
            raise ValueError(f"caption_scores: sample {sid!r} hypothesis is {type(text).__name__}, expected str")
        hyps[sid] = text
    missing = [k for k in references if k not in hyps]
    extra = [k for k in hyps if k not in references]
    if missing or extra:
        raise ValueError(
            f"caption_scores: prediction and reference ids differ; without a hypothesis: {missing[:10]}, "
            f"without references: {extra[:10]} (score a failed sample as the empty string)"
        )
    for sid in hyps:
        refs = references[sid]
        if isinstance(refs, str) or not refs or not all(isinstance(r, str) for r in refs):
            raise ValueError(f"caption_scores: sample {sid!r} needs a non-empty list of reference strings, got {str(refs)[:120]!r}")
    for sid, text in hyps.items():  # Java's tokenizer would die of it (UnicodeEncodeError), whole corpus and all
        why = unencodable_reason("hypothesis", text) or next(
            (r for r in (unencodable_reason(f"reference {i}", ref) for i, ref in enumerate(references[sid])) if r), None)
        if why is not None:
            raise ValueError(f"caption_scores: sample {sid!r}: {why}; the harness fails such a sample before "
                             f"scoring (rvt_bench.core.codec)")
    if not hyps:
        raise ValueError("caption_scores: no samples to score")
    return hyps


def _one_line(text: str) -> str:
    """Join a text's lines with spaces. PTBTokenizer feeds Java one line per text and replaces only
    "\\n"; a "\\r", "\\u2028" or other line break inside a text would split it into two lines and
    shift every later text onto the wrong sample id. Tokens are unchanged (spaces separate them)."""
    return " ".join(text.splitlines())


def caption_scores(
    predictions: Iterable[tuple[Hashable, str]],
    references: Mapping[Hashable, Sequence[str]],
    metrics: Sequence[str] = METRICS,
) -> dict:
    """Corpus-level caption metrics with pycocoevalcap, and its per-sample scores.

    predictions: (sample id, hypothesis text) pairs, exactly one per sample id (a list of pairs
                 rather than a dict so that a duplicate id is detected, not silently overwritten).
    references:  sample id -> list of one or more reference texts; the same ids as predictions.
    metrics:     a subset of METRICS ("BLEU", "METEOR", "ROUGE-L", "CIDEr").
    Returns {"corpus": {name: float}, "per_sample": {id: {name: float}}, "n": int}, names among
    "BLEU-1".."BLEU-4", "METEOR", "ROUGE-L", "CIDEr"; corpus values as module docstring (BLEU
    pooled, CIDEr on its native scale). Samples are passed to pycocoevalcap in prediction order;
    line breaks inside a text become spaces (see `_one_line`).
    Raises ValueError on a duplicate / missing id or a sample without references, and
    JavaMissingError when Java is unavailable.
    """
    return score_tokenized(*tokenize_captions(predictions, references), metrics=metrics)


def tokenize_captions(predictions: Iterable[tuple[Hashable, str]],
                      references: Mapping[Hashable, Sequence[str]]) -> tuple[dict, dict]:
    """(res, gts): hypotheses and references through pycocoevalcap's PTBTokenizer, as
    caption_scores feeds its scorers ({id: [tokenised text, ...]}). The tokenizer treats each text
    on its own, so a subset of these dicts scores exactly as tokenising that subset would: groups
    of one corpus (breakdowns) tokenise once. Raises as caption_scores."""
    hyps = _check_inputs(predictions, references)
    check_java()
    # imported here so that importing rvt_bench.metrics.text does not need pycocoevalcap
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokenizer = PTBTokenizer()
    with _java_stderr_to_log():
        res = tokenizer.tokenize({sid: [{"caption": _one_line(text)}] for sid, text in hyps.items()})
        gts = tokenizer.tokenize({sid: [{"caption": _one_line(r)} for r in references[sid]] for sid in hyps})
    return res, gts


def score_tokenized(res: Mapping[Hashable, list], gts: Mapping[Hashable, list], metrics: Sequence[str] = METRICS,
                    warn: bool = True) -> dict:
    """caption_scores' result from tokenize_captions' output (or a subset of its ids, in the
    order of `gts`). Raises ValueError on unknown metrics or mismatched ids."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"caption_scores: unknown metrics {unknown}, expected a subset of {METRICS}")
    if set(res) != set(gts) or not gts:
        raise ValueError("score_tokenized: hypotheses and references must cover the same, non-empty set of ids")
    res, gts = dict(res), dict(gts)
    ids = list(gts.keys())
    corpus: dict[str, float] = {}
    per_sample: dict[Hashable, dict[str, float]] = {sid: {} for sid in ids}

    def record(name: str, score: float, scores: Sequence[float]) -> None:
        corpus[name] = float(score)
        for sid, value in zip(ids, scores, strict=True):
            per_sample[sid][name] = float(value)

    for name in metrics:
        if name == "BLEU":
            from pycocoevalcap.bleu.bleu import Bleu

            with contextlib.redirect_stdout(io.StringIO()) as printed:  # Bleu prints its n-gram counts
                score, scores = Bleu(4).compute_score(gts, res)
            log.debug("pycocoevalcap Bleu: %s", printed.getvalue().strip())
            for n in range(4):
                record(f"BLEU-{n + 1}", score[n], scores[n])
        elif name == "METEOR":
            from pycocoevalcap.meteor.meteor import Meteor

            record("METEOR", *Meteor().compute_score(gts, res))
        elif name == "ROUGE-L":
            from pycocoevalcap.rouge.rouge import Rouge

            record("ROUGE-L", *Rouge().compute_score(gts, res))
        elif name == "CIDEr":
            from pycocoevalcap.cider.cider import Cider

            if warn and len(ids) < CIDER_MIN_SAMPLES:
                _warn_small_cider(len(ids))
            record("CIDEr", *Cider().compute_score(gts, res))
    return {"corpus": corpus, "per_sample": per_sample, "n": len(ids)}
