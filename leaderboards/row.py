"""One leaderboard row for a scored run: identity, headline metrics with their 95% CIs, counts, and
provenance (what produced the numbers). Every metric column holds a fraction in [0, 1] or is empty;
text lives only in text columns (a metric without a value is empty, its reason in metrics.json
"unavailable")."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from rvt_bench.core.records import sample_counts
from rvt_bench.core.store import read_run_json
from rvt_bench.leaderboards.tables import cell_keys, cells_of, companion_keys, layout

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


ELIDED = ".../"  # an absolute path outside run.root and the working directory keeps only its last part


def portable_path(value: str, bases: list[Path]) -> str:
    """`value` as a leaderboard cell: a path under one of `bases` relative to it ("." for the base
    itself), any other absolute or home path (~) as ELIDED + its last part; text that is no path as
    it is. A shared board then holds no home directory and reads the same on another machine."""
    if not value.startswith(("/", "~")):
        return value
    path = Path(os.path.expanduser(value))
    for base in bases:
        try:
            return str(path.relative_to(base))
        except ValueError:
            continue
    return ELIDED + path.name if path.name else ELIDED


def portable_overrides(overrides: list[str], bases: list[Path]) -> list[str]:
    """Command-line overrides with every absolute path in a value made portable (portable_path);
    a value listing several (a sweep's model.root=/a,/b) has each made portable."""
    def one(arg: str) -> str:
        key, eq, value = arg.partition("=")
        if not eq:
            return arg
        return key + eq + re.sub(r"(?:^|(?<=,))[/~][^,]*", lambda m: portable_path(m.group(0), bases), value)
    return [one(a) for a in overrides]


def _bases(resolved: dict[str, Any]) -> list[Path]:
    root = (resolved.get("run") or {}).get("root")
    bases = [Path(os.path.abspath(os.path.expanduser(str(root))))] if root else []
    return bases + [Path.cwd()]


def split_cell_keys(dataset: str, metrics: dict[str, Any]) -> list[str]:
    """The cell keys of every split's columns of the benchmark's layout that the run has a value
    for (cell_keys asked once per split the layout names): every split's row has the same columns."""
    splits = [metrics.get("split"), *(c.split for c in layout(dataset, [metrics]).columns if c.split is not None)]
    out: list[str] = []
    for split in dict.fromkeys(splits):
        out += [k for k in cell_keys(dataset, {**metrics, "split": split}) if k not in out]
    return out


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
    metrics.json adapter_report.measures, in their unit), n (the samples the headline averages),
    excluded (samples the protocol's rule leaves out: MeViS's dropped expressions, ReVOS's no-target
    ones; rvt_bench.core.records.sample_counts), failures (failed predictions, missing ones included:
    in n as the protocol scores a failure, or excluded), data_errors (not scored), variant (the
    protocol variant the headline follows, metrics.json "variant", "" for the reference's; render
    marks it), complete
    (1 when nothing failed, no data error and no run.limit, else 0), parse_rate, then provenance: sandbox (run_sandbox: "bwrap", "none" or empty), git_sha, packages_digest, protocol, protocol_version, protocol_variants (JSON),
    variant (the protocol's named variant, dataset.protocol.variant: "" for the reference's rule; published rows carry theirs),
    decoding (the report's "grammar" | "free"; empty for a model that decodes under no grammar),
    sampling (JSON: the sampling settings of the model and policy), model_ids (JSON), date (UTC),
    run_dir (relative to run.root), overrides (absolute paths made portable: portable_overrides),
    data_source (JSON: metrics.json "data_source", {} for local files), not_comparable (JSON:
    metrics.json "not_comparable", {metric key: why, and the comparable variant}; tables mark them). The paper-table cells of
    every split are columns of every row (split_cell_keys), so all splits share one header.
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
    # the headline, the same metrics under the protocol's other rule (both numbers of one run), the table's cells
    keys = [*headline, *(k for k in companion_keys(metrics) if k not in headline)]
    for key in [*keys, *(k for k in split_cell_keys(metrics["dataset"], metrics) if k not in keys)]:
        row[key] = _number(cells.get(key))
        ci = cis.get(key) or {}
        if key in keys or ci:
            row[f"{key} ci_low"], row[f"{key} ci_high"] = _number(ci.get("low")), _number(ci.get("high"))
    judge = metrics.get("judge") or {}
    if "failure_rate" in judge:
        row["judge_failure_rate"] = _number(judge["failure_rate"])
    report = metrics.get("adapter_report") or {}
    for measure in report.get("measures") or []:
        if _number(measure.get("value")) is not None:
            row[f"adapter/{measure['key']}"] = _number(measure["value"])
    policy = model.get("policy") if isinstance(model.get("policy"), dict) else {}
    n, excluded, failures = sample_counts(metrics)
    data_errors = metrics.get("data_errors", 0)
    bases = _bases(resolved)
    row.update(
        n=n, excluded=excluded, failures=failures, data_errors=data_errors,
        # the protocol variant the headline follows (Protocol.variant_label; a run written before that
        # key: its protocol_variants' named variant)
        variant=str(metrics.get("variant") or (metrics.get("protocol_variants") or {}).get("variant") or ""),
        complete=int(not metrics["failures"] and not data_errors and not metrics.get("partial")),
        parse_rate=_number(metrics["parse_rate"]), sandbox=run_sandbox(manifest), git_sha=git_shas(run_dir),
        packages_digest=packages_digest(manifest.get("packages") or {}),
        protocol=metrics.get("protocol"), protocol_version=metrics.get("protocol_version"),
        protocol_variants=json.dumps(metrics.get("protocol_variants") or {}, sort_keys=True),
        decoding=report.get("decoding") or "",
        sampling=json.dumps({**{f"model.{k}": model[k] for k in (*DECODING_KEYS, "max_rounds", "max_total_tokens") if k in model},
                             **{f"policy.{k}": policy[k] for k in DECODING_KEYS if k in policy}}, sort_keys=True, default=str),
        model_ids=json.dumps(_find(model, MODEL_ID_KEYS), sort_keys=True, default=str),
        date=str(manifest.get("started_utc", ""))[:10], run_dir=portable_path(os.path.abspath(run_dir), bases),
        overrides=" ".join(portable_overrides(overrides, bases)),
        data_source=json.dumps(metrics.get("data_source") or {}, sort_keys=True),
        not_comparable=json.dumps(metrics.get("not_comparable") or {}, sort_keys=True),
    )
    return row

