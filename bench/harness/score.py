"""Score assembly: every prediction scored by the protocol into scores.jsonl (ScoreRecord), the
run's counts and failures beside the protocol's aggregate (RunMetrics), and the rule that a resume
never makes results worse (worse_than_before).

The data-error rule (docs/failures.md): a sample whose prediction failed with kind "data" (a frame
that does not decode, frames of disagreeing sizes), or whose ground truth the protocol finds
unusable, is treated like a sample the loader could not build: not scored, not in `n` nor
`failures`, listed in `data_error_samples` and counted in `data_errors`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rvt_bench.adapters.base import Adapter, ScoredSample
from rvt_bench.core.records import Failure, RunMetrics, ScoreRecord, excluded_count
from rvt_bench.core.store import read_run_json, write_jsonl_atomic
from rvt_bench.core.types import DATA, PARSE, Prediction, RunStoreError, Sample
from rvt_bench.harness.predict import text_checked
from rvt_bench.harness.samples import unreadable_text


def score(samples: list[Sample], preds: dict[str, Prediction], protocol: Any, scores_path: Path,
          resolved: dict[str, Any], run_name: str, fp: str, adapter: Adapter,
          load_errors: list[Failure] | None = None) -> tuple[RunMetrics, list[ScoreRecord]]:
    """Score every sample, write scores.jsonl (one ScoreRecord per scored sample, dataset order) and
    return (the run's metrics without the versioned header, judge block or partial note; the
    records). Each record gets the sample's stage in the adapter's funnel (Adapter.sample_stage)
    and the metrics the adapter's report (Adapter.report), as the adapter returns them. `preds` is
    updated in place where a prediction turned out unscorable (it is replaced by its failure). No
    timestamps: a re-run of a finished run gives the same metrics."""
    # load-time errors are samples that never made it into `samples` (a repeated id names a kept one)
    data_errors = list(load_errors or [])
    preds.update({s.id: text_checked_pair(s, preds[s.id]) for s in samples})  # also predictions made before the check
    bad_data = {s.id for s in samples if preds[s.id].failure_kind == DATA}
    data_errors += [Failure.of(s.id, preds[s.id].error) for s in samples if s.id in bad_data]
    samples = [s for s in samples if s.id not in bad_data]
    # An unscorable prediction (e.g. the wrong number of frames) comes back as a failure, scored as empty.
    scored = protocol.score_many([(s, preds[s.id]) for s in samples], workers=int(resolved["run"]["score_workers"])) \
        if samples else []
    # a ground truth found unusable only now (rvt_bench.core.masks could not decode it) is a data error too
    late = {pred.sample_id for _, pred in scored if pred.failure_kind == DATA}
    data_errors += [Failure.of(pred.sample_id, pred.error) for _, pred in scored if pred.sample_id in late]
    scored = [(record, pred) for record, pred in scored if pred.sample_id not in late]
    samples = [s for s in samples if s.id not in late]
    records = [record for record, _ in scored]
    preds.update({pred.sample_id: pred for _, pred in scored})
    # The adapter's own account (no scoring time: metrics.json stays byte-identical on a re-run).
    by_id = {r.sample_id: r for r in records}
    items = [ScoredSample(s, preds[s.id], by_id[s.id]) for s in samples]
    for item in items:
        stopped = adapter.sample_stage(item)
        item.record.funnel = None if stopped is None else stopped.to_json()
    write_jsonl_atomic(scores_path, [r.to_json() for r in records])
    failures = [Failure.of(p.sample_id, p.error) for p in (preds[s.id] for s in samples) if p.error]
    n_parse = sum(1 for f in failures if f.kind == PARSE)
    # parse_rate: of the samples the model answered; a sample failed for its data, the adapter or the
    # sandbox never produced an output to parse. None (n/a) when the model answered none.
    answered = len(samples) - sum(1 for f in failures if f.kind != PARSE)
    aggregate = protocol.aggregate(records) if records else {"metrics": {}, "breakdown": {}}
    metrics = RunMetrics(
        dataset=resolved["dataset"]["name"], split=resolved["dataset"].get("split"), model=resolved["model"]["name"],
        run_name=run_name, fingerprint=fp, protocol=protocol.name, aggregate=aggregate,
        # n: what the headline averages; the samples the protocol's rule leaves out are listed apart
        n=len(samples) - excluded_count(aggregate), failures=len(failures), failures_by_kind=count_by([f.kind for f in failures]),
        parse_rate=1.0 - n_parse / answered if answered else None, failed_samples=failures,
        tasks=count_by([s.task for s in samples]), data_errors=len(data_errors), data_error_samples=data_errors,
        adapter_report=adapter.report(items),
    )
    return metrics, records


def text_checked_pair(sample: Sample, pred: Prediction) -> Prediction:
    """`pred` checked for text no codec accepts (rvt_bench.core.codec), which no metric may see: in
    the sample's query or a reference it is the sample's data error; in the answer, the model's
    parse failure (scored as the empty answer; rvt_bench.harness.predict.text_checked)."""
    why = unreadable_text(sample)
    if why is not None:
        return Prediction.failure(sample.id, DATA, f"sample {sample.id}: {why}", trace=pred.trace, timings=pred.timings)
    return text_checked(pred)


def count_by(values: list[str]) -> dict[str, int]:
    """{value: occurrences}, sorted by value."""
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def worse_than_before(path: Path, new: dict[str, Any]) -> str | None:
    """Why `new` (a metrics.json body) must not replace the metrics.json at `path`, or None. Worse =
    the same run scored with more unscored judge verdicts (a judge that is down or failing on this
    resume), or the judge no longer publishable where it was: the model did not change, its
    surroundings failed."""
    if not path.exists():
        return None
    try:
        old = read_run_json(path)
    except RunStoreError:
        return None  # an unreadable old file is nothing to keep
    if not isinstance(old, dict):
        return None
    old_judge, new_judge = old.get("judge") or {}, new.get("judge") or {}
    old_failed, new_failed = old_judge.get("n_failed"), new_judge.get("n_failed")
    if isinstance(old_failed, int) and isinstance(new_failed, int) and new_failed > old_failed:
        return (f"the judge failed on {new_failed} of {new_judge.get('n')} answers this time, against {old_failed} "
                f"before ({new_judge.get('reason') or 'judge errors'}); re-run once the judge ({new_judge.get('status')}) "
                f"works")
    if old_judge.get("publishable", True) and not new_judge.get("publishable", True):
        return f"{new_judge.get('reason')}, where the previous scoring was publishable"
    return None
