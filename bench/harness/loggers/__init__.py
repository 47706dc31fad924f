"""Experiment loggers (`logger=wandb`, `logger=tensorboard`; conf/logger/): after a scored run, the
run as an experiment tracker shows it: the config, the headline metrics with their 95% CIs, the
breakdowns, the model's funnel and measures, a table of samples with their overlays, and
report.html. A Hydra sweep logs one tracker run per point, all in one group.

Everything logged is read from the run directory (metrics.json, samples.jsonl, report.html,
report_images/), so what a tracker shows is what the files hold: scalars are metrics.json's
values as stored (fractions in [0, 1]; CIDEr as a score). A logger is built before the run
starts, so a missing package stops the run before any model work; a failure while logging is one
warning line (the results are already on disk).
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class LoggedRun:
    """What a logger logs of one scored run.

    run_dir:  the run directory; root: run.root (loggers put their own files under it by default).
    metrics:  the metrics.json body; config: the resolved config, secrets redacted.
    group:    the sweep's group name when Hydra runs a multirun, else None.
    samples:  per sample (dataset order) "id", "task", "level", "category", "score" (fraction or
              None), "failure" (kind or "none"), "query", "answer", "image" (overlay PNG path or None).
    report:   report.html, None when the run wrote none.
    """

    run_dir: Path
    root: Path
    metrics: dict[str, Any]
    config: dict[str, Any]
    group: str | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    report: Path | None = None

    @property
    def name(self) -> str:
        """dataset/model/run name: the tracker run's display name."""
        return f"{self.metrics.get('dataset')}/{self.metrics.get('model')}/{self.metrics.get('run_name')}"


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """The numbers of a metrics.json body, by tracker key, as stored: every metric ("image/gIoU"),
    its interval ("image/gIoU/ci_low", ".../ci_high"), its empty-prediction baseline
    ("baseline_empty/image/gIoU"), each breakdown value ("image/level=1/gIoU"), the model's funnel
    ("funnel/<stage key>": samples that reached it) and numeric measures ("measures/<key>"), and
    the run's counts ("run/n", "run/failures", "run/parse_rate")."""
    from rvt_bench.harness.view import adapter_report

    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")

    out: dict[str, float] = {}
    for key, value in (metrics.get("metrics") or {}).items():
        if number(value):
            out[key] = value
    for key, ci in (metrics.get("ci") or {}).items():
        if number((ci or {}).get("low")) and number(ci.get("high")):
            out[f"{key}/ci_low"], out[f"{key}/ci_high"] = ci["low"], ci["high"]
    for key, value in (metrics.get("baseline_empty") or {}).items():
        if number(value):
            out[f"baseline_empty/{key}"] = value
    for group, values in (metrics.get("breakdown") or {}).items():
        part, _, meta = group.rpartition("/")
        for name, vals in (values or {}).items():
            for metric, value in (vals if isinstance(vals, dict) else {}).items():
                if number(value) and metric != "n":
                    out[f"{part + '/' if part else ''}{meta}={name}/{metric}"] = value
    report = adapter_report(metrics)
    for stage in report.stages if report else []:
        out[f"funnel/{stage.key}"] = stage.reached
    for measure in report.measures if report else []:
        if number(measure.value):
            out[f"measures/{measure.key}"] = measure.value
    for key in ("n", "failures", "parse_rate"):
        if number(metrics.get(key)):
            out[f"run/{key}"] = metrics[key]
    return out


def sweep_group() -> str | None:
    """The group of this Hydra multirun's points ("sweep-<date>_<time>" of its sweep directory),
    None outside a multirun."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
    except ImportError:
        return None
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    sweep_dir = Path(str(HydraConfig.get().sweep.dir))
    return "sweep-" + re.sub(r"[^A-Za-z0-9._-]+", "_", "_".join(sweep_dir.parts[-2:]))


def sample_rows(run_dir: Path, samples_file: str = "samples.jsonl") -> list[dict[str, Any]]:
    """LoggedRun.samples from the run's samples.jsonl and report_images/ (rvt_bench.harness.report)."""
    from rvt_bench.core.store import read_jsonl
    from rvt_bench.harness.report import IMAGES, image_name
    from rvt_bench.harness.visualize import score_value

    path = run_dir / samples_file
    if not path.exists():
        return []
    rows = []
    for k, row in enumerate(read_jsonl(path)):
        meta, response = row.get("meta") or {}, row.get("response") or {}
        image = run_dir / IMAGES / image_name(k, row["sample_id"])
        rows.append({"id": row["sample_id"], "task": row.get("task"), "level": meta.get("level"),
                     "category": meta.get("category"), "score": score_value(row.get("scores")),
                     "failure": (response.get("error") or {}).get("kind", "none"), "query": row.get("query"),
                     "answer": response.get("text"), "image": image if image.exists() else None})
    return rows


def make_logger(node: Any) -> Any | None:
    """The logger a config's `logger` node builds (hydra.utils.instantiate), None for logger=none.
    Raises ModuleNotFoundError when its package (wandb, tensorboard) is not installed."""
    if node is None or not node.get("_target_"):
        return None
    from hydra.utils import instantiate

    return instantiate(node, _convert_="all")


def log_run(logger: Any, run_dir: Path, root: Path, metrics: dict[str, Any], resolved: dict[str, Any],
            limit: int | None = None) -> str | None:
    """Log one scored run with `logger`; returns where it went (a directory or URL), None when the
    logging failed (one warning; the run's files are complete without it)."""
    from rvt_bench.harness import manifest

    config = {k: v for k, v in manifest.redact(resolved).items() if k != "hydra"}
    samples_file = "samples.jsonl" if limit is None else f"samples.limit{limit}.jsonl"
    report = run_dir / "report.html" if limit is None and (run_dir / "report.html").exists() else None
    run = LoggedRun(run_dir, root, metrics, json.loads(json.dumps(config, default=str)), sweep_group(),
                    sample_rows(run_dir, samples_file), report)
    try:
        return logger.log(run)
    except Exception as exc:  # noqa: BLE001  the results are written; the tracker is a view of them
        log.warning("logging to %s failed (%s: %s); the results are in %s", type(logger).__name__, type(exc).__name__,
                    str(exc).splitlines()[0] if str(exc) else "", run_dir)
        return None
