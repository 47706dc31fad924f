"""The evaluation loop: resolve a run directory, predict what is not done yet, score, publish.

A sample that fails (adapter exception, unparsable model output) becomes a Prediction with `error`
set, is scored as an empty prediction and listed in metrics.json; the run goes on. A sample whose
data is bad (the loader could not build it, a frame does not decode, its frames disagree in size)
is a data error: listed and counted apart, not in `n` (the one rule, README "Failures").
Predictions are appended and fsynced one by one, so a killed run loses at most the sample in flight
and a restart skips every finished sample (design.md section 3). One invocation at a time owns a
run directory's predictions file (core.store.RunLock); a stop by the surroundings (Ctrl-C, a
full disk, a read-only root...) is a RunStopped with one line, its traceback in <run_dir>/run.log.
A resume never makes results worse: metrics.json and the leaderboard row are only replaced by a
scoring that is not worse (_not_worse).
"""
from __future__ import annotations

import errno
import json
import logging
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from harness import funnel
from harness import manifest as manifest_mod
from core.store import (PredictionLog, RunLock, finite, prediction_files, predictions_filename, read_predictions,
                         write_json_atomic, write_jsonl_atomic)
from core.types import (Prediction, RunStopped, RunStoreError, RvtBenchError, Sample, ServerUnreachableError)
from harness.results import finish_metrics, write_sample_log
from harness.summary import format_summary  # noqa: F401  (run_bench and users import it from here)
from leaderboards import publish
from loaders.config import loader_kwargs
from leaderboards.row import leaderboard_row

log = logging.getLogger(__name__)

RUN_LOG = "run.log"
DATA = "data"  # the failure kind of a data error (core.types.DatasetFormatError.kind)


@dataclass
class RunResult:
    run_dir: Path
    metrics: dict[str, Any] | None  # None while shards are still missing
    predicted: int                  # samples predicted by this invocation (0 on a finished resume)
    leaderboard: Path | None
    not_published: str | None = None  # why no leaderboard row was written although publishing was on
    headline: str | None = None       # the protocol's first headline metric key
    kept: str | None = None           # why metrics.json was not replaced (the last good one kept)


@dataclass
class _Progress:
    """Where an invocation is, for the one line a stop prints."""

    run_dir: Path | None = None
    phase: str = "starting"           # starting | predicting | scoring | publishing
    predicted: int = 0
    in_flight: list[str] = field(default_factory=list)


# Failure kinds a resume predicts again by default: not the model's answer but its surroundings.
RETRY_FAILED = ("adapter", "exception", "sandbox", "data")

# OSError numbers that are the machine's state, not a bug: one line and an exit status each.
_OS_STOPS = {errno.ENOSPC: "no_space", errno.EDQUOT: "no_space", errno.EROFS: "read_only",
             errno.EACCES: "permission", errno.EPERM: "permission"}


def run(cfg: DictConfig) -> RunResult:
    """Evaluate cfg.model on cfg.dataset. cfg is the composed Hydra config (conf/config.yaml).

    Raises RunStopped (one line; reason "interrupted", "no_space", "read_only", "permission",
    "missing_package", "server_down" or "locked") when the surroundings stop the run, with the
    traceback written to <run_dir>/run.log when the run directory is known; RvtBenchError subclasses
    for a bad config or dataset."""
    # throw_on_missing: a required value (`???`, e.g. dataset.root) fails here, named, before any work
    resolved: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[assignment]
    progress = _Progress()
    try:
        try:
            adapter = instantiate(cfg.model, _convert_="all")  # cheap: adapters load weights on first predict
        except Exception as exc:
            missing = _missing_module(exc)
            if missing is None:
                raise
            raise RunStopped(f"model {resolved['model']['name']!r} needs the Python package {missing!r}, which is "
                             f"not installed: pip install {missing.split('.')[0]}", "missing_package") from exc
        try:
            return _run(cfg, resolved, adapter, progress)
        finally:
            adapter.close()
    except KeyboardInterrupt:
        stop = RunStopped(_interrupted(progress), "interrupted")
        _log_stop(progress, stop, traceback.format_exc())
        raise stop from None
    except OSError as exc:
        reason = _OS_STOPS.get(exc.errno or 0)
        if reason is None:
            raise
        stop = RunStopped(_os_stop(exc, reason, progress), reason)
        _log_stop(progress, stop, traceback.format_exc())
        raise stop from exc
    except ModuleNotFoundError as exc:  # a backend imports its package on first use
        stop = RunStopped(f"the Python package {exc.name!r} is not installed (needed by model "
                          f"{resolved['model']['name']!r}): pip install {str(exc.name).split('.')[0]}", "missing_package")
        _log_stop(progress, stop, traceback.format_exc())
        raise stop from exc
    except ServerUnreachableError as exc:
        stop = RunStopped(f"{exc}; nothing was lost: the same command resumes once the server is up", "server_down")
        _log_stop(progress, stop, traceback.format_exc())
        raise stop from exc
    except RvtBenchError as exc:
        _log_stop(progress, exc, traceback.format_exc())
        raise


def _missing_module(exc: BaseException | None) -> str | None:
    """The name of the module a ModuleNotFoundError behind `exc` (Hydra wraps it) could not import."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            return exc.name
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _interrupted(p: _Progress) -> str:
    where = f" in {p.run_dir}" if p.run_dir else ""
    if p.phase == "predicting":
        flight = f"; the sample in flight ({', '.join(p.in_flight)}) was abandoned" if p.in_flight else ""
        return (f"interrupted (Ctrl-C) while predicting: {p.predicted} predictions of this invocation are saved{where}"
                f"{flight}; the same command resumes from there")
    if p.phase == "scoring":
        return (f"interrupted (Ctrl-C) while scoring: every prediction is saved{where} and metrics.json was not "
                f"changed; the same command scores again without model work")
    return f"interrupted (Ctrl-C) while {p.phase}: nothing was lost{where}; the same command starts again"


def _os_stop(exc: OSError, reason: str, p: _Progress) -> str:
    what = {"no_space": "no space left on the device", "read_only": "the file system is read-only",
            "permission": "permission denied"}[reason]
    fix = {"no_space": "free space (or set run.root elsewhere)", "read_only": "set run.root to a writable directory",
           "permission": "fix the permissions or set run.root to a directory you own"}[reason]
    kept = (f"; the {p.predicted} predictions made so far are saved and the same command resumes"
            if p.phase == "predicting" else "")
    return f"{what} writing {exc.filename or 'a run file'} while {p.phase}{kept}; {fix}"


def _log_stop(p: _Progress, exc: BaseException, tb: str) -> None:
    """Append a stop's full traceback to <run_dir>/run.log (the terminal gets one line)."""
    if p.run_dir is None:
        return
    try:
        with open(p.run_dir / RUN_LOG, "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} stopped: {exc}\n{tb}\n")
    except OSError:
        pass  # the disk that stopped the run may not take the log either


def _run(cfg: DictConfig, resolved: dict[str, Any], adapter: Any, progress: _Progress) -> RunResult:
    fp = manifest_mod.fingerprint(resolved, adapter.fingerprint() if hasattr(adapter, "fingerprint") else None)
    dataset_name, model_name = resolved["dataset"]["name"], resolved["model"]["name"]
    run_name = cfg.run.name or fp
    run_dir = Path(cfg.run.root) / dataset_name / model_name / run_name
    shard, num_shards = int(cfg.run.shard), int(cfg.run.num_shards)
    if not 0 <= shard < num_shards:
        raise ValueError(f"run.shard={shard} must be in [0, run.num_shards={num_shards})")
    # The lock comes first, so that a second invocation on the same files stops at once; a run
    # directory this invocation creates and then leaves without writing anything is removed again.
    created = _missing_dirs(run_dir)
    lock = RunLock(run_dir, "merge" if cfg.run.merge else predictions_filename(shard, num_shards))
    lock.acquire()
    progress.run_dir = run_dir
    claimed = False
    handler = _attach_run_log(run_dir)
    try:
        result = _locked_run(cfg, resolved, adapter, progress, fp, run_dir, run_name, shard, num_shards)
        claimed = True
        return result
    except BaseException:
        claimed = (run_dir / "config.yaml").exists()
        raise
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
        lock.release()
        if not claimed:
            _remove_unclaimed(run_dir, created)


def _missing_dirs(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, deepest first."""
    out = []
    while not path.exists() and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def _remove_unclaimed(run_dir: Path, created: list[Path]) -> None:
    """Remove the lock files and the directories an invocation created before failing, so that a
    failed start leaves nothing behind (an empty run dir would look like a run)."""
    for name in list(run_dir.glob(".*.lock")) + list(run_dir.glob(".*.owner")) + [run_dir / RUN_LOG]:
        if created and name.exists():
            name.unlink(missing_ok=True)
    for d in created:
        try:
            d.rmdir()
        except OSError:
            break


class _QuietFileHandler(logging.FileHandler):
    """A log file that, when the disk refuses it (full, read-only), drops records silently: the
    stop is reported once by the runner, not as a logging traceback per record."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        pass


def _attach_run_log(run_dir: Path) -> logging.Handler:
    """Send the root logger's INFO+ records to <run_dir>/run.log while the run holds its lock."""
    handler = _QuietFileHandler(run_dir / RUN_LOG, encoding="utf-8", delay=True)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    return handler


def _plan(run_dir: Path, mine: list[Sample], retry: set[str], max_attempts: int, quiet: bool = False):
    """(done, failed_outside, again, todo) from the run's prediction files: `again` = samples that
    failed outside the model and may be predicted again; `todo` = never predicted + again."""
    attempts: dict[str, int] = {}
    if quiet:
        logging.getLogger("core.store").disabled = True  # the second read repeats the first one's warnings
    try:
        done = read_predictions(prediction_files(run_dir), attempts)
    finally:
        logging.getLogger("core.store").disabled = False
    failed_outside = [s for s in mine if s.id in done and done[s.id].error is not None and done[s.id].error.get("kind") in retry]
    again = [s for s in failed_outside if attempts.get(s.id, 0) < max_attempts]
    todo = [s for s in mine if s.id not in done] + again
    return done, failed_outside, again, todo


def _locked_run(cfg: DictConfig, resolved: dict[str, Any], adapter: Any, progress: _Progress, fp: str, run_dir: Path,
                run_name: str, shard: int, num_shards: int) -> RunResult:
    dataset_name = resolved["dataset"]["name"]
    # Everything that can fail on a bad config or bad data runs before the run directory is written.
    samples, data_errors = _load_samples(cfg)
    protocol = instantiate(cfg.dataset.protocol)
    judge, max_failure_rate = _make_judge(resolved)
    protocol.attach_judge(judge)
    _refuse_other_config(run_dir, fp)
    mine = samples[shard::num_shards]  # deterministic partition by dataset order

    retry, max_attempts = _retry_settings(cfg)
    done, failed_outside, again, todo = _plan(run_dir, mine, retry, max_attempts)
    predicted = 0
    checker = _FrameChecker() if cfg.run.get("verify_frames", True) else None
    if todo and not cfg.run.merge:
        if again:
            log.warning("%d samples failed earlier outside the model's output (%s): predicting them again "
                        "(run.retry_failed)", len(again), _count_by([done[s.id].error for s in again], "kind"))
        if len(again) < len(failed_outside):
            log.warning("%d samples failed outside the model %d times: kept as failures (run.max_attempts)",
                        len(failed_outside) - len(again), max_attempts)
        log.info("%d of %d samples to predict (%d already done) -> %s", len(todo), len(mine), len(mine) - len(todo), run_dir)
        # A model that cannot load or a server that is down stops here, named, once, before the run
        # directory is written; not needed when every sample to do fails its frame check anyway.
        if hasattr(adapter, "preflight") and any(checker is None or checker.check(s) is None for s in todo):
            adapter.preflight()
        _claim_run_dir(run_dir, cfg, fp)
        progress.phase = "predicting"
        predicted = _predict(cfg, adapter, todo, run_dir / predictions_filename(shard, num_shards), checker, progress)
        done = _plan(run_dir, mine, retry, max_attempts, quiet=True)[0]
    else:
        _claim_run_dir(run_dir, cfg, fp)
        if not todo:
            log.info("all %d samples of this shard already predicted in %s: no model work", len(mine), run_dir)
        elif failed_outside:
            log.warning("%d samples failed outside the model's output; re-run their shard (without run.merge) to "
                        "predict them again", len(failed_outside))

    missing = [s.id for s in samples if s.id not in done]
    if missing:
        log.warning("%d samples have no prediction yet (other shards?); scoring waits for run.merge=true "
                    "once all shards are done", len(missing))
        return RunResult(run_dir, None, predicted, None)

    progress.phase = "scoring"
    metrics_path = run_dir / _derived_name("metrics.json", cfg.run.limit)
    scores_path = run_dir / _derived_name("scores.jsonl", cfg.run.limit)
    metrics = _score(samples, done, protocol, scores_path, resolved, run_name, fp, data_errors)
    finish_metrics(metrics, protocol, resolved, scores_path)
    write_sample_log(run_dir / _derived_name("samples.jsonl", cfg.run.limit), samples, done, scores_path, adapter)
    if cfg.run.limit is not None:
        metrics["partial"] = f"run.limit={cfg.run.limit}: the first {len(samples)} samples only"
    metrics["judge"] = _judge_block(judge, max_failure_rate, metrics.pop("_judged"))
    nulls: dict[str, str] = {}
    metrics = finite(metrics, "", nulls)
    if nulls:
        metrics["null_values"] = nulls
    worse = _worse_than_before(metrics_path, metrics)
    if worse is not None:
        kept = f"metrics.json and the leaderboard row were NOT updated: {worse}; the last good results are kept"
        log.error("%s (%s)", kept, metrics_path)
        previous = json.loads(metrics_path.read_text(encoding="utf-8"))
        return RunResult(run_dir, previous, predicted, None, kept, (protocol.headline or [None])[0], kept)
    progress.phase = "publishing"
    write_json_atomic(metrics_path, metrics)
    board, refused = None, None
    if cfg.leaderboard.publish and cfg.run.limit is None:
        refused = _refusal(metrics)
        if refused is None:
            board = publish.upsert(cfg.leaderboard.dir, dataset_name, _leaderboard_row(resolved, metrics, run_dir, protocol))
        else:
            log.error("%s; see %s", refused, metrics_path)
    elif cfg.run.limit is not None:
        log.warning("run.limit=%s: a partial run is not published to the leaderboard", cfg.run.limit)
    return RunResult(run_dir, metrics, predicted, board, refused, (protocol.headline or [None])[0])


def _worse_than_before(path: Path, new: dict[str, Any]) -> str | None:
    """Why `new` must not replace the metrics.json at `path`, or None. Worse = the same run scored
    with more unscored judge verdicts (a judge that is down or failing on this resume), or the
    judge no longer publishable where it was: the model did not change, its surroundings failed."""
    if not path.exists():
        return None
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # an unreadable old file is nothing to keep
    old_judge, new_judge = old.get("judge") or {}, new.get("judge") or {}
    old_failed, new_failed = old_judge.get("n_failed"), new_judge.get("n_failed")
    if isinstance(old_failed, int) and isinstance(new_failed, int) and new_failed > old_failed:
        return (f"the judge failed on {new_failed} of {new_judge.get('n')} answers this time, against {old_failed} "
                f"before ({new_judge.get('reason') or 'judge errors'}); re-run once the judge ({new_judge.get('status')}) "
                f"works")
    if old_judge.get("publishable", True) and not new_judge.get("publishable", True):
        return f"{new_judge.get('reason')}, where the previous scoring was publishable"
    return None


def _refusal(metrics: dict[str, Any]) -> str | None:
    """Why a scored run must not reach the leaderboard, or None. A run where every sample failed
    for a reason other than the model's own output (missing prediction files, adapter crashes,
    unreadable data) measures the setup, not the model."""
    if not metrics["judge"].get("publishable", True):
        return f"not published to the leaderboard: {metrics['judge']['reason']} (judge.max_failure_rate)"
    kinds = metrics["failures_by_kind"]
    if metrics["n"] == 0:
        return (f"not published to the leaderboard: no sample could be scored, all {metrics['data_errors']} have "
                f"data errors (listed in metrics.json 'data_error_samples')")
    if metrics["failures"] == metrics["n"] and "parse" not in kinds:
        return (f"not published to the leaderboard: all {metrics['n']} samples failed ({kinds}), none because of "
                f"the model's output; check the setup (paths, model.root, data)")
    return None


def _make_judge(resolved: dict[str, Any]) -> tuple[Any, float]:
    """(metrics.judge.Judge or None, judge.max_failure_rate) from the resolved `judge` group; the
    judge cache defaults to <run.root>/.judge_cache. No `judge` key (a config composed without the
    group) means no judge."""
    from metrics.judge import make_judge

    cfg = dict(resolved.get("judge") or {})
    max_failure_rate = float(cfg.pop("max_failure_rate", 0.02))
    if cfg.get("_target_") is not None and cfg.get("cache_dir") is None:
        cfg["cache_dir"] = str(Path(resolved["run"]["root"]) / ".judge_cache")
    return make_judge(cfg), max_failure_rate


def _judge_block(judge: Any, max_failure_rate: float, verdicts: list[dict]) -> dict[str, Any]:
    """metrics.json "judge": {"status": "judge: not configured"} without a judge; else the banner,
    n / n_failed / failure_rate over every judged sample, max_failure_rate, publishable, reason
    (metrics.judge.judge_summary, NaN scores = unscored)."""
    from metrics.judge import Verdict, judge_banner, judge_summary

    if judge is None:
        return {"status": judge_banner(None)}
    summary = judge_summary([Verdict(float("nan") if v.get("score") is None else float(v["score"]), v.get("reason", ""))
                             for v in verdicts], max_failure_rate)
    if summary["n"] == 0:  # nothing free-text in this dataset: nothing to refuse
        summary.update(publishable=True, reason=None)
    return {"status": judge_banner(judge), **{k: v for k, v in summary.items() if k != "mean"},
            "max_failure_rate": max_failure_rate}


# Failure kinds a prediction can record (core.types error kinds, and "exception" for adapter bugs).
FAILURE_KINDS = ("parse", "adapter", "exception", "sandbox", "data")


def _retry_settings(cfg: DictConfig) -> tuple[set[str], int]:
    """run.retry_failed (a kind or a list of kinds; unknown names refused) and run.max_attempts."""
    kinds = cfg.run.get("retry_failed", list(RETRY_FAILED))
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    unknown = sorted(set(kinds) - set(FAILURE_KINDS))
    if unknown:
        raise RunStoreError(f"run.retry_failed: unknown failure kinds {unknown}; expected some of {list(FAILURE_KINDS)}")
    max_attempts = int(cfg.run.get("max_attempts", 3))
    if max_attempts < 1:
        raise RunStoreError(f"run.max_attempts must be >= 1, got {max_attempts}")
    return set(kinds), max_attempts


def _refuse_other_config(run_dir: Path, fp: str) -> None:
    """RunStoreError when `run_dir` already holds a run of another fingerprint."""
    cfg_path = run_dir / "config.yaml"
    if cfg_path.exists():
        old_fp = (OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=False) or {}).get("_fingerprint")
        if old_fp != fp:
            raise RunStoreError(
                f"{run_dir} holds a run of another configuration (fingerprint {old_fp}, this one {fp}); "
                f"choose another run.name or remove that directory")


def _claim_run_dir(run_dir: Path, cfg: DictConfig, fp: str) -> None:
    """Write config.yaml and manifest.json for a new run; for a resumed one keep both and append
    this invocation to the manifest's `resumes` (warning when the code changed in between).
    Refuses a run name that already holds another configuration."""
    cfg_path, manifest_path = run_dir / "config.yaml", run_dir / "manifest.json"
    body = manifest_mod.redact(OmegaConf.to_container(cfg, resolve=True))  # no api keys on disk
    body["_fingerprint"] = fp
    now = manifest_mod.manifest(body, fp)
    if cfg_path.exists():
        _refuse_other_config(run_dir, fp)
        previous = OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=False)
        old_root = ((previous or {}).get("dataset") or {}).get("root")
        new_root = (body.get("dataset") or {}).get("root")
        if old_root != new_root:
            log.warning("resuming %s with dataset.root=%s; its predictions so far were made on %s (the root is "
                        "not part of the run's identity: use another run.name for a different copy of the data)",
                        run_dir, new_root, old_root)
        if manifest_path.exists():
            first = json.loads(manifest_path.read_text(encoding="utf-8"))
            if first.get("git_sha") != now["git_sha"]:
                log.warning("resuming %s with code %s; its first predictions were made with %s",
                            run_dir, now["git_sha"], first.get("git_sha"))
            resume = {**{k: now[k] for k in ("started_utc", "git_sha", "host", "argv")}, "dataset_root": new_root}
            first["resumes"] = [*first.get("resumes", []), resume]
            write_json_atomic(manifest_path, first)
            return
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = cfg_path.with_name(".config.yaml.tmp")
    OmegaConf.save(OmegaConf.create(body), tmp)
    tmp.replace(cfg_path)
    write_json_atomic(manifest_path, now)


def _load_samples(cfg: DictConfig) -> tuple[list[Sample], list[dict]]:
    """The dataset's samples (first run.limit of them) and the per-sample data errors its loader
    recorded (samples it could not build: unreadable image, malformed annotation)."""
    dataset = instantiate(loader_kwargs(cfg.dataset), _convert_="all")
    samples = list(dataset)
    errors = [dict(e, kind=e.get("kind", "data")) for e in getattr(dataset, "errors", []) or []]
    seen: dict[str, Sample] = {}
    unique = []
    for s in samples:  # a repeated id is the later sample's data error: results are keyed by id
        if s.id in seen:
            errors.append({"sample_id": s.id, "kind": DATA, "message": (
                f"dataset {cfg.dataset.name!r}: sample id {s.id!r} repeats an earlier sample's id "
                f"(frames {s.frames[0] if s.frames else '?'} vs {seen[s.id].frames[0] if seen[s.id].frames else '?'}); "
                f"ids must be unique, the first one is kept")})
            continue
        seen[s.id] = s
        unique.append(s)
    samples = unique
    if cfg.run.limit is not None:
        if int(cfg.run.limit) < 1:
            raise ValueError(f"run.limit must be a positive number of samples or null, got {cfg.run.limit}")
        samples = samples[: int(cfg.run.limit)]
    if not samples:
        raise RunStoreError(f"dataset {cfg.dataset.name!r} (split {cfg.dataset.get('split')!r}) has no samples")
    for e in errors:
        log.warning("data error, sample not evaluated: %s: %s", e.get("sample_id") or e.get("file"), e.get("message"))
    return samples, errors


def _predict(cfg: DictConfig, adapter: Any, todo: list[Sample], path: Path, checker: "_FrameChecker | None",
             progress: _Progress | None = None) -> int:
    progress = progress or _Progress()
    out = PredictionLog(path)
    failures = 0
    batch_size = max(1, int(cfg.run.batch_size or getattr(adapter, "preferred_batch_size", 1)))
    bar = tqdm(total=len(todo), desc=f"{cfg.dataset.name}/{cfg.model.name}", unit="sample", dynamic_ncols=True)
    try:
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            bad = {s.id: p for s in batch if checker and (p := checker.check(s)) is not None}
            batch = [s for s in batch if s.id not in bad]
            preds = list(bad.values())
            progress.in_flight = [s.id for s in batch]
            if batch:
                preds += ([_predict_one(adapter, batch[0], bool(cfg.run.fail_fast))] if len(batch) == 1
                          else _predict_batch(adapter, batch, bool(cfg.run.fail_fast)))
            for pred in preds:
                failures += pred.error is not None
                out.append(pred)
                progress.predicted += 1
            progress.in_flight = []
            bar.update(len(preds))
            bar.set_postfix(failed=failures)
    finally:
        bar.close()
        out.close()
    return len(todo)


class _FrameChecker:
    """Decodes every frame of a sample once per run before the model sees it, so a corrupt or
    truncated frame fails that sample (a data error) even when the model never reads pixels; and
    checks that the sample's frames share one size, that of its target masks (a frame of another
    size is the data's fault, not the model's)."""

    def __init__(self) -> None:
        self.sizes: dict[str, tuple[int, int]] = {}

    def check(self, sample: Sample) -> Prediction | None:
        from core.frames import frame_size, verify_frame

        expected = next((tuple(int(v) for v in m["size"]) for m in (sample.target.masks or []) if m), None)
        try:
            for t, path in enumerate(sample.frames):
                if path not in self.sizes:
                    verify_frame(path)
                    self.sizes[path] = frame_size(path)
                size = self.sizes[path]
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


def _predict_batch(adapter: Any, batch: list[Sample], fail_fast: bool) -> list[Prediction]:
    """Predict a batch through adapter.predict_batch; an unexpected crash redoes it one by one so
    that only the sample at fault is failed."""
    if not hasattr(adapter, "predict_batch"):
        return [_predict_one(adapter, s, fail_fast) for s in batch]
    start = time.perf_counter()
    try:
        results = adapter.predict_batch(batch)
    except Exception:
        if fail_fast:
            raise
        log.exception("a batch of %d crashed the adapter; redoing it one sample at a time", len(batch))
        return [_predict_one(adapter, s, fail_fast) for s in batch]
    share = round((time.perf_counter() - start) / len(batch), 4)
    preds = []
    for sample, result in zip(batch, results, strict=True):
        if isinstance(result, Prediction) and result.sample_id != sample.id:
            result = RvtBenchError(f"adapter answered sample {result.sample_id!r} when asked for {sample.id!r}")
        if isinstance(result, RvtBenchError):
            if fail_fast:
                raise result
            result = Prediction.failure(sample.id, result.kind, str(result), trace=getattr(result, "trace", None))
        result.timings["total"] = share  # the batch's wall time, shared equally
        preds.append(result)
    return preds


def _predict_one(adapter: Any, sample: Sample, fail_fast: bool) -> Prediction:
    start = time.perf_counter()
    try:
        pred = adapter.predict(sample)
        if pred.sample_id != sample.id:
            raise RvtBenchError(f"adapter answered sample {pred.sample_id!r} when asked for {sample.id!r}")
    except RvtBenchError as exc:
        if fail_fast:
            raise
        log.info("sample %s failed (%s): %s", sample.id, exc.kind, exc)
        pred = Prediction.failure(sample.id, exc.kind, str(exc), trace=getattr(exc, "trace", None))
    except Exception as exc:  # an adapter bug must not end a long run; it is recorded with its traceback
        if fail_fast:
            raise
        log.exception("sample %s crashed the adapter", sample.id)
        pred = Prediction.failure(sample.id, "exception", f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
    pred.timings["total"] = round(time.perf_counter() - start, 4)
    return pred


def _derived_name(name: str, limit: Any) -> str:
    """scores.jsonl / metrics.json, or scores.limit3.jsonl / metrics.limit3.json for a run.limit
    run, so that a partial look never overwrites the full run's results."""
    if limit is None:
        return name
    stem, ext = name.split(".", 1)
    return f"{stem}.limit{int(limit)}.{ext}"


def _score(samples: list[Sample], preds: dict[str, Prediction], protocol: Any, scores_path: Path,
           resolved: dict[str, Any], run_name: str, fp: str, load_errors: list[dict] | None = None) -> dict[str, Any]:
    """Score every sample and write scores.jsonl; return the metrics.json body (the caller adds the
    judge block and writes it; no timestamps: a re-run of a finished run writes it byte-identical).
    "_judged" holds the records' judge verdicts for the caller and is not written.

    The data-error rule (README "Failures"): a sample whose prediction failed with kind "data" (a
    frame that does not decode, frames of disagreeing sizes) is treated like a sample the loader
    could not build (`load_errors`): not scored, not in `n` nor `failures`, listed in
    `data_error_samples` and counted in `data_errors`."""
    # load-time errors are samples that never made it into `samples` (a repeated id names a kept one)
    data_errors = [dict(e) for e in load_errors or []]
    bad_data = {s.id for s in samples if preds[s.id].error is not None and preds[s.id].error.get("kind") == DATA}
    data_errors += [{"sample_id": s.id, **preds[s.id].error} for s in samples if s.id in bad_data]
    samples = [s for s in samples if s.id not in bad_data]
    # An unscorable prediction (e.g. the wrong number of frames) comes back as a failure, scored as empty.
    scored = protocol.score_many([(s, preds[s.id]) for s in samples], workers=int(resolved["run"].get("score_workers", 1))) \
        if samples else []
    # a ground truth found unusable only now (core.masks could not decode it) is a data error too
    late = {pred.sample_id for _, pred in scored if pred.error is not None and pred.error.get("kind") == DATA}
    data_errors += [{"sample_id": pred.sample_id, **pred.error} for _, pred in scored if pred.sample_id in late]
    scored = [(record, pred) for record, pred in scored if pred.sample_id not in late]
    samples = [s for s in samples if s.id not in late]
    records = [record for record, _ in scored]
    preds.update({pred.sample_id: pred for _, pred in scored})
    # Stage funnel + rollout analytics (harness/funnel.py): adds record["funnel"] before the write.
    stage_keys = funnel.annotate(samples, preds, records, resolved["model"].get("policy"))  # no scoring time: metrics.json stays byte-identical on a re-run
    write_jsonl_atomic(scores_path, records)
    failures = [{"sample_id": p.sample_id, **p.error} for p in (preds[s.id] for s in samples) if p.error]
    n_parse = sum(1 for f in failures if f["kind"] == "parse")
    # parse_rate: of the samples the model answered; a sample failed for its data, the adapter or the
    # sandbox never produced an output to parse. None (n/a) when the model answered none.
    answered = len(samples) - sum(1 for f in failures if f["kind"] != "parse")
    metrics = {
        "dataset": resolved["dataset"]["name"],
        "split": resolved["dataset"].get("split"),
        "model": resolved["model"]["name"],
        "run_name": run_name,
        "fingerprint": fp,
        "protocol": protocol.name,
        **(protocol.aggregate(records) if records else {"metrics": {}, "breakdown": {}}),
        "n": len(samples),
        "failures": len(failures),
        "failures_by_kind": _count_by(failures, "kind"),
        "parse_rate": 1.0 - n_parse / answered if answered else None,
        "failed_samples": failures,
        "tasks": _count_by([{"task": s.task} for s in samples], "task"),
        "data_errors": len(data_errors),
        "data_error_samples": data_errors,
        **stage_keys,
        "_judged": [r["judge"] for r in records if "judge" in r],
    }
    return metrics


def _count_by(rows: list[dict], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r[key]] = out.get(r[key], 0) + 1
    return dict(sorted(out.items()))


def _leaderboard_row(resolved: dict[str, Any], metrics: dict[str, Any], run_dir: Path, protocol: Any) -> dict[str, Any]:
    return leaderboard_row(resolved, metrics, run_dir, list(protocol.headline),
                           _semantic_overrides(resolved.get("_overrides", []) or []))


def _semantic_overrides(overrides: list[str]) -> list[str]:
    """The command-line overrides that say what ran (not where files went), secrets redacted: this
    is what tells sweep points apart in the leaderboard."""
    where = ("run.", "leaderboard.", "hydra.")
    return [o for o in manifest_mod.redact_overrides(overrides) if not o.lstrip("+~").startswith(where)]
