"""The protocol interface: how one benchmark scores a sample, aggregates the scores and declares
each metric's bootstrap estimator.

A protocol is built by Hydra from the dataset config (`protocol: {_target_: ...}`), so constructors
take only simple keyword options. The runner calls `score(sample, pred)` once per sample (one
ScoreRecord of scores.jsonl), `aggregate(records)` once (the body of metrics.json) and
`estimator(key, records)` per headline metric (its interval). Besides "metrics", "breakdown" and
"n", an aggregate may hold "baseline_empty" (the same metric keys scored for an empty prediction on
every sample) and "warnings" (one-line strings: samples whose GT is empty in every frame, a headline
equal to its baseline...); the run summary prints both.
"""
from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from rvt_bench.core.records import ScoreRecord
from rvt_bench.core.types import Prediction, RvtBenchError, Sample
from rvt_bench.metrics.estimators import Found


class Protocol:
    """Per-benchmark scoring. Subclasses set `name`, `headline` and implement score / aggregate.

    name:     short id, e.g. "revos", "reasonseg".
    headline: metric keys of `aggregate(...)["metrics"]` for the leaderboard row, best first.
    """

    name: str = ""
    headline: list[str] = []
    judge: Any = None  # a rvt_bench.metrics.judge.Judge for free-text answers, set by attach_judge; None = none
    # {breakdown group: {value: the benchmark's name of it}} ("type": {"0": "referring"}), what
    # report.html shows instead of the raw code; {}: the codes are the names
    group_names: dict[str, dict[str, str]] = {}
    # How a "no target" answer (Prediction.no_target) is scored: "empty" = as an empty prediction
    # (no masks, boxes or text), which is what the references of benchmarks without no-target
    # samples can score, so such an answer never moves their numbers; a benchmark with no-target
    # samples sets "own" and reads Prediction.no_target in its score().
    no_target: str = "empty"

    def variant_label(self) -> str:
        """The protocol variant this run's headline follows, as one short label ("failed=zero"), or ""
        for the reference's own protocol. metrics.json writes it as `variant`, a leaderboard row as
        its `variant` column, and `render` marks every row that has one: its headline is not the
        number the reference prints. Default: "" (a protocol without variants)."""
        return ""

    def counting_failures(self) -> "Protocol":
        """This protocol with every failed sample counted (scored as the protocol scores a failure,
        never dropped): the honest variant of a protocol whose reference drops some (MeViS
        failed="zero", ReasonVOS failed="empty"); `compare --union` scores both runs with it.
        Default: itself (a protocol that drops nothing)."""
        return self

    def attach_judge(self, judge: Any) -> None:
        """Use `judge` (a rvt_bench.metrics.judge.Judge, or None = no judge) for free-text answers.
        Protocols without free-text tasks keep it and never call it."""
        self.judge = judge

    def judge_records(self, records: list[ScoreRecord]) -> None:
        """Add LLM-judge verdicts to the records of free-text samples, in place; called by
        `score_many` after per-sample scoring (requests are batched and concurrent there, and the
        judge never travels to scoring worker processes). Default: nothing to judge."""

    def __getstate__(self) -> dict:
        # The judge holds an HTTP client (not picklable) and is only used in the parent process.
        state = dict(self.__dict__)
        state.pop("judge", None)
        return state

    def score(self, sample: Sample, pred: Prediction) -> ScoreRecord:
        """The ScoreRecord of `pred` on `sample`: its header (`record_header`: the sample's id,
        modality, task, "failed", "error_kind", the meta keys the protocol groups by) and the typed
        values (rvt_bench.core.records.UnitValues) of the metrics and raw counts aggregation needs.
        A failed prediction is scored as an empty one. Raises AdapterError when pred.masks has a
        different number of frames than the sample, or a mask of a different size than the GT.
        """
        raise NotImplementedError

    def estimator(self, key: str, records: list[ScoreRecord]) -> Found:
        """The bootstrap estimator of metric `key` over `records` (rvt_bench.metrics.estimators:
        an Estimator or CorpusEstimator whose value() is the reported number), or a string saying
        why it has none. Default: none."""
        return f"no per-sample estimator for {key!r}"

    def score_or_fail(self, sample: Sample, pred: Prediction) -> tuple[ScoreRecord, Prediction]:
        """(record, prediction) for one sample; a prediction that cannot be scored (an RvtBenchError
        from `score`, e.g. the wrong number of frames) is replaced by a failure naming the reason and
        scored as empty, as the runner does (docs/architecture.md "Failures"): the returned prediction is then that failure."""
        try:
            return self.score(sample, self.scored_prediction(pred)), pred
        except RvtBenchError as exc:
            failed = Prediction.failure(sample.id, exc.kind, f"unscorable prediction: {exc}")
            return self.score(sample, failed), failed

    def scored_prediction(self, pred: Prediction) -> Prediction:
        """What `score` sees of `pred`: a "no target" answer as an empty prediction under the
        default `no_target = "empty"`, else `pred` itself. Raises AdapterError for a no-target answer
        that holds masks or boxes, or a score that is not a finite number (Prediction.check_no_target)."""
        pred.check_no_target()
        if pred.no_target and self.no_target == "empty":
            return replace(pred, masks=None, boxes=None, text=None)
        return pred

    def score_many(self, pairs: Sequence[tuple[Sample, Prediction]], workers: int = 1,
                   chunksize: int = 4, progress: bool = True) -> list[tuple[ScoreRecord, Prediction]]:
        """`score_or_fail` over (sample, prediction) pairs, results in the input order.

        workers: 1 scores in this process; n > 1 uses a pool of n processes (``multiprocessing``,
        the protocol and each pair pickled to the workers, ``chunksize`` pairs per task), which pays
        off when per-sample scoring is heavy (videos: J/F on every frame) and costs a pool start
        (~0.1-1 s) otherwise. Scoring is pure, so the records are identical either way.
        progress: a tqdm bar over the samples.
        Then `judge_records` adds judge verdicts (when a judge is attached) to the records.
        """
        from tqdm import tqdm

        bar = dict(total=len(pairs), desc="scoring", unit="sample", dynamic_ncols=True, leave=False, disable=not progress)
        if workers <= 1 or len(pairs) <= 1:
            scored = [self.score_or_fail(sample, pred) for sample, pred in tqdm(pairs, **bar)]
        else:
            import multiprocessing

            context = multiprocessing.get_context("spawn" if _threads_started() else None)
            # the workers start with the stop signals blocked (a Ctrl-C during their start-up would print a
            # traceback each) and then ignore Ctrl-C: the main process handles it and stops the pool
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                pool = context.Pool(workers, initializer=_quiet_worker)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            with pool:
                results = pool.imap(self._score_pair, pairs, chunksize=max(1, int(chunksize)))
                scored = list(tqdm(results, **bar))
        self.judge_records([record for record, _ in scored])
        return scored

    def _score_pair(self, pair: tuple[Sample, Prediction]) -> tuple[ScoreRecord, Prediction]:
        return self.score_or_fail(*pair)

    def aggregate(self, records: list[ScoreRecord]) -> dict:
        """metrics.json body: {"metrics": {key: float}, "breakdown": {meta key: {value: {...}}}, "n": int}.

        Deterministic given the records: they are sorted by sample_id before any order-dependent
        arithmetic.
        """
        raise NotImplementedError


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _quiet_worker() -> None:
    """A scoring worker: Ctrl-C is the main process's (it stops the pool), SIGTERM and SIGHUP end
    the worker without a traceback; then the signals blocked while it started are let through."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _threads_started() -> bool:
    """Fork after threads (e.g. a tqdm monitor, a Java tokenizer's pipes) can deadlock a child; use
    spawn then."""
    import threading

    return threading.active_count() > 1


def excluded_block(reasons: dict[str, str]) -> dict[str, Any]:
    """The aggregate keys of the samples a protocol's rule leaves out of the headline (dropped as its
    reference drops them, no public GT...), from {sample_id: reason}: "excluded" ({reason: count},
    a leaderboard row's `excluded`) and "excluded_samples" ([{"sample_id", "reason"}], sorted by id;
    the report lists them, never as a score); {} when there are none."""
    if not reasons:
        return {}
    counts: dict[str, int] = {}
    for why in reasons.values():
        counts[why] = counts.get(why, 0) + 1
    return {"excluded": counts,
            "excluded_samples": [{"sample_id": k, "reason": reasons[k]} for k in sorted(reasons)]}


def submission_block(benchmark: str, server: str | None = None) -> dict[str, Any]:
    """metrics.json "submission" of samples without public GT, which the benchmark's server scores:
    {"benchmark", "command": the zip's command (RUN_DIR, DATA_ROOT to fill in), "server" when known}."""
    out = {"benchmark": benchmark,
           "command": f"python -m rvt_bench.harness.submission {benchmark} DATA_ROOT RUN_DIR submission.zip"}
    return out | ({"server": server} if server else {})


EMPTY_GT_WARN = 0.03  # warn when more than this fraction of the scored samples has an all-empty GT


def empty_gt_warnings(empty_ids: list[str], n_scored: int, what: str = "samples") -> list[str]:
    """Warnings for samples whose GT is empty in every frame (an empty prediction scores 1 there):
    one naming them, and one more when they are over EMPTY_GT_WARN of the scored samples."""
    if not empty_ids:
        return []
    out = [f"{len(empty_ids)} of {n_scored} scored {what} have an empty GT in every frame (an empty prediction "
           f"scores 1 on them): {', '.join(empty_ids[:5])}" + (" ..." if len(empty_ids) > 5 else "")]
    if len(empty_ids) > EMPTY_GT_WARN * n_scored:
        out.append(f"{100 * len(empty_ids) / n_scored:.1f}% of the scored {what} have an all-empty GT (more than "
                   f"{100 * EMPTY_GT_WARN:.0f}%): check the annotations")
    return out


def baseline_warnings(metrics: dict, baseline: dict, keys: Iterable[str]) -> list[str]:
    """A warning per headline key whose value equals the empty-prediction baseline's."""
    return [f"{k} = {metrics[k]:.6f} equals the empty-prediction baseline: the predictions score no better than "
            "predicting nothing" for k in keys if k in metrics and k in baseline and metrics[k] == baseline[k]]


# sample.meta keys that name the video or image a sample was asked about, first found wins:
# source_id (any loader may set it), video (ReVOS, canonical releases), image (LLM-Seg40K), name (ReasonSeg)
SOURCE_KEYS = ("source_id", "video", "image", "name")


def sample_source(sample: Sample) -> str | None:
    """The video or image `sample` was asked about: the first of SOURCE_KEYS in sample.meta, else the
    first frame's folder name (video) or file name (image), None when the sample has no frames.
    Samples of one source are not independent (several expressions of one video), so the bootstrap
    resamples sources (docs/metrics.md "Confidence intervals")."""
    for key in SOURCE_KEYS:
        value = sample.meta.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    if not sample.frames:
        return None
    first = Path(sample.frames[0])
    return first.parent.name if sample.modality == "video" else first.name


def record_header(sample: Sample, pred: Prediction, meta_keys: Iterable[str]) -> ScoreRecord:
    """A ScoreRecord with the fields every record starts with (see Protocol.score), no values yet."""
    return ScoreRecord(sample.id, sample.modality, sample.task, pred.error is not None,
                       pred.error.get("kind") if pred.error else None,
                       {k: sample.meta[k] for k in meta_keys if k in sample.meta}, source=sample_source(sample))


def group_key(value: Any) -> str:
    """Breakdown keys are strings (JSON object keys): 1 -> "1", True -> "true"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def group_by(records: list[ScoreRecord], key: str) -> dict[str, list[ScoreRecord]]:
    """Records grouped by `record.meta[key]` (records without it are left out), keys sorted."""
    groups: dict[str, list[ScoreRecord]] = {}
    for r in records:
        if key in r.meta:
            groups.setdefault(group_key(r.meta[key]), []).append(r)
    return dict(sorted(groups.items()))
