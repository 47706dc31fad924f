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

# Policy keys that change what the model generates (decoding), recorded per row.
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
    Columns: identity, source="run", headline metrics and "<key> ci_low" / "<key> ci_high"
    (fractions), judge_failure_rate, numeric analytics ("analytics/<name>", when the run has them),
    n, failures, parse_rate, data_errors, then provenance: git_sha, packages_digest, protocol,
    protocol_version, protocol_variants (JSON), decoding (JSON), model_ids (JSON), date (UTC), run_dir,
    overrides.
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
    for key in headline:
        row[key] = _number(metrics["metrics"].get(key))
        ci = cis.get(key) or {}
        row[f"{key} ci_low"], row[f"{key} ci_high"] = _number(ci.get("low")), _number(ci.get("high"))
    judge = metrics.get("judge") or {}
    if "failure_rate" in judge:
        row["judge_failure_rate"] = _number(judge["failure_rate"])
    for key, value in _flat(metrics.get("analytics") or {}):
        if _number(value) is not None:
            row[f"analytics/{key}"] = _number(value)
    policy = model.get("policy") if isinstance(model.get("policy"), dict) else {}
    row.update(
        n=metrics["n"], failures=metrics["failures"], parse_rate=_number(metrics["parse_rate"]),
        data_errors=metrics.get("data_errors", 0), git_sha=git_shas(run_dir),
        packages_digest=packages_digest(manifest.get("packages") or {}),
        protocol=metrics.get("protocol"), protocol_version=metrics.get("protocol_version"),
        protocol_variants=json.dumps(metrics.get("protocol_variants") or {}, sort_keys=True),
        decoding=json.dumps({**{f"model.{k}": model[k] for k in (*DECODING_KEYS, "max_rounds", "max_total_tokens") if k in model},
                             **{f"policy.{k}": policy[k] for k in DECODING_KEYS if k in policy}}, sort_keys=True, default=str),
        model_ids=json.dumps(_find(model, MODEL_ID_KEYS), sort_keys=True, default=str),
        date=str(manifest.get("started_utc", ""))[:10], run_dir=str(run_dir), overrides=" ".join(overrides),
    )
    return row


def _flat(node: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in node.items():
        path = f"{prefix}/{k}" if prefix else str(k)
        out += _flat(v, path) if isinstance(v, dict) else [(path, v)]
    return out
