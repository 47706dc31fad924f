"""The evaluation loop: resolve a run directory, predict what is not done yet, score, publish.

A sample that fails (adapter exception, unparsable model output, bad frame) becomes a Prediction with
`error` set, is scored as an empty prediction and listed in metrics.json; the run goes on.
Predictions are appended and fsynced one by one, so a killed run loses at most the sample in flight
and a restart skips every finished sample (design.md section 3).
"""
from __future__ import annotations

import json
import logging
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from bench import funnel
from bench import manifest as manifest_mod
from bench.store import (PredictionLog, prediction_files, predictions_filename, read_predictions,
                         write_json_atomic, write_jsonl_atomic)
from bench.types import Prediction, RunStoreError, RvtBenchError, Sample
from leaderboards import publish

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_dir: Path
    metrics: dict[str, Any] | None  # None while shards are still missing
    predicted: int                  # samples predicted by this invocation (0 on a finished resume)
    leaderboard: Path | None
    not_published: str | None = None  # why no leaderboard row was written although publishing was on
    headline: str | None = None       # the protocol's first headline metric key


# Failure kinds a resume predicts again by default: not the model's answer but its surroundings.
RETRY_FAILED = ("adapter", "exception", "sandbox", "data")


def run(cfg: DictConfig) -> RunResult:
    """Evaluate cfg.model on cfg.dataset. cfg is the composed Hydra config (conf/config.yaml)."""
    # throw_on_missing: a required value (`???`, e.g. dataset.root) fails here, named, before any work
    resolved: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[assignment]
    adapter = instantiate(cfg.model, _convert_="all")  # cheap: adapters load weights on first predict
    try:
        return _run(cfg, resolved, adapter)
    finally:
        adapter.close()


def _run(cfg: DictConfig, resolved: dict[str, Any], adapter: Any) -> RunResult:
    fp = manifest_mod.fingerprint(resolved, adapter.fingerprint() if hasattr(adapter, "fingerprint") else None)
    dataset_name, model_name = resolved["dataset"]["name"], resolved["model"]["name"]
    run_name = cfg.run.name or fp
    run_dir = Path(cfg.run.root) / dataset_name / model_name / run_name
    # Everything that can fail on a bad config or bad data runs before the run directory is touched.
    samples, data_errors = _load_samples(cfg)
    protocol = instantiate(cfg.dataset.protocol)
    judge, max_failure_rate = _make_judge(resolved)
    protocol.attach_judge(judge)
    _refuse_other_config(run_dir, fp)
    shard, num_shards = int(cfg.run.shard), int(cfg.run.num_shards)
    if not 0 <= shard < num_shards:
        raise ValueError(f"run.shard={shard} must be in [0, run.num_shards={num_shards})")
    mine = samples[shard::num_shards]  # deterministic partition by dataset order

    attempts: dict[str, int] = {}
    done = read_predictions(prediction_files(run_dir), attempts)
    retry, max_attempts = _retry_settings(cfg)
    failed_outside = [s for s in mine if s.id in done and done[s.id].error is not None and done[s.id].error.get("kind") in retry]
    again = [s for s in failed_outside if attempts.get(s.id, 0) < max_attempts]
    todo = [s for s in mine if s.id not in done] + again
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
        predicted = _predict(cfg, adapter, todo, run_dir / predictions_filename(shard, num_shards), checker)
        done = read_predictions(prediction_files(run_dir))
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

    metrics = _score(samples, done, protocol, run_dir / _derived_name("scores.jsonl", cfg.run.limit), resolved, run_name, fp)
    if cfg.run.limit is not None:
        metrics["partial"] = f"run.limit={cfg.run.limit}: the first {len(samples)} samples only"
    metrics["judge"] = _judge_block(judge, max_failure_rate, metrics.pop("_judged"))
    metrics["data_errors"] = len(data_errors)
    metrics["data_error_samples"] = data_errors
    write_json_atomic(run_dir / _derived_name("metrics.json", cfg.run.limit), metrics)
    board, refused = None, None
    if cfg.leaderboard.publish and cfg.run.limit is None:
        refused = _refusal(metrics)
        if refused is None:
            board = publish.upsert(cfg.leaderboard.dir, dataset_name, _leaderboard_row(resolved, metrics, run_dir, protocol))
        else:
            log.error("%s; see %s", refused, run_dir / "metrics.json")
    elif cfg.run.limit is not None:
        log.warning("run.limit=%s: a partial run is not published to the leaderboard", cfg.run.limit)
    return RunResult(run_dir, metrics, predicted, board, refused, (protocol.headline or [None])[0])


def _refusal(metrics: dict[str, Any]) -> str | None:
    """Why a scored run must not reach the leaderboard, or None. A run where every sample failed
    for a reason other than the model's own output (missing prediction files, adapter crashes,
    unreadable data) measures the setup, not the model."""
    if not metrics["judge"].get("publishable", True):
        return f"not published to the leaderboard: {metrics['judge']['reason']} (judge.max_failure_rate)"
    kinds = metrics["failures_by_kind"]
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


# Failure kinds a prediction can record (bench.types error kinds, and "exception" for adapter bugs).
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


def _git_shas(run_dir: Path) -> str:
    """The code versions that made a run's predictions: the first sha, then any other resumed with."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    shas = [manifest.get("git_sha", "unknown")] + [r.get("git_sha", "unknown") for r in manifest.get("resumes", [])]
    return ";".join(dict.fromkeys(shas))


def _load_samples(cfg: DictConfig) -> tuple[list[Sample], list[dict]]:
    """The dataset's samples (first run.limit of them) and the per-sample data errors its loader
    recorded (samples it could not build: unreadable image, malformed annotation)."""
    kwargs = {k: v for k, v in OmegaConf.to_container(cfg.dataset, resolve=True).items() if k not in ("name", "protocol")}
    dataset = instantiate(kwargs, _convert_="all")
    samples = list(dataset)
    errors = [dict(e, kind=e.get("kind", "data")) for e in getattr(dataset, "errors", []) or []]
    seen: set[str] = set()
    for s in samples:
        if s.id in seen:
            raise RunStoreError(f"dataset {cfg.dataset.name!r} yields sample id {s.id!r} twice; ids must be unique")
        seen.add(s.id)
    if cfg.run.limit is not None:
        if int(cfg.run.limit) < 1:
            raise ValueError(f"run.limit must be a positive number of samples or null, got {cfg.run.limit}")
        samples = samples[: int(cfg.run.limit)]
    if not samples:
        raise RunStoreError(f"dataset {cfg.dataset.name!r} (split {cfg.dataset.get('split')!r}) has no samples")
    for e in errors:
        log.warning("data error, sample not evaluated: %s: %s", e.get("sample_id") or e.get("file"), e.get("message"))
    return samples, errors


def _predict(cfg: DictConfig, adapter: Any, todo: list[Sample], path: Path, checker: "_FrameChecker | None") -> int:
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
            if batch:
                preds += ([_predict_one(adapter, batch[0], bool(cfg.run.fail_fast))] if len(batch) == 1
                          else _predict_batch(adapter, batch, bool(cfg.run.fail_fast)))
            for pred in preds:
                failures += pred.error is not None
                out.append(pred)
            bar.update(len(preds))
            bar.set_postfix(failed=failures)
    finally:
        bar.close()
        out.close()
    return len(todo)


class _FrameChecker:
    """Decodes every frame of a sample once per run before the model sees it, so a corrupt or
    truncated frame fails that sample (kind "data") even when the model never reads pixels."""

    def __init__(self) -> None:
        self.ok: set[str] = set()

    def check(self, sample: Sample) -> Prediction | None:
        from bench.frames import verify_frame

        for path in sample.frames:
            if path in self.ok:
                continue
            try:
                verify_frame(path)
            except RvtBenchError as exc:
                log.info("sample %s: unreadable frame: %s", sample.id, exc)
                return Prediction.failure(sample.id, "data", str(exc))
            self.ok.add(path)
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
           resolved: dict[str, Any], run_name: str, fp: str) -> dict[str, Any]:
    """Score every sample and write scores.jsonl; return the metrics.json body (the caller adds the
    judge block and writes it; no timestamps: a re-run of a finished run writes it byte-identical).
    "_judged" holds the records' judge verdicts for the caller and is not written."""
    # An unscorable prediction (e.g. the wrong number of frames) comes back as a failure, scored as empty.
    t0 = time.perf_counter()
    scored = protocol.score_many([(s, preds[s.id]) for s in samples], workers=int(resolved["run"].get("score_workers", 1)))
    records = [record for record, _ in scored]
    preds.update({pred.sample_id: pred for _, pred in scored})
    # Stage funnel + rollout analytics (bench/funnel.py): adds record["funnel"] before the write.
    stage_keys = funnel.annotate(samples, preds, records, resolved["model"].get("policy"), time.perf_counter() - t0)
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
        **protocol.aggregate(records),
        "n": len(samples),
        "failures": len(failures),
        "failures_by_kind": _count_by(failures, "kind"),
        "parse_rate": 1.0 - n_parse / answered if answered else None,
        "failed_samples": failures,
        "tasks": _count_by([{"task": s.task} for s in samples], "task"),
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
    model = resolved["model"]
    row: dict[str, Any] = {
        "run_name": metrics["run_name"],
        "fingerprint": metrics["fingerprint"],
        "dataset": metrics["dataset"],
        "split": metrics["split"],
        "model": metrics["model"],
        "policy": _component_name(model.get("policy")),
        "perception": _component_name(model.get("perception")),
        "decoding": metrics.get("decoding", "free"),
    }
    for key in protocol.headline:
        row[key] = metrics["metrics"].get(key)
    judge = metrics.get("judge") or {}
    if "failure_rate" in judge:
        row["judge_failure_rate"] = judge["failure_rate"]
    row.update(n=metrics["n"], failures=metrics["failures"], parse_rate=metrics["parse_rate"],
               data_errors=metrics.get("data_errors", 0), git_sha=_git_shas(run_dir), run_dir=str(run_dir),
               overrides=" ".join(_semantic_overrides(resolved.get("_overrides", []) or [])))
    return row


def _semantic_overrides(overrides: list[str]) -> list[str]:
    """The command-line overrides that say what ran (not where files went), secrets redacted: this
    is what tells sweep points apart in the leaderboard."""
    where = ("run.", "leaderboard.", "hydra.")
    return [o for o in manifest_mod.redact_overrides(overrides) if not o.lstrip("+~").startswith(where)]


def _component_name(node: Any) -> str:
    """Short name of a configured component for the leaderboard: its `name`, `model`, or class."""
    if not isinstance(node, dict):
        return ""
    name = node.get("name") or node.get("model") or str(node.get("_target_", "")).rsplit(".", 1)[-1]
    runtime = node.get("runtime")
    return f"{name}:{runtime}" if runtime else str(name)


def format_summary(result: RunResult) -> str:
    """Human-readable metrics table for the terminal (metrics as percentages, 2 decimals)."""
    m = result.metrics
    if m is None:
        return "scoring skipped: predictions missing (shards still running?)"
    lines = [f"{m['dataset']} ({m['split']}) / {m['model']}  run {m['run_name']}  "
             f"n={m['n']} failures={m['failures']} parse_rate="
             + ("n/a" if m["parse_rate"] is None else f"{m['parse_rate']:.2f}")]
    lines.append("  tasks: " + ", ".join(f"{t}={n}" for t, n in (m.get("tasks") or {}).items()))
    lines.extend(funnel.summary_lines(m))
    if m.get("failures"):
        lines.append(f"  failures by kind: {m['failures_by_kind']} (reasons in metrics.json 'failed_samples'; "
                     f"pictures: python -m bench.visualize <run dir> --worst 10)")
    if m.get("data_errors"):
        lines.append(f"  DATA ERRORS: {m['data_errors']} samples could not be loaded and are not in n "
                     f"(listed in metrics.json 'data_error_samples')")
    judge = m.get("judge") or {}
    if "n" in judge:
        lines.append(f"  {judge['status']}: n={judge['n']} failed={judge['n_failed']} "
                     f"failure_rate={judge['failure_rate']:.3f} (max {judge['max_failure_rate']})")
    elif judge:
        lines.append(f"  {judge['status']}")
    width = max((len(k) for k in m["metrics"]), default=8)
    for key, value in m["metrics"].items():
        lines.append(f"  {key:<{width}}  {_pct(value)}")
    for group, rows in (m.get("breakdown") or {}).items():
        for name, vals in rows.items():
            if isinstance(vals, dict):
                shown = "  ".join(f"{k}={_pct(v)}" for k, v in vals.items() if isinstance(v, (int, float)) and k != "n")
                n = vals.get("n")
                lines.append(f"  {group}={name}{f' (n={n})' if n is not None else ''}: {shown}")
    return "\n".join(lines)


def _pct(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if value != value else f"{100 * value:6.2f}"
    return str(value)
