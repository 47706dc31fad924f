"""The evaluation loop: resolve a run directory, predict what is not done yet, score, publish.

Each step lives in its own module; this one composes them (docs/architecture.md "A run"):
  rvt_bench.harness.rundir   run-directory identity, lock and claim, fingerprint refusal
  rvt_bench.harness.samples  the dataset's samples and load-time data errors
  rvt_bench.harness.resume   what a resume predicts (again)
  rvt_bench.harness.predict  the predict loop and per-sample failure capture
  rvt_bench.harness.score    scores.jsonl and the run's counts (RunMetrics); a resume never makes results worse
  rvt_bench.harness.judging  the judge and its failure-rate block
  rvt_bench.harness.publish  the leaderboard row, report.html
  rvt_bench.harness.stops    Ctrl-C, full disk, missing package... as one-line RunStopped

A sample that fails (adapter exception, unparsable model output) becomes a Prediction with `error`
set, is scored as an empty prediction and listed in metrics.json; the run goes on. A sample whose
data is bad is a data error: listed and counted apart, not in `n` (docs/failures.md).
Predictions are appended and fsynced one by one, so a killed run loses at most the samples in flight
and a restart skips every finished sample. One invocation at a time owns a run directory's
predictions file (rvt_bench.core.store.RunLock).
"""
from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rvt_bench.adapters.base import Adapter
from rvt_bench.core import benchmark, files, secrets
from rvt_bench.core.printable import escape_log_args
from rvt_bench.core.records import submission_of
from rvt_bench.core.store import finite, predictions_filename, read_run_json, write_json_atomic
from rvt_bench.core.types import ConfigError, RunStopped, RvtBenchError, Sample
from rvt_bench.harness import judging, loggers, logs, outputs, publish, resume, rundir, score, signals, stops
from rvt_bench.harness.config import adapter_node, check_ranges, check_run_name, with_schemas
from rvt_bench.harness.secrets import check_env_interpolations
from rvt_bench.loaders.config import read_limits
from rvt_bench.harness.predict import FrameChecker, predict
from rvt_bench.harness.results import finish_metrics, mark_not_comparable, write_sample_log
from rvt_bench.harness.samples import load_samples
from rvt_bench.harness.summary import format_summary  # noqa: F401  (run_bench and users import it from here)

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What one invocation of `run` did."""

    run_dir: Path
    metrics: dict[str, Any] | None  # the metrics.json body; None while shards are still missing
    predicted: int                  # samples predicted by this invocation (0 on a finished resume)
    leaderboard: Path | None
    not_published: str | None = None  # why no leaderboard row was written although publishing was on
    headline: str | None = None       # the protocol's first headline metric key
    kept: str | None = None           # why metrics.json was not replaced (the last good one kept)
    scoring_s: float | None = None    # wall seconds of this invocation's scoring (also in manifest.json)
    prediction: dict[str, Any] | None = None  # manifest.json "prediction": the latest prediction's wall time
    report: Path | None = None        # report.html, None when not built (partial run, run.report=false, a failure)
    logged: str | None = None         # where the experiment logger put the run (a directory or URL), None without one
    sandbox: str = ""                 # how model-written code ran: "bwrap", "none" (unsandboxed), "" (the model runs none)


def run(cfg: DictConfig) -> RunResult:
    """Evaluate cfg.model on cfg.dataset. cfg is the composed Hydra config (conf/config.yaml).

    Raises RunStopped (one line; reason "interrupted", "terminated", "hangup", "no_space",
    "read_only", "permission", "missing_package", "server_down" or "locked") when the surroundings
    stop the run (SIGTERM and SIGHUP included, rvt_bench.harness.signals), with the traceback
    written to <run_dir>/run.log when the run directory is known; ConfigError for a setting outside
    its range (rvt_bench.core.ranges), other RvtBenchError subclasses for a bad config or dataset
    (omegaconf's ValidationError for a run / leaderboard / judge node outside its schema). Every
    file is read within the dataset's limits (dataset.limits, rvt_bench.core.files)."""
    cfg = with_schemas(cfg)  # composed configs already are; one built by hand gets the same defaults
    check_ranges(cfg)  # run.limit=0, model.max_rounds=-1...: one line naming each, before any work
    check_run_name(cfg)  # one directory name under run.root: no '..', separators, control characters
    check_env_interpolations(cfg)  # ${oc.env:HOME} in a published name: refused, one line
    _pin_hub_data(cfg)
    # throw_on_missing: a required value (`???`, e.g. dataset.root) fails here, named, before any work
    resolved: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[assignment]
    # Its keys (and those of the environment) never reach a file, a log or the console (docs/running.md "Secrets").
    secrets.remember_config(resolved)
    secrets.remember_environment()
    secrets.scrub_logs()
    logs.quiet_log_files()  # a full disk is one stop line, not a logging traceback per record
    with files.limits_in_force(read_limits(cfg.dataset)), signals.stopping():
        return _run_stopping(cfg, resolved)


def _run_stopping(cfg: DictConfig, resolved: dict[str, Any]) -> RunResult:
    """`run` once the config is checked: a stop by the surroundings becomes one RunStopped."""
    escape_log_args()  # names from data reach the console and run.log escaped (rvt_bench.core.printable)
    progress = stops.Progress()
    try:
        outputs.try_outputs(cfg)  # leaderboard.dir=/dev/null: one line now, not a traceback after all the work
        # cheap: an adapter loads its weights on the first predict; a missing wandb stops before any model work
        adapter = _built(f"model {resolved['model']['name']!r} (_target_ {resolved['model'].get('_target_')})", lambda: instantiate(adapter_node(cfg.model), _convert_="all"))
        tracker = _built(f"logger {cfg.logger.get('_target_')!r}", lambda: loggers.make_logger(cfg.logger))
        try:
            result = _run(cfg, resolved, adapter, progress)
        finally:
            adapter.close()
        if tracker is not None and result.metrics is not None and result.kept is None:
            result.logged = loggers.log_run(tracker, result.run_dir, Path(cfg.run.root), result.metrics, resolved,
                                            cfg.run.limit)
        return result
    except BaseException as exc:
        stop = stops.stop_for(exc, progress, resolved["model"]["name"])
        if stop is None:
            if isinstance(exc, RvtBenchError):
                stops.log_stop(progress, exc, traceback.format_exc())
            raise
        stops.log_stop(progress, stop, traceback.format_exc())
        raise stop from (None if isinstance(exc, KeyboardInterrupt) else exc)


def _built(what: str, build: Any) -> Any:
    """build(), or RunStopped("missing_package") naming `what` and the module it cannot import
    (rvt_bench.harness.stops.not_importable: `pip install` only for rvt-bench's own requirements)."""
    try:
        return build()
    except Exception as exc:
        missing = stops.missing_module(exc)
        if missing is None:
            raise
        raise RunStopped(stops.not_importable(missing, what), "missing_package") from exc


def _pin_hub_data(cfg: DictConfig) -> None:
    """Data by hub id (dataset.hf_dataset, rvt_bench.loaders.hub): no dataset.root is needed, and the
    revision is pinned to its commit before the fingerprint is taken, so a run directory holds one
    version of the data. Raises DatasetFormatError (one line) when the revision cannot be resolved."""
    node = cfg.dataset
    if not node.get("hf_dataset"):
        return
    from omegaconf import open_dict

    from rvt_bench.loaders import hub

    with open_dict(node):
        if OmegaConf.is_missing(node, "root"):
            node.root = None
        hub.pin(node)


def _run(cfg: DictConfig, resolved: dict[str, Any], adapter: Adapter, progress: stops.Progress) -> RunResult:
    """One invocation on the run directory named by the config's fingerprint: take its lock, then
    predict this shard's samples still to do (`_predict_phase`) and, once every shard's
    predictions are there, score and publish (`_score_phase`). Everything that can fail on a bad
    config or bad data runs before the run directory is written."""
    ident = rundir.identify(cfg, resolved, adapter.fingerprint())
    lock_name = "merge" if cfg.run.merge else predictions_filename(ident.shard, ident.num_shards)
    with rundir.owned(ident.run_dir, lock_name):
        progress.run_dir = ident.run_dir
        samples, data_errors, data_source, data_warnings = load_samples(cfg)
        protocol = instantiate(cfg.dataset.protocol)
        adapter.use_prediction_layouts(_prediction_layouts(resolved))
        judge, max_failure_rate = judging.make_judge(resolved)
        protocol.attach_judge(judge)
        rundir.refuse_other_config(ident.run_dir, ident.fingerprint)
        done, predicted = _predict_phase(cfg, adapter, progress, ident, samples[ident.shard::ident.num_shards])
        missing = [s.id for s in samples if s.id not in done]
        if missing:
            log.warning("%d samples have no prediction yet (other shards?); scoring waits for run.merge=true "
                        "once all shards are done", len(missing))
            return RunResult(ident.run_dir, None, predicted, None)
        if data_source is not None:
            rundir.note_data_source(ident.run_dir, data_source)
        return _score_phase(cfg, resolved, progress, ident, samples, data_errors, done, protocol, adapter,
                            (judge, max_failure_rate), predicted, (data_source, data_warnings))


def _prediction_layouts(resolved: dict[str, Any]) -> dict:
    """The run's benchmark's declared prediction layouts (dataset.predictions), for an adapter that
    reads predictions from files; a malformed one is a config error naming it."""
    try:
        return benchmark.prediction_layouts(block=resolved["dataset"].get("predictions") or {})
    except benchmark.DeclarationError as exc:
        raise ConfigError(f"dataset.{exc}") from exc


def _predict_phase(cfg: DictConfig, adapter: Adapter, progress: stops.Progress, ident: rundir.RunIdentity,
                   mine: list[Sample]) -> tuple[dict, int]:
    """Claim the run directory and predict the samples of `mine` (this shard's, dataset order) that
    resume.plan says are to do; (the predictions of every shard by sample id, samples predicted)."""
    retry, max_attempts = resume.retry_settings(cfg)
    plan = resume.plan(ident.run_dir, mine, retry, max_attempts)
    checker = FrameChecker() if cfg.run.verify_frames else None
    sandbox = adapter.code_isolation()
    if not plan.todo or cfg.run.merge:
        rundir.claim_run_dir(ident.run_dir, cfg, ident.fingerprint, sandbox)
        if not plan.todo:
            log.info("all %d samples%s already predicted in %s: no model work", len(mine),
                     " of this shard" if cfg.run.num_shards > 1 else "", ident.run_dir)
        elif plan.failed_outside:
            log.warning("%d samples failed outside the model's output; re-run their shard (without run.merge) to "
                        "predict them again", len(plan.failed_outside))
        return plan.done, 0
    if plan.again:
        log.warning("%d samples failed earlier outside the model's output (%s): predicting them again "
                    "(run.retry_failed)", len(plan.again), score.count_by([plan.done[s.id].failure_kind for s in plan.again]))
    if len(plan.again) < len(plan.failed_outside):
        log.warning("%d samples failed outside the model %d times: kept as failures (run.max_attempts)",
                    len(plan.failed_outside) - len(plan.again), max_attempts)
    log.info("%d of %d samples to predict (%d already done) -> %s", len(plan.todo), len(mine),
             len(mine) - len(plan.todo), ident.run_dir)
    # A model that cannot load or a server that is down stops here, named, once, before the run
    # directory is written; not needed when every sample to do fails its frame check anyway.
    if any(checker is None or checker.check(s) is None for s in plan.todo):
        adapter.preflight()
    rundir.claim_run_dir(ident.run_dir, cfg, ident.fingerprint, sandbox)
    progress.phase = "predicting"
    start = time.perf_counter()
    predicted = predict(cfg, adapter, plan.todo, ident.predictions_path, checker, progress,
                        frozenset(s.id for s in plan.again))
    if plan.todo:
        rundir.note_prediction(ident.run_dir, time.perf_counter() - start, predicted)
    return resume.plan(ident.run_dir, mine, retry, max_attempts, quiet=True).done, predicted


def _score_phase(cfg: DictConfig, resolved: dict[str, Any], progress: stops.Progress, ident: rundir.RunIdentity,
                 samples: list[Sample], data_errors: list, done: dict, protocol: Any, adapter: Adapter,
                 judged: tuple[Any, float], predicted: int, data: tuple[dict | None, list[str]] = (None, [])) -> RunResult:
    """Score every sample into scores.jsonl / samples.jsonl / metrics.json (the .limitN names for a
    run.limit run), record the scoring time in manifest.json, and publish: the leaderboard row
    (leaderboard.publish, full runs only) and report.html. metrics.json is kept when the new
    scoring is worse (score.worse_than_before)."""
    progress.phase = "scoring"
    start = time.perf_counter()
    run_dir, limit = ident.run_dir, cfg.run.limit
    metrics_path = run_dir / rundir.derived_name("metrics.json", limit)
    scores_path = run_dir / rundir.derived_name("scores.jsonl", limit)
    metrics, records = score.score(samples, done, protocol, scores_path, resolved, ident.run_name, ident.fingerprint,
                                   adapter, data_errors)
    data_source, data_warnings = data
    if data_source is not None:  # a hub copy: what it is, in metrics.json and so in the leaderboard row
        metrics.aggregate["data_source"] = data_source
    if data_warnings:
        metrics.aggregate["warnings"] = [*data_warnings, *(metrics.aggregate.get("warnings") or [])]
    finish_metrics(metrics, protocol, resolved, scores_path)
    if data_source is not None and data_source.get("not_comparable"):  # the data itself is not the published one
        mark_not_comparable(metrics.aggregate, str(data_source["not_comparable"]))
    variant = adapter.not_comparable()  # the model's own named variant off its paper's protocol
    if variant:
        mark_not_comparable(metrics.aggregate, variant)
    write_sample_log(run_dir / rundir.derived_name("samples.jsonl", limit), samples, done, scores_path, adapter)
    if limit is not None:
        metrics.partial = f"run.limit={limit}: the first {len(samples)} samples only"
    judge, max_failure_rate = judged
    sandbox = rundir.sandbox_of(run_dir)
    metrics.judge = judging.judge_block(judge, max_failure_rate, [r.judge for r in records if r.judge is not None])
    nulls: dict[str, str] = {}
    body = finite(metrics.to_json(), "", nulls)
    if nulls:
        body["null_values"] = nulls
    scoring_s = time.perf_counter() - start
    rundir.note_scoring(run_dir, scoring_s, metrics_path.name)
    prediction = read_run_json(run_dir / rundir.MANIFEST).get("prediction") if (run_dir / rundir.MANIFEST).exists() else None
    headline = (protocol.headline or [None])[0]
    worse = score.worse_than_before(metrics_path, body)
    if worse is not None:
        kept = f"metrics.json and the leaderboard row were NOT updated: {worse}; the last good results are kept"
        log.error("%s (%s)", kept, metrics_path)
        previous = read_run_json(metrics_path)
        return RunResult(run_dir, previous, predicted, None, kept, headline, kept, scoring_s, prediction, sandbox=sandbox)
    progress.phase = "publishing"
    write_json_atomic(metrics_path, body)
    board, refused = None, None
    if submission_of(body) is not None:  # nothing scored here: the server's score is the result
        log.info("no public GT: nothing to publish; %s", submission_of(body)["command"])
    elif cfg.leaderboard.publish and limit is None:
        board, refused = publish.publish(cfg.leaderboard.dir, resolved, body, run_dir, protocol)
        if refused is not None:
            log.error("%s; see %s", refused, metrics_path)
    elif limit is not None:
        log.warning("run.limit=%s: a partial run is not published to the leaderboard", limit)
    page = publish.write_report(run_dir, samples, done) if limit is None and cfg.run.report else None
    return RunResult(run_dir, body, predicted, board, refused, headline, None, scoring_s, prediction, page, sandbox=sandbox)
