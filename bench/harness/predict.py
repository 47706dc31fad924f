"""The predict loop: hand the samples to do to the adapter (one by one or in batches), turn every
per-sample failure into a recorded Prediction.failure, and append each prediction to the run's
predictions file (fsynced one by one, so a killed run loses at most the samples in flight).

Per-sample failures: an AdapterError (or other RvtBenchError) records its `kind` and the partial
output it carries (AdapterError.trace, and the seconds it measured, AdapterError.timings); any other exception is an adapter bug, kind "exception",
its traceback as the trace; a frame that does not decode or disagrees in size is a data error
(FrameChecker), caught before the model sees the sample. run.fail_fast re-raises instead.
"""
from __future__ import annotations

import logging
import re
import time
import traceback
from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from rvt_bench.adapters.base import Adapter
from rvt_bench.core.codec import unencodable_reason
from rvt_bench.core.printable import bounded
from rvt_bench.core.store import PredictionLog
from rvt_bench.core.types import DATA, EXCEPTION, PARSE, SANDBOX, AdapterError, Prediction, RunStopped, RvtBenchError, Sample
from rvt_bench.harness.stops import Progress

log = logging.getLogger(__name__)


def predict(cfg: DictConfig, adapter: Adapter, todo: list[Sample], path: Path, checker: "FrameChecker | None",
            progress: Progress | None = None, retried: frozenset[str] = frozenset()) -> int:
    """Predict `todo` in order and append each Prediction to `path`; returns len(todo). Batches of
    run.batch_size (null: the adapter's preferred_batch_size); `progress` follows the samples in
    flight for the line a stop prints. retried: the ids of `todo` predicted again after an earlier
    failure (run.retry_failed), which SameFailures does not count: their failing alike again says
    nothing of the setup (a precomputed folder that lacks them, as the reference allows)."""
    progress = progress or Progress()
    out = PredictionLog(path)
    failures = 0
    alike = SameFailures(int(cfg.run.get("stop_after_same_failures", 0) or 0))
    batch_size = max(1, int(cfg.run.batch_size or adapter.preferred_batch_size))
    bar = tqdm(total=len(todo), desc=f"{cfg.dataset.name}/{cfg.model.name}", unit="sample", dynamic_ncols=True)
    try:
        # the first batch holds at most K samples, so a run that cannot succeed stops after K (SameFailures)
        first = min(batch_size, alike.k) if alike.k > 0 else batch_size
        for start, stop in _batches(len(todo), first, batch_size):
            batch = todo[start:stop]
            bad = {s.id: p for s in batch if checker and (p := checker.check(s)) is not None}
            batch = [s for s in batch if s.id not in bad]
            preds = list(bad.values())
            progress.in_flight = [s.id for s in batch]
            if batch:
                preds += ([predict_one(adapter, batch[0], bool(cfg.run.fail_fast))] if len(batch) == 1
                          else predict_batch(adapter, batch, bool(cfg.run.fail_fast)))
            for pred in preds:
                failures += pred.error is not None
                out.append(pred)
                progress.predicted += 1
            progress.in_flight = []
            alike.check([p for p in preds if p.failure_kind != DATA and p.sample_id not in retried])
            bar.update(len(preds))
            bar.set_postfix(failed=failures)
    finally:
        bar.close()
        out.close()
    return len(todo)


def _batches(n: int, first: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) of each batch over n samples: the first `first` long, then `size` each."""
    bounds = [0, min(first, n)]
    while bounds[-1] < n:
        bounds.append(min(n, bounds[-1] + size))
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


class SameFailures:
    """Stops a run that cannot succeed: when the first `k` samples this invocation predicts (data
    errors and samples predicted again after an earlier failure aside: `predict`'s `retried`) all
    fail with the same reason of the setup, RunStopped("cannot_succeed") names the setting to fix.
    A setup reason is a prediction that is not there (precomputed: trace
    {"found": False}, model.root), an HTTP error of the server, or an adapter that cannot run
    (kinds adapter, exception); the model's own output (parse, sandbox) never is. Two messages are
    alike once the sample's id, paths and numbers are taken out. k = 0: never stops."""

    def __init__(self, k: int) -> None:
        self.k, self.seen, self.done = k, [], k <= 0

    def check(self, preds: list[Prediction]) -> None:
        for pred in preds:
            if self.done:
                return
            sig = setup_failure(pred)
            if sig is None or (self.seen and sig != self.seen[0]):
                self.done = True
                return
            self.seen.append(sig)
            if len(self.seen) >= self.k:
                self.done = True
                kind, setting, _ = sig
                raise RunStopped(f"the first {self.k} samples all failed alike ({kind}): "
                                 f"{' '.join(str(pred.error['message']).split())[:300]}; fix {setting} "
                                 f"(run.stop_after_same_failures=0 runs on regardless); the same command resumes",
                                 "cannot_succeed")


def setup_failure(pred: Prediction) -> tuple[str, str, str] | None:
    """(kind, the setting to fix, the message without ids, paths and numbers) when `pred` failed for a
    reason of the setup; None for a success or the model's own failure (parse, sandbox)."""
    if pred.error is None or pred.failure_kind in (PARSE, SANDBOX, DATA):
        return None
    message = str(pred.error.get("message", ""))
    shape = re.sub(r"\d+", "N", re.sub(r"\S*/\S*", "<path>", message.replace(pred.sample_id, "<id>")))
    if isinstance(pred.trace, dict) and pred.trace.get("found") is False:
        setting = "model.root (no prediction of this benchmark was found there)"
    elif re.search(r"\bHTTP [45]\d\d\b", message):
        setting = "the server behind model.base_url / model.model (it answers every request with the same error)"
    else:
        setting = "the model's settings (model.*)"
    return str(pred.failure_kind), setting, shape


class FrameChecker:
    """Decodes every frame of a sample once per run before the model sees it, so a corrupt or
    truncated frame fails that sample (a data error) even when the model never reads pixels; and
    checks that the sample's frames share one size, that of its target masks (a frame of another
    size is the data's fault, not the model's)."""

    def __init__(self) -> None:
        self.sizes: dict[str, tuple[int, int]] = {}

    def check(self, sample: Sample) -> Prediction | None:
        """None when every frame decodes and the sizes agree, else the sample's data failure."""
        from rvt_bench.core.frames import frame_size, verify_frame

        from rvt_bench.core import files

        expected = next((tuple(int(v) for v in m["size"]) for m in (sample.target.masks or []) if m), None)
        bound, total = files.limits().max_sample_pixels, 0
        try:
            for t, path in enumerate(sample.frames):
                size = self.sizes.get(path) or frame_size(path)  # the header: nothing decoded yet
                total += size[0] * size[1]
                if total > bound:  # the frames named so far already exceed it: the rest are not decoded
                    raise RvtBenchError(f"its frames hold over {bound} pixels by frame {t} of {len(sample.frames)} "
                                        f"(dataset.limits.max_sample_pixels)")
                if path not in self.sizes:
                    verify_frame(path)
                    self.sizes[path] = size
                if expected is None:
                    expected = size
                elif size != expected:
                    raise RvtBenchError(f"frame {t} ({path}) is {list(size)} (H, W) where the sample's "
                                        f"{'target masks are' if sample.target.masks else 'first frame is'} "
                                        f"{list(expected)}: frame sizes must agree within a sample")
        except RvtBenchError as exc:
            log.info("sample %s: bad frame: %s", sample.id, exc)
            return Prediction.failure(sample.id, DATA, str(exc))
        return None


def _partial(exc: RvtBenchError) -> dict:
    """The partial output a failed sample's error carries: its trace (AdapterError.trace, None for
    other errors) and the seconds the adapter measured before the failure (AdapterError.timings)."""
    if not isinstance(exc, AdapterError):
        return {"trace": None}
    return {"trace": exc.trace, "timings": {k: v for k, v in (exc.timings or {}).items() if isinstance(v, (int, float))}}


def predict_batch(adapter: Adapter, batch: list[Sample], fail_fast: bool) -> list[Prediction]:
    """Predict a batch through adapter.predict_batch; an unexpected crash redoes it one by one so
    that only the sample at fault is failed. timings["total"] is the batch's wall time shared equally."""
    start = time.perf_counter()
    try:
        results = adapter.predict_batch(batch)
    except Exception:
        if fail_fast:
            raise
        log.exception("a batch of %d crashed the adapter; redoing it one sample at a time", len(batch))
        return [predict_one(adapter, s, fail_fast) for s in batch]
    share = round((time.perf_counter() - start) / len(batch), 4)
    preds = []
    for sample, result in zip(batch, results, strict=True):
        if isinstance(result, Prediction) and result.sample_id != sample.id:
            result = RvtBenchError(f"adapter answered sample {result.sample_id!r} when asked for {sample.id!r}")
        if isinstance(result, RvtBenchError):
            if fail_fast:
                raise result
            result = Prediction.failure(sample.id, result.kind, str(result), **_partial(result))
        result.timings["total"] = share
        preds.append(text_checked(result))
    return preds


def text_checked(pred: Prediction) -> Prediction:
    """`pred`, or, when its answer text holds text no codec accepts (a lone surrogate:
    rvt_bench.core.codec), the model's parse failure naming where: scored as the empty answer, as
    the reference scores a malformed one; its trace and timings are kept."""
    why = None if pred.error is not None else unencodable_reason("the answer", pred.text)
    if why is None:
        return pred
    return Prediction.failure(pred.sample_id, PARSE, why, task=pred.task, trace=pred.trace, timings=pred.timings)


def predict_one(adapter: Adapter, sample: Sample, fail_fast: bool) -> Prediction:
    """adapter.predict(sample), or the sample's recorded failure; timings["total"] in seconds."""
    start = time.perf_counter()
    try:
        pred = adapter.predict(sample)
        if pred.sample_id != sample.id:
            raise RvtBenchError(f"adapter answered sample {pred.sample_id!r} when asked for {sample.id!r}")
    except RvtBenchError as exc:
        if fail_fast:
            raise
        log.info("sample %s failed (%s): %s", sample.id, exc.kind, bounded(exc))  # escaped as a str argument
        pred = Prediction.failure(sample.id, exc.kind, str(exc), **_partial(exc))
    except Exception as exc:  # an adapter bug must not end a long run; it is recorded with its traceback
        if fail_fast:
            raise
        log.exception("sample %s crashed the adapter", sample.id)
        pred = Prediction.failure(sample.id, EXCEPTION, f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
    pred.timings["total"] = round(time.perf_counter() - start, 4)
    return text_checked(pred)
