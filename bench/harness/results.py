"""The results files of a scored run beyond the protocol's aggregate: the versioned metrics.json
header, 95% bootstrap CIs of the headline metrics, and samples.jsonl (prompt, target, response and
scores of every sample together). The schema is documented in docs/metrics_schema.md."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from rvt_bench.harness import bootstrap
from rvt_bench.core.records import METRICS_SCHEMA_VERSION, RunMetrics, ScoreRecord
from rvt_bench.core.store import read_jsonl, write_json_atomic, write_jsonl_atomic
from rvt_bench.core.types import Prediction, Sample
from rvt_bench.leaderboards.tables import companion_keys

SAMPLE_LOG_VERSION = 1


def _nulls(node: dict, where: str, why: dict[str, str]) -> None:
    """Replace text standing where a number belongs (e.g. "judge: not configured") with None, in
    place, and record the text as the reason under its dotted key."""
    for k, v in list(node.items()):
        if isinstance(v, str):
            node[k] = None
            why[f"{where}{k}"] = v
        elif isinstance(v, dict):
            _nulls(v, f"{where}{k}.", why)


def mark_not_comparable(aggregate: dict[str, Any], why: str) -> None:
    """Mark every metric of a run (metrics.json "metrics" and each breakdown value, as table cell keys
    "<group>=<value>/<metric>": leaderboards.tables.cells_of) not comparable with published numbers
    for `why`, in aggregate["not_comparable"] ({key: why}, read by leaderboards/tables.py, which marks
    those cells); a key the protocol already marked keeps its own reason."""
    keys = [str(k) for k in (aggregate.get("metrics") or {})]
    for group, rows in (aggregate.get("breakdown") or {}).items():
        if isinstance(rows, dict):
            for name, values in rows.items():
                if isinstance(values, dict):
                    keys += [f"{group}={name}/{k}" for k in values if k != "n" and not str(k).endswith("_n")]
    marked = dict(aggregate.get("not_comparable") or {})
    for key in keys:
        marked.setdefault(key, why)
    if marked:
        aggregate["not_comparable"] = marked


def finish_metrics(metrics: RunMetrics, protocol: Any, resolved: dict[str, Any], scores_path: Path) -> None:
    """Complete a run's metrics in place with the versioned header: schema_version, units
    ("fraction"), metric_units ({key: "fraction" | "score"}: CIDEr is an unbounded score), headline,
    protocol_version (the protocol's `version`, 1 when it declares none), protocol_variants (its
    config options, e.g. {"mode": "reference"}), metric text replaced by null with the reason in
    unavailable, and ci: bootstrap.headline_cis over scores_path's records
    (run.bootstrap.B / run.bootstrap.seed, rvt_bench.harness.config.BootstrapConfig; B = 0 turns intervals off)."""
    spec = dict((resolved.get("dataset") or {}).get("protocol") or {})
    spec.pop("_target_", None)
    why: dict[str, str] = {}
    _nulls(metrics.aggregate.get("metrics") or {}, "", why)
    for group, rows in (metrics.aggregate.get("breakdown") or {}).items():
        if isinstance(rows, dict):
            _nulls(rows, f"breakdown.{group}.", why)
    from rvt_bench.core.units import unit

    metrics.schema_version, metrics.units, metrics.headline = METRICS_SCHEMA_VERSION, "fraction", list(protocol.headline)
    metrics.metric_units = {k: "score" if unit(k) == "score" else "fraction" for k in metrics.aggregate.get("metrics") or {}}
    metrics.protocol_version, metrics.protocol_variants = int(getattr(protocol, "version", 1)), spec
    label = protocol.variant_label() if callable(getattr(protocol, "variant_label", None)) else ""
    metrics.variant = label or None
    metrics.unavailable = why
    opts = resolved["run"]["bootstrap"]
    b, seed = int(opts["B"]), int(opts["seed"])
    records = [ScoreRecord.from_json(r) for r in read_jsonl(scores_path)] if b > 0 else []
    # the headline's intervals, and those of the same metrics under the protocol's other rule (both numbers)
    keys = list(protocol.headline) + companion_keys(metrics.to_json())
    metrics.ci = bootstrap.headline_cis(protocol, records, metrics.metrics, b, seed, keys) if b > 0 else {}
    if b > 0:  # the other cells of the benchmark's paper table (leaderboards/tables.py)
        from rvt_bench.harness.table_cis import table_cis

        metrics.ci.update(table_cis(protocol, records, metrics.to_json(), b, seed))


def _target(sample: Sample) -> dict[str, Any]:
    t = sample.target
    from rvt_bench.core.masks import area

    out: dict[str, Any] = {"answers": t.answers, "boxes": t.boxes}
    if t.masks is not None:
        # the RLEs stay in the dataset; the log says where the object is and how large
        out["mask_area"] = [None if m is None else int(area(m)) for m in t.masks]
    return out


def write_sample_log(path: Path, samples: list[Sample], preds: dict[str, Prediction], scores_path: Path,
                     adapter: Any = None) -> None:
    """samples.jsonl: per sample (dataset order) "sample_id", "task", "modality", "query", "frames",
    "meta", "prompt", "target" (answers, boxes, GT mask area per frame), "response" (declared task,
    text, boxes, predicted mask area per frame, full trace, error, timings) and "scores" (its
    scores.jsonl record). "prompt": the chat messages the model saw when the adapter exposes
    `prompt(sample)`; a system message shared by every sample is stored once in prompts.json beside
    it and referenced as {"role": "system", "ref": "prompts.json#<sha256[:12]>"}; null otherwise."""
    from rvt_bench.core.masks import area

    scores = {r["sample_id"]: r for r in read_jsonl(scores_path)}
    shared: dict[str, str] = {}
    rows = []
    for s in samples:
        p = preds[s.id]
        prompt = None
        if adapter is not None and callable(getattr(adapter, "prompt", None)):
            given = adapter.prompt(s)
            # a prompt is chat messages (DT-R1) or the exact string an adapter feeds its model (LISA)
            prompt = given if isinstance(given, str) else []
            for msg in ([] if isinstance(given, str) else given):
                if msg.get("role") == "system" and isinstance(msg.get("content"), str):
                    sha = hashlib.sha256(msg["content"].encode()).hexdigest()[:12]
                    shared[sha] = msg["content"]
                    msg = {"role": "system", "ref": f"prompts.json#{sha}"}
                prompt.append(msg)
        rows.append({
            "schema_version": SAMPLE_LOG_VERSION, "sample_id": s.id, "task": s.task, "modality": s.modality,
            "query": s.query, "frames": list(s.frames), "meta": s.meta, "prompt": prompt, "target": _target(s),
            "response": {"task": p.task, "text": p.text, "boxes": p.boxes,
                         "mask_area": None if p.masks is None else [None if m is None else int(area(m)) for m in p.masks],
                         "trace": p.trace, "error": p.error, "timings": p.timings},
            "scores": scores.get(s.id),
        })
    write_jsonl_atomic(path, rows)
    if shared:
        write_json_atomic(path.with_name("prompts.json"), shared)
