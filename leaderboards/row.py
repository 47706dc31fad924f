"""One leaderboard row for a scored run: identity, headline metrics with their 95% CIs, counts, and
provenance (what produced the numbers). Every metric column holds a fraction in [0, 1] or is empty;
text lives only in text columns (a metric without a value is empty, its reason in metrics.json
"unavailable")."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from rvt_bench.core.store import read_run_json
from rvt_bench.leaderboards.tables import cell_keys, cells_of

# Policy keys that change what the model generates (sampling), recorded per row.
DECODING_KEYS = ("temperature", "top_p", "top_k", "min_p", "do_sample", "num_beams", "max_new_tokens", "max_tokens",
                 "repetition_penalty", "seed", "grammar", "stop", "decoding")
# Config keys that name weights, anywhere under the model config.
MODEL_ID_KEYS = ("model", "model_id", "pretrained", "revision", "weights", "checkpoint", "adapter_path", "gguf_file",
                 "base_model", "lora")


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return None


def _find(node: Any, keys: tuple[str, ...], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if k in keys and not isinstance(v, (dict, list)) and v not in (None, ""):
                out[path] = v
            elif isinstance(v, dict):
                out.update(_find(v, keys, path))
    return out


def packages_digest(packages: dict[str, str]) -> str:
    """12 hex of sha256 over the sorted package-version map of manifest.json."""
    return hashlib.sha256(json.dumps(packages, sort_keys=True).encode()).hexdigest()[:12]


def git_shas(run_dir: Path) -> str:
    """The code versions that made a run's predictions: the first sha, then any other resumed with."""
    manifest = read_run_json(Path(run_dir) / "manifest.json")
    shas = [manifest.get("git_sha", "unknown")] + [r.get("git_sha", "unknown") for r in manifest.get("resumes", [])]
    return ";".join(dict.fromkeys(shas))


def run_sandbox(manifest: dict[str, Any]) -> str:
    """How model-written code ran over every invocation of a run (manifest.json "sandbox" and its
    resumes'): "none" when any ran it unsandboxed (model.sandbox.isolation=none), else "bwrap", or
    "" when the model runs no code of its own."""
    seen = {str(entry.get("sandbox")) for entry in [manifest, *(manifest.get("resumes") or [])] if entry.get("sandbox")}
    return "none" if "none" in seen else ("bwrap" if "bwrap" in seen else "")


def component_name(node: Any) -> str:
    """Short name of a configured component: its `name`, `model`, or class (with `:runtime`)."""
    if not isinstance(node, dict):
        return ""
    name = node.get("name") or node.get("model") or str(node.get("_target_", "")).rsplit(".", 1)[-1]
    runtime = node.get("runtime")
    return f"{name}:{runtime}" if runtime else str(name)


def leaderboard_row(resolved: dict[str, Any], metrics: dict[str, Any], run_dir: Path, headline: list[str],
                    overrides: list[str]) -> dict[str, Any]:
    """The CSV row of a scored run (rvt_bench.leaderboards.publish.upsert keys it by fingerprint).

    resolved: the run's resolved config; metrics: the metrics.json body; headline: the protocol's
    headline keys; overrides: the semantic command-line overrides (tell sweep points apart).
    Columns: identity, source="run", headlines (JSON list), headline metrics and "<key> ci_low" /
    "<key> ci_high" (fractions), the other cells of the benchmark's paper table
    (rvt_bench.leaderboards.tables.cell_keys, with intervals where metrics.json has them),
    judge_failure_rate, the numeric measures of the model's own report ("adapter/<key>",
    metrics.json adapter_report.measures, in their unit), n, failures, parse_rate, data_errors,
    then provenance: sandbox (run_sandbox: "bwrap", "none" or empty), git_sha, packages_digest, protocol, protocol_version, protocol_variants (JSON),
    decoding (the report's "grammar" | "free"; empty for a model that decodes under no grammar),
    sampling (JSON: the sampling settings of the model and policy), model_ids (JSON), date (UTC),
    run_dir, overrides, data_source (JSON: metrics.json "data_source", {} for local files).
    """
    model = resolved["model"]
    manifest_path = Path(run_dir) / "manifest.json"
    manifest = read_run_json(manifest_path) if manifest_path.exists() else {}
    row: dict[str, Any] = {
        "run_name": metrics["run_name"], "fingerprint": metrics["fingerprint"], "dataset": metrics["dataset"],
        "split": metrics["split"], "model": metrics["model"], "policy": component_name(model.get("policy")),
        "perception": component_name(model.get("perception")), "source": "run",
        "headline": headline[0] if headline else "",
    }
    cis = metrics.get("ci") or {}
    row["headlines"] = json.dumps(list(headline))
    cells = cells_of(metrics)
    # the headline, then every cell of the benchmark's paper table (render draws it from the row)
    for key in [*headline, *(k for k in cell_keys(metrics["dataset"], metrics) if k not in headline)]:
        row[key] = _number(cells.get(key))
        ci = cis.get(key) or {}
        if key in headline or ci:
            row[f"{key} ci_low"], row[f"{key} ci_high"] = _number(ci.get("low")), _number(ci.get("high"))
    judge = metrics.get("judge") or {}
    if "failure_rate" in judge:
        row["judge_failure_rate"] = _number(judge["failure_rate"])
    report = metrics.get("adapter_report") or {}
    for measure in report.get("measures") or []:
        if _number(measure.get("value")) is not None:
            row[f"adapter/{measure['key']}"] = _number(measure["value"])
    policy = model.get("policy") if isinstance(model.get("policy"), dict) else {}
    row.update(
        n=metrics["n"], failures=metrics["failures"], parse_rate=_number(metrics["parse_rate"]),
        data_errors=metrics.get("data_errors", 0), sandbox=run_sandbox(manifest), git_sha=git_shas(run_dir),
        packages_digest=packages_digest(manifest.get("packages") or {}),
        protocol=metrics.get("protocol"), protocol_version=metrics.get("protocol_version"),
        protocol_variants=json.dumps(metrics.get("protocol_variants") or {}, sort_keys=True),
        decoding=report.get("decoding") or "",
        sampling=json.dumps({**{f"model.{k}": model[k] for k in (*DECODING_KEYS, "max_rounds", "max_total_tokens") if k in model},
                             **{f"policy.{k}": policy[k] for k in DECODING_KEYS if k in policy}}, sort_keys=True, default=str),
        model_ids=json.dumps(_find(model, MODEL_ID_KEYS), sort_keys=True, default=str),
        date=str(manifest.get("started_utc", ""))[:10], run_dir=str(run_dir), overrides=" ".join(overrides),
        data_source=json.dumps(metrics.get("data_source") or {}, sort_keys=True),
    )
    return row

